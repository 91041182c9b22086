"""Request bodies too large to hold in memory (agents' uploads), streamed to files; mixed into
the request handler (``http.Handler``)."""

import os
import tempfile

from potato.server.errors import HTTPError


class Uploads:
    def _upload_length(self, limit: int, what: str) -> int:
        try:
            n = int(self.headers.get("Content-Length") or "")
        except ValueError:
            self.close_connection = True
            raise HTTPError(411, "Send the body with a Content-Length header.")
        if n < 0:
            self.close_connection = True
            raise HTTPError(400, "Content-Length is negative.")
        if n > limit:
            self.close_connection = True
            raise HTTPError(413, f"The upload ({n / 2**20:.1f} MB) is larger than {what} allows.")
        return n

    def _copy_body(self, out, n: int) -> int:
        """Copy the ``n``-byte body into the open file ``out`` as it arrives (never in memory)."""
        left = n
        while left > 0:
            block = self.rfile.read1(min(left, 4 << 20))
            if not block:
                self.close_connection = True
                raise HTTPError(400, f"The upload ended after {n - left} of {n} bytes.")
            out.write(block)
            left -= len(block)
        self._body_read = True
        self._body = b""
        return n

    def stream_body_to(self, path: str, limit: int, what: str) -> int:
        """Stream the request body into ``path`` (atomically); 413 beyond ``limit`` bytes."""
        n = self._upload_length(limit, what)
        fd, tmp = tempfile.mkstemp(prefix=".upload-", dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, "wb") as out:
                self._copy_body(out, n)
            os.replace(tmp, path)
        except BaseException:
            self.close_connection = True
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return n

    def append_body_to(self, path: str, limit: int, what: str) -> int:
        """Append the request body to ``path`` (streamed); 413 beyond ``limit`` bytes."""
        n = self._upload_length(limit, what)
        with open(path, "ab") as out:
            return self._copy_body(out, n)
