"""Request bodies too large to hold in memory (agents' uploads), streamed to files; mixed into
the request handler (``http.Handler``).

A body must keep up a minimum rate (``connections.body_too_slow``). On a full disk the rest
of the body is still read (and dropped) within that deadline, so the sender gets the 507 rather
than a broken pipe, and the connection stays usable."""

import errno
import os
import tempfile

from potato.server import diskfull
from potato.server.errors import HTTPError


class Uploads:
    def _upload_length(self, limit: int, what: str) -> int:
        n = self.content_length()
        if n is None:
            self.close_connection = True
            raise HTTPError(411, "Send the body with a Content-Length header.")
        if n > limit:
            self.close_connection = True
            raise HTTPError(413, f"The upload ({n / 2**20:.1f} MB) is larger than {what} allows.")
        return n

    def _copy_body(self, out, n: int, on_progress=None, with_count: bool = False) -> int:
        """Copy the ``n``-byte body into the open file ``out`` as it arrives (never in memory);
        ``on_progress()`` after each block (``on_progress(bytes so far)`` with
        ``with_count``). A full disk (found before or while writing) is raised once the whole
        body has been read."""
        self._body_read, self._body = True, b""
        disk = getattr(self.app, "disk", None)
        full = None
        if disk is not None and not disk.has_room(n):
            full = OSError(errno.ENOSPC, "less free space than the upload needs")
        self.begin_body()
        left = n
        try:
            while left > 0:
                block = self.read_body_block(left, n - left)
                if not block:
                    raise self.body_ended(n - left, n)
                left -= len(block)
                if full is None:
                    try:
                        out.write(block)
                    except OSError as e:
                        if not diskfull.is_full(e):
                            raise
                        full = e  # read the rest, so that the sender gets the answer
                if on_progress is not None:
                    on_progress(n - left) if with_count else on_progress()
        except BaseException:
            self.close_connection = True
            raise
        finally:
            self._set_deadline(None)
        if full is not None:
            raise full
        return n

    def stream_body_to(self, path: str, limit: int, what: str, on_progress=None) -> int:
        """Stream the request body into ``path`` (atomically); 413 beyond ``limit`` bytes."""
        n = self._upload_length(limit, what)
        fd, tmp = tempfile.mkstemp(prefix=".upload-", dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, "wb") as out:
                self._copy_body(out, n, on_progress)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return n

    def append_body_to(self, path: str, limit: int, what: str, on_progress=None) -> int:
        """Append the request body to ``path`` (streamed); 413 beyond ``limit`` bytes.
        ``on_progress(bytes so far)`` after each block."""
        n = self._upload_length(limit, what)
        with open(path, "ab") as out:
            return self._copy_body(out, n, on_progress, with_count=True)
