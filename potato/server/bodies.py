"""Request bodies read into memory, each once, within its size cap and its deadline; mixed into
the request handler (``http.Handler``). Before a request has shown a key, a session or a run
token, its body is capped at ``UNAUTHENTICATED_BODY_MAX``, and a refused one is never read."""

import time
from typing import Any, Dict, List, Optional
from urllib.parse import parse_qs

from potato.server import safety
from potato.server.connections import BODY_FLOOR_S, BODY_MIN_RATE, body_deadline_s
from potato.server.errors import HTTPError

UNAUTHENTICATED_BODY_MAX = 4096  # a login form, a logout


class Bodies:
    def body(self, limit: Optional[int] = None) -> bytes:
        """The request body (read once); 413 beyond ``limit`` bytes (default: max_body_mb;
        UNAUTHENTICATED_BODY_MAX before a key, session or token was shown), 408 when it does
        not arrive within its deadline (connections.body_deadline_s)."""
        if self._body_read:
            return self._body
        limit = self.app.max_body_bytes if limit is None else min(limit,
                                                                   self.app.max_body_bytes)
        what = "server.max_body_mb caps every request"
        if not self.authenticated and limit > UNAUTHENTICATED_BODY_MAX:
            limit, what = UNAUTHENTICATED_BODY_MAX, "before a key, session or token is shown"
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise HTTPError(411, "Send the body with a Content-Length header.")
        try:
            n = int(length or 0)
        except ValueError:
            raise HTTPError(400, "Content-Length is not a number.")
        if n < 0:
            raise HTTPError(400, "Content-Length is negative.")
        if n > limit:
            self.close_connection = True
            raise HTTPError(413, f"The request body ({n} bytes) is larger than the server accepts "
                                 f"here ({limit} bytes; {what}).")
        self._body_read, self._body = True, b""
        data = self._read_within_deadline(n) if n else b""
        self._body = data
        return data

    def _read_within_deadline(self, n: int) -> bytes:
        self._body_deadline = time.monotonic() + body_deadline_s(n)
        self._set_deadline(body_deadline_s(n), "body")
        try:
            data = self.rfile.read(n)
        except BaseException:
            self.close_connection = True
            raise
        finally:
            self._set_deadline(None)
        if len(data) < n:
            raise self.body_ended(len(data), n)
        return data

    def body_ended(self, got: int, n: int) -> HTTPError:
        """The error for a body that stopped short: 408 past its deadline, else 400."""
        self.close_connection = True
        if time.monotonic() >= getattr(self, "_body_deadline", 0) - 0.5:
            return HTTPError(408, "The request body did not arrive in time: %d of %d bytes in "
                                 "%.0f s (a body may take %.0f s plus one second per %d KB)."
                             % (got, n, body_deadline_s(n), BODY_FLOOR_S, BODY_MIN_RATE >> 10))
        return HTTPError(400, "The request body ended after %d of %d bytes." % (got, n))

    def json_body(self, limit: Optional[int] = None) -> Any:
        """A JSON body, sent as application/json (a page on another site can send text/plain
        without asking, never JSON): 415 for another type, 400 for bad JSON."""
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/json" and not ctype.endswith("+json") and (
                self.headers.get("Content-Length") or "0").strip() != "0":
            raise HTTPError(415, "Send the body as JSON with Content-Type: application/json "
                                 "(not %s)." % (ascii(ctype[:60]) if ctype else "without one"))
        try:
            return safety.parse_json(self.body(limit))
        except safety.BadInput as e:
            raise HTTPError(400, f"The request body is not valid JSON: {e}.")

    def json_object(self, limit: Optional[int] = None) -> Dict[str, Any]:
        data = self.json_body(limit)
        if not isinstance(data, dict):
            raise HTTPError(400, "The request body must be a JSON object.")
        return data

    def form(self) -> Dict[str, List[str]]:
        ctype = self.headers.get("Content-Type") or ""
        if "application/x-www-form-urlencoded" not in ctype and self.body():
            raise HTTPError(400, "Send the form as application/x-www-form-urlencoded.")
        try:
            return parse_qs(self.body().decode("utf-8"), keep_blank_values=True)
        except UnicodeDecodeError:
            raise HTTPError(400, "The form is not valid UTF-8.")

    def _drain(self) -> None:
        """Read what the client sent (any method, GET included) so that the connection stays
        usable: an unread body would be parsed as the next request. A refused request whose
        sender showed no key, session or token is closed instead: its body is never read."""
        if getattr(self, "_body_read", True) or not self.headers.get("Content-Length"):
            return
        if getattr(self, "_refusing", False) and not self.authenticated:
            self.close_connection = True
            return
        try:
            self.body()
        except HTTPError:
            self.close_connection = True
