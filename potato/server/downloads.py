"""Responses that stream a file or a generated download (a mixin of the request handler,
``potato.server.http.Handler``), and the header-value rule every header goes through."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote


def header_value(value: Any) -> str:
    """A header value that cannot split headers or fail to encode: anything outside printable
    ASCII is percent-encoded (a Location built from a request path may hold any byte)."""
    text = str(value)
    if all(0x20 <= ord(c) <= 0x7e for c in text):
        return text
    return quote(text, safe="/?&=%#:;@!$'()*+,-._~ ")



class Downloads:
    """``send_file`` (resumable with a start offset) and ``send_stream`` (made while sent);
    the handler gives ``_head``, ``send_header``, ``end_headers``, ``wfile``, ``command``."""

    def send_file(self, path: str, start: int, size: int, content_type: str,
                  on_progress=None) -> None:
        """Send a file from ``start`` (206 with Content-Range when start > 0), streamed;
        ``on_progress()`` is called after each block (a long download is a sign of life)."""
        self._head(206 if start else 200, content_type, size - start)
        self.send_header("Content-Length", str(size - start))
        self.send_header("Accept-Ranges", "bytes")
        if start:
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        self.end_headers()
        if self.command == "HEAD":
            return
        with open(path, "rb") as f:
            f.seek(start)
            left = size - start  # exactly what Content-Length said, even if the file grows
            while left > 0:
                block = f.read(min(left, 1 << 20))
                if not block:  # the file shrank under us: the promised length cannot be kept
                    self.close_connection = True
                    break
                self.wfile.write(block)
                left -= len(block)
                if on_progress is not None:
                    on_progress()

    def send_stream(self, content_type: str, filename: str, write, length: int) -> None:
        """A download made while it is sent: ``write(out)`` writes exactly ``length`` bytes
        to the connection (if it raises, the connection closes short of Content-Length, so
        the client sees an incomplete download). ``filename``: what the browser saves."""
        self._head(200, content_type, length)
        self.send_header("Content-Length", str(length))
        self.send_header("Content-Disposition", header_value(
            'attachment; filename="%s"' % filename.replace('"', "")))
        self.end_headers()
        if self.command != "HEAD":
            write(self.wfile)
