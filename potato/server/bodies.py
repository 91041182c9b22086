"""Request bodies read into memory, each once, within its size cap and its rate floor; mixed
into the request handler (``http.Handler``). Before a request has shown an admin key or session
or a run token, its body is capped at ``UNAUTHENTICATED_BODY_MAX`` (with an annotator's session,
which anyone can make, at what one save of the project's schemes can take:
``App.annotator_body_bytes``), and a refused one is never read: the 4xx goes
out, the connection's sending side is shut, and at most ``LINGER_BYTES`` of what the client
still sends are dropped for ``LINGER_S`` before the close (so that the close does not reset the
connection before the client has read its answer). ``100 Continue`` is sent only when the body
is about to be read. A pipelined request waits until the previous response has left."""

import fcntl
import re
import socket
import ssl
import struct
import termios
import time
from typing import Any, Callable, Dict, List, Optional
from urllib.parse import parse_qs

from potato.server import safety
from potato.server.connections import (
    BODY_FLOOR_S, BODY_MIN_RATE, IDLE_TIMEOUT_S, body_cut_at, body_too_slow)
from potato.server.errors import HTTPError

UNAUTHENTICATED_BODY_MAX = 4096  # a login form, a logout
LINGER_BYTES = 64 << 10
LINGER_S = 2.0
_DIGITS = re.compile(r"[0-9]{1,15}")


class Bodies:
    def body(self, limit: Optional[int] = None) -> bytes:
        """The request body (read once); 413 beyond ``limit`` bytes (default: max_body_mb;
        less before an admin key or a run token was shown), 408 when it falls behind the rate
        floor (connections.body_too_slow)."""
        if self._body_read:
            return self._body
        limit = self.app.max_body_bytes if limit is None else min(limit,
                                                                   self.app.max_body_bytes)
        what = "server.max_body_mb caps every request"
        if not self.authenticated and getattr(self, "annotator_session", False):
            if limit > self.app.annotator_body_bytes:
                limit, what = self.app.annotator_body_bytes, (
                    "for an annotator's request: what one save of this project's schemes "
                    "can take")
        elif not self.authenticated and limit > UNAUTHENTICATED_BODY_MAX:
            limit, what = UNAUTHENTICATED_BODY_MAX, "before a key, session or token is shown"
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise HTTPError(411, "Send the body with a Content-Length header.")
        n = self.content_length() or 0
        if n > limit:
            self.close_connection = True
            raise HTTPError(413, f"The request body ({n} bytes) is larger than the server accepts "
                                 f"here ({limit} bytes; {what}).")
        self._body_read, self._body = True, b""
        data = self._read_within_deadline(n) if n else b""
        self._body = data
        return data

    def when_done(self, release: Callable[[], None]) -> None:
        """Call ``release()`` once this request has been answered (or has failed)."""
        self._when_done.append(release)

    def watch(self, check: Callable[[], Optional[str]]) -> None:
        """While this request lasts, the server asks ``check()``; once it gives a reason, the
        body is cut off and answered 409 with that reason (``connections.connection_watch``)."""
        watch = getattr(self.server, "connection_watch", None)
        if watch is not None:
            watch(self.connection, check)

    def content_length(self) -> Optional[int]:
        """The one Content-Length header, 1 to 15 digits (None: none); else 400, and the
        connection is closed (where this body ends cannot be known)."""
        given = self.headers.get_all("Content-Length") or []
        if len(given) > 1 or (given and not _DIGITS.fullmatch(given[0])):
            self.close_connection = True
            self._body_read = True  # nothing to drain: the connection closes
            negative = len(given) == 1 and given[0].strip().startswith("-")
            raise HTTPError(400, "%sThe request needs one Content-Length header of 1 to 15 "
                                 "digits (it has %s)." % (
                                     "Content-Length is negative. " if negative else "",
                                     ", ".join(ascii(v[:20]) for v in given)))
        return int(given[0]) if given else None

    def allow_stall(self, seconds: float) -> None:
        """For this request's body only, from a sender already authenticated (an agent's model
        files): a pause of up to ``seconds`` with nothing sent is allowed (longer raises
        ``socket.timeout``: the route turns it into the tutorial's "sent nothing for N s"),
        and the rate floor starts after ``seconds`` instead of BODY_FLOOR_S (so a body still
        has a total deadline: ``seconds`` plus one second per BODY_MIN_RATE bytes)."""
        if not self.authenticated:
            raise HTTPError(401, "Only an authenticated sender may stream this body.")
        self._stall_s = seconds

    def _floor_s(self) -> float:
        return getattr(self, "_stall_s", None) or BODY_FLOOR_S

    def begin_body(self) -> None:
        """The body is about to be read: the ``100 Continue`` a client asked for (deferred
        until now, so that a refused body is never invited), and the rate floor starts."""
        self._body_began = time.monotonic()
        self._set_deadline(float("inf"), "body", self._floor_s())  # connections.body_too_slow
        if getattr(self, "_continue_wanted", False):
            self._continue_wanted = False
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def read_body_block(self, left: int, got: int) -> bytes:
        """Up to ``left`` bytes of the body as they arrive; the server is told the progress.
        An empty block: the body fell behind the floor, or the server cut it off."""
        stall = getattr(self, "_stall_s", None)
        began = getattr(self, "_body_began", time.monotonic())
        cut = body_cut_at(began, got, self._floor_s())  # behind the floor from then on
        wait = min(stall or IDLE_TIMEOUT_S, max(0.05, cut - time.monotonic()))
        self.connection.settimeout(wait)
        try:  # the read itself ends at the floor: over TLS too the 408 can still be sent
            block = self.rfile.read1(min(left, 4 << 20))
        except (TimeoutError, ssl.SSLError, ConnectionResetError) as e:  # behind, cut, reset
            if (isinstance(e, TimeoutError) and stall and wait >= stall
                    and time.monotonic() < cut):  # an agent's pause (a reset is none)
                raise socket.timeout("nothing sent for %d s" % stall)
            block = b""
        progress = getattr(self.server, "body_progress", None)
        if progress is not None:
            progress(self.connection, got + len(block))
        return block

    def _read_within_deadline(self, n: int) -> bytes:
        self.begin_body()
        parts, got = [], 0
        try:
            while got < n:
                block = self.read_body_block(n - got, got)
                if not block:
                    raise self.body_ended(got, n)
                parts.append(block)
                got += len(block)
        except BaseException:
            self.close_connection = True
            raise
        finally:
            self._set_deadline(None)
        return b"".join(parts)

    def body_ended(self, got: int, n: int) -> HTTPError:
        """The error for a body that stopped short: the server's reason when it cut the body
        off (409), 408 behind the rate floor, else 400."""
        self.close_connection = True
        cut = getattr(self.server, "connection_cut", None)
        reason = cut(self.connection) if cut is not None else None
        if reason:
            return HTTPError(409, reason)
        took = time.monotonic() - getattr(self, "_body_began", time.monotonic())
        if body_too_slow(got, took, self._floor_s()):
            return HTTPError(408, "The request body did not arrive in time: %d of %d bytes in "
                                 "%.0f s (a body must keep up %d KB/s after its first %.0f s)."
                             % (got, n, took, BODY_MIN_RATE >> 10, self._floor_s()))
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
        if getattr(self, "_body_read", True) or self.headers.get("Content-Length") in (None,
                                                                                       "0"):
            return
        if getattr(self, "_refusing", False) and not self.authenticated:
            self.close_connection = True
            return
        try:
            self.body()
        except HTTPError:
            self.close_connection = True

    # -- the connection around a body ------------------------------------------------------------
    def handle_expect_100(self) -> bool:
        """http.server would send ``100 Continue`` before the route has checked anything: it
        is sent when the body is read (``begin_body``), never for a refused one."""
        self._continue_wanted = True
        return True

    def _await_sent(self) -> bool:
        """Before the next (pipelined) request is read: wait until the previous response has
        left this machine, within its write deadline (the server closes a connection whose
        client does not take its response). False: the connection is to be closed."""
        sock = getattr(self.connection, "fileno", None)
        # The first checks come fast: a kept-alive client's ACK usually rides on its next
        # request a moment later (a 5 ms first sleep cost agents' media downloads 10 ms a file)
        wait, deadline = 0.0002, getattr(self, "_write_deadline", None)
        closed = getattr(self.server, "connection_closed", None)
        while sock is not None and deadline is not None:  # after a response only
            try:
                unsent = struct.unpack("i", fcntl.ioctl(sock(), termios.TIOCOUTQ,
                                                        struct.pack("i", 0)))[0]
            except (OSError, ValueError):
                return False if sock() < 0 else True
            if unsent <= 0:
                return True
            if closed is not None and closed(self.connection):
                return False  # closed for a newcomer: its queue may never empty
            if time.monotonic() > deadline:
                return False
            time.sleep(wait)
            wait = min(wait * 2, 0.2)
        return True

    def finish(self) -> None:
        super().finish()
        if getattr(self, "_body_read", True) or self.headers.get("Content-Length") in (None,
                                                                                       "0"):
            return
        try:  # a body left unread: shut our side, drop what still comes for a moment, close
            if isinstance(self.connection, socket.socket):  # the base method: TLS too
                socket.socket.shutdown(self.connection, socket.SHUT_WR)
            else:
                self.connection.shutdown(socket.SHUT_WR)
            end, dropped = time.monotonic() + LINGER_S, 0
            while dropped < LINGER_BYTES and time.monotonic() < end:
                self.connection.settimeout(max(0.01, end - time.monotonic()))
                block = self.connection.recv(LINGER_BYTES - dropped)
                if not block:
                    break
                dropped += len(block)
        except (OSError, ValueError):
            pass
