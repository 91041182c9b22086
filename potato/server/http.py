"""The request handler: routing, auth checks, body limits, and the one error choke point.

Every handler either returns normally (having sent a response) or raises ``HTTPError``; any
other exception is logged with its traceback on the server and answered with a short 500,
never a traceback. API paths answer errors as JSON ``{"error": ...}``, pages as plain HTML.
"""

from __future__ import annotations

import hmac
import html
import ipaddress
import logging
import re
import time
import traceback
from http import cookies
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import parse_qs, urlsplit

from potato.config.netaddr import in_networks
from potato.server import diskfull, safety
from potato.server.connections import (
    HEADER_DEADLINE_S, IDLE_TIMEOUT_S, address_key, write_deadline_s)
from potato.server.errors import HTTPError
from potato.server.bodies import Bodies
from potato.server.downloads import Downloads, header_value as _header_value
from potato.server.pages import error_page
from potato.server import crowd_route
from potato.server.uploads import Uploads

log = logging.getLogger("potato.server")

API_PREFIXES = ("/api/", "/admin/api/", "/admin/training/api/", "/agent/")
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                               "script-src 'self'; object-src 'none'; base-uri 'none'; "
                               "frame-ancestors 'none'",
}


Route = Tuple[str, "re.Pattern[str]", Callable, str]  # (method, path pattern, handler, access)


class Handler(Bodies, Uploads, Downloads, BaseHTTPRequestHandler):
    """One request. ``self.server.app`` holds the routes and the project state."""

    protocol_version = "HTTP/1.1"
    server_version = "Potato"
    sys_version = ""
    timeout = IDLE_TIMEOUT_S  # a connection idle (or a client silent) this long is closed
    # Headers and body go out as separate writes: without TCP_NODELAY, a kept-alive client's
    # next small response waits out its delayed ACK (40 ms a request: agents' media downloads)
    disable_nagle_algorithm = True

    # -- plumbing ------------------------------------------------------------------------------
    @property
    def app(self):
        return self.server.app

    def log_message(self, format: str, *args: Any) -> None:  # access log, common format
        self.app.access_log(f"{self.address_string()} - - [{self.log_date_time_string()}] "
                            f"{crowd_route.unlogged(self.app.config, format % args)}")

    def handle_one_request(self):
        """Between requests the connection is idle (the server may close it for a newcomer);
        from its first byte the request line and headers have HEADER_DEADLINE_S to arrive;
        from the end of the headers it is busy. A pipelined request is not read while the
        previous response is still unsent (``_await_sent``)."""
        self.connection.settimeout(self.timeout)
        # what the previous request on this kept-alive connection showed does not carry over,
        # not even to the tail of its response still in flight (_await_sent)
        self.authenticated = self.annotator_session = False
        idle = getattr(self.server, "connection_idle", None)
        if idle is not None:
            self.server.connection_untrusted(self.connection)
            if not self._await_sent():
                self.close_connection = True
                return
            idle(self.connection)
            try:
                first = self.rfile.peek(1)
            except OSError:  # silent for IDLE_TIMEOUT_S, or closed to make room
                first = b""
            if not first:
                self.close_connection = True
                return
            self._set_deadline(HEADER_DEADLINE_S, "headers")
        super().handle_one_request()

    def _set_deadline(self, seconds: Optional[float], phase: str = "",
                      floor: Optional[float] = None) -> None:
        set_deadline = getattr(self.server, "connection_deadline", None)
        if set_deadline is not None:
            set_deadline(self.connection, seconds, phase, floor)
            if phase and getattr(self, "authenticated", False):  # not closed to make room
                self.server.connection_trusted(self.connection)

    def parse_request(self) -> bool:
        """The request line and headers; from here on the connection is busy (until then a
        slow or silent client may be closed to make room)."""
        self._continue_wanted = False  # set by handle_expect_100, for this request only
        self._stall_s = None  # set by allow_stall, for this request only
        ok = super().parse_request()
        busy = getattr(self.server, "connection_busy", None)
        if ok and busy is not None:
            busy(self.connection)
        return ok

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def do_HEAD(self):
        self._dispatch("HEAD")

    @property
    def path_only(self) -> str:
        return urlsplit(self.path).path

    @property
    def query(self) -> Dict[str, List[str]]:
        return parse_qs(urlsplit(self.path).query)

    def wants_json(self) -> bool:
        path = self.path_only
        return path.startswith(API_PREFIXES) or "application/json" in (
            self.headers.get("Accept") or "")

    def _dispatch(self, method: str) -> None:
        self._body_read = False  # reading the body has begun (it is never read twice)
        self._started = False  # a response's status line has gone out
        self._response_cookies: List[str] = []
        self._admin_page = False  # an admin route the client may see: errors keep its layout
        self._access = ""
        self._refusing = False  # an error is being sent
        self.authenticated = False  # an admin key or session or a run token was shown
        self.annotator_session = False  # an annotator's (bodies: App.annotator_body_bytes)
        self._when_done: List[Callable[[], None]] = []  # see when_done
        try:
            self._check_host()
            self._route(method)
        except HTTPError as e:
            self._send_error(e.status, e.message, e.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except TimeoutError as e:  # a client that stopped sending its body (socket.timeout)
            self.close_connection = True
            log.info("%s %s: %s", method, self.path, e)
        except Exception as e:  # the one choke point: log the detail here, tell the client little
            if diskfull.is_full(e) and not self._started:
                self._disk_full(e)
                return
            log.error("error in %s %s:\n%s", method,
                      crowd_route.unlogged(self.app.config, self.path), traceback.format_exc())
            if self._started:  # half a response is out: the only honest end is to close
                self.close_connection = True
                return
            try:
                self._send_error(500, "Internal error in the Potato server; the server log has "
                                      "the details.")
            except Exception:
                log.error("the error page failed too:\n%s", traceback.format_exc())
                self._send_plain_500()
        finally:
            for release in reversed(self._when_done):
                release()

    def _disk_full(self, e: BaseException) -> None:
        """507 at once (logged once a minute, not once a request: the log is on a full disk)."""
        disk = getattr(self.app, "disk", None)
        message = disk.full(self.path_only, e) if disk is not None else str(e)
        self.close_connection = self.close_connection or not self._body_read
        self._send_error(507, message[:1].upper() + message[1:])

    def _send_plain_500(self) -> None:
        """The last resort: a fixed, tiny answer that cannot fail to render."""
        body = b"Internal error in the Potato server; the server log has the details.\n"
        try:
            self.wfile.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain; "
                             b"charset=utf-8\r\nConnection: close\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\n\r\n" + body)
        except OSError:
            pass
        self.close_connection = True

    def _route(self, method: str) -> None:
        path = self.path_only
        allowed = []
        for m, pattern, func, access in self.app.routes:
            match = pattern.fullmatch(path)
            if not match:
                continue
            if m != method and not (method == "HEAD" and m == "GET"):
                allowed.append(m)
                continue
            if method in ("POST", "PUT", "DELETE"):
                self._check_same_origin()
                if "/api/" in path:
                    self._check_json_type()
            self._access = access
            self._check_access(access)
            func(self, **match.groupdict())
            return
        if allowed:
            raise HTTPError(405, f"{method} is not allowed on {path}; use "
                                 f"{' or '.join(sorted(set(allowed)))}.",
                            {"Allow": ", ".join(sorted(set(allowed)))})
        raise HTTPError(404, f"Nothing at {path}.")

    def _check_host(self) -> None:
        """Only Host names this server answers to (DNS rebinding): 400, 421 behind TLS. One
        Host header, and no Transfer-Encoding (a body Potato would not read is refused rather
        than left on the connection to be parsed as the next request)."""
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise HTTPError(411, "Send the body with a Content-Length header (Potato reads no "
                                 "Transfer-Encoding).")
        if len(self.headers.get_all("Host") or []) > 1:
            self.close_connection = True
            raise HTTPError(400, "The request has more than one Host header.")
        self.content_length()  # one, and only digits: else 400 and the connection is closed
        if not safety.host_allowed(self.headers.get("Host"), self.app.allowed_hosts):
            host = safety.host_of(self.headers.get("Host"))[:100]
            raise HTTPError(421 if self.app.tls else 400,
                            f"This server does not answer to the host name {host!r}. Add it to "
                            f"allowed_hosts in the config if it is this server's name.")

    # -- auth ----------------------------------------------------------------------------------
    def client_is_loopback(self) -> bool:
        host = self.client_address[0] if self.client_address else ""
        try:
            return ipaddress.ip_address(host.split("%")[0]).is_loopback
        except ValueError:
            return False

    def cookie(self, name: str) -> Optional[str]:
        jar = cookies.SimpleCookie()
        try:
            jar.load(self.headers.get("Cookie") or "")
        except cookies.CookieError:
            return None
        return jar[name].value if name in jar else None

    def is_admin(self) -> bool:
        key = self.app.config.admin_api_key
        given = self.headers.get("X-API-Key")
        if key and given is not None:
            client = self.client_key()
            wait = self.app.login_limiter.retry_after(client)
            if wait:
                raise HTTPError(429, "Too many wrong admin keys from this address; try again "
                                     "in %d s." % wait, {"Retry-After": str(wait)})
            if hmac.compare_digest(given.encode("utf-8", "replace"), key.encode()):
                return True
            self.app.login_limiter.failed(client)
        token = self.cookie(self.app.admin_cookie)
        if token and self.app.store.session(token, "admin") == self.app.admin_session_name:
            return True  # a session made under the current admin_api_key, not an older one
        return bool(self.app.config.debug and self.client_is_loopback()
                    and safety.host_is_loopback(self.headers.get("Host"))
                    and not self.from_trusted_proxy() and not self._forwarded())

    def _forwarded(self) -> bool:
        """Whether a proxy passed this request on (it came from elsewhere, whatever the
        socket's address says): any X-Forwarded-* or Forwarded header."""
        return any(k.lower().startswith("x-forwarded-") or k.lower() == "forwarded"
                   for k in self.headers.keys())

    def annotator(self) -> Optional[str]:
        token = self.cookie(self.app.session_cookie)
        user = self.app.store.session(token, "annotator") if token else None
        crowd = self.app.config.upstream.crowd  # an invitation taken back ends its sessions
        if user is not None and crowd is not None and crowd.invites and \
                user not in crowd.invites.values():
            return None
        return user

    def _check_access(self, access: str) -> None:
        if access == "admin" and not self.is_admin():
            if self.wants_json() or self.command != "GET":
                raise HTTPError(401, "Admin access needed: send the X-API-Key header with "
                                     "admin_api_key, or log in at /admin/login.")
            raise HTTPError(303, "Log in as admin first.",
                            {"Location": "/admin/login?next=" + self.path_only})
        self._admin_page = access == "admin"
        if access == "annotator" and not self.annotator():
            if self.wants_json():
                raise HTTPError(401, "Log in first (POST /login with a username).")
            raise HTTPError(303, "Log in first.", {"Location": "/login"})
        # An annotator session is no credential (anyone may make one): its bodies stay small.
        self.authenticated = access == "admin"
        self.annotator_session = access == "annotator"

    def _check_json_type(self) -> None:
        """A JSON API action takes a JSON body or none: a body-less action (cancel, pin, use)
        that says another type is refused too (415), as a page on another site can make a
        browser send ``text/plain`` without asking, never ``application/json``."""
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype and ctype != "application/json" and not ctype.endswith("+json"):
            raise HTTPError(415, "Send the body as JSON with Content-Type: application/json, "
                                 "or no body and no Content-Type (not %s)." % ascii(ctype[:60]))

    def _check_same_origin(self) -> None:
        """Refuse state-changing requests that a page on another site made the browser send.
        ``Origin`` must be this server's own scheme and host: as the request reached it, as
        ``server_url`` says, or as a proxy in ``server.trusted_proxies`` forwarded it."""
        if (self.headers.get("Sec-Fetch-Site") or "").lower() == "cross-site":
            raise HTTPError(403, "Cross-origin request refused: Potato accepts changes only "
                                 "from its own pages.")
        origin = self.headers.get("Origin")
        if origin is None:  # not sent by a browser page (curl, the CLI, an agent)
            return
        scheme = "https" if self.app.tls else "http"
        own = {safety.origin(scheme, self.headers.get("Host"))}
        if self.app.config.server_url:
            u = urlsplit(self.app.config.server_url)
            own.add(safety.origin(u.scheme, u.netloc))
        if self.from_trusted_proxy():
            forwarded = (self.headers.get("X-Forwarded-Host") or "").split(",")[0].strip()
            proto = (self.headers.get("X-Forwarded-Proto") or scheme).split(",")[0].strip()
            own.add(safety.origin(proto, forwarded or self.headers.get("Host")))
        given = urlsplit(origin)
        if safety.origin(given.scheme, given.netloc) not in own - {None}:
            raise HTTPError(403, f"Cross-origin request from {origin[:200]} refused: Potato "
                                 f"accepts changes only from its own pages. Behind a reverse "
                                 f"proxy, set server_url to the public URL, or list the proxy "
                                 f"in server.trusted_proxies.")

    def from_trusted_proxy(self) -> bool:
        """Whether this connection comes from an address in ``server.trusted_proxies``."""
        client = self.client_address[0] if self.client_address else ""
        return in_networks(str(client), self.app.config.server.trusted_proxies)

    def forwarded_client(self) -> Optional[str]:
        """Behind a trusted proxy, the client it names: the right-most X-Forwarded-For entry
        (the one the proxy added; those left of it are the client's own word). None when the
        peer is no trusted proxy or names no valid address."""
        if not self.from_trusted_proxy():
            return None
        entries = ",".join(self.headers.get_all("X-Forwarded-For") or []).split(",")
        try:
            return str(ipaddress.ip_address(entries[-1].strip()))
        except ValueError:
            return None

    def client_key(self) -> str:
        """Who a per-client limit counts: the forwarded client behind a trusted proxy, else
        the socket's address; an IPv6 /64 as one (connections.address_key)."""
        return address_key(self.forwarded_client() or (str(self.client_address[0])
                                                        if self.client_address else ""))

    # -- responses -----------------------------------------------------------------------------
    def set_cookie(self, name: str, value: str, max_age: int, same_site: str = "Strict") -> None:
        parts = [f"{name}={value}", "Path=/", "HttpOnly", f"SameSite={same_site}",
                 f"Max-Age={max_age}"]
        if self.app.tls or (self.app.config.server_url or "").lower().startswith("https://"):
            parts.append("Secure")  # served over TLS, here or by a proxy in front
        self._response_cookies.append("; ".join(parts))

    def send(self, status: int, body: bytes, content_type: str,
             headers: Optional[Dict[str, str]] = None) -> None:
        self.start_response(status, content_type, len(body), headers)
        if self.command != "HEAD":
            self.wfile.write(body)

    def start_response(self, status: int, content_type: str, length: int,
                       headers: Optional[Dict[str, str]] = None) -> None:
        """Everything up to the body (``length`` bytes, which the caller writes unless HEAD).
        ``headers`` may replace a default (Cache-Control, Content-Security-Policy)."""
        headers = headers or {}
        self._head(status, content_type, length, headers)
        self.send_header("Content-Length", str(length))
        for c in self._response_cookies:
            self.send_header("Set-Cookie", c)
        for k, v in headers.items():
            self.send_header(k, _header_value(v))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()

    def _head(self, status: int, content_type: str, length: int = 0,
              own: Optional[Dict[str, str]] = None) -> None:
        """The status line and the headers every response has (but those in ``own``); from
        here the client has ``write_deadline_s(length)`` to take the response."""
        self._drain()
        self._started = True
        self._write_deadline = time.monotonic() + write_deadline_s(length)
        self._set_deadline(write_deadline_s(length), "write")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for k, v in (("Cache-Control", "no-store"), *SECURITY_HEADERS.items()):
            if k not in (own or {}):
                self.send_header(k, v)

    def send_json(self, data: Any, status: int = 200) -> None:
        self.send(status, safety.dumps(data).encode("utf-8"), "application/json")

    def send_html(self, page: str, status: int = 200,
                  headers: Optional[Dict[str, str]] = None) -> None:
        disk = getattr(self.app, "disk", None)
        note = disk.banner() if disk is not None and self._access == "admin" else None
        if note:  # a full disk is news on every admin page
            page = page.replace("<main>", '<main>\n<p class="error banner" role="alert">%s</p>'
                                % html.escape(note), 1)
        # "replace": a lone surrogate (say, a file name that is not UTF-8) cannot fail a page
        self.send(status, page.encode("utf-8", "replace"), "text/html; charset=utf-8", headers)

    def redirect(self, location: str) -> None:
        self.send(303, b"", "text/plain; charset=utf-8", {"Location": location})

    def _send_error(self, status: int, message: str,
                    headers: Optional[Dict[str, str]] = None) -> None:
        self._refusing = status >= 400
        if status == 303:
            self.send(303, b"", "text/plain; charset=utf-8", headers)
        elif self.wants_json():
            self.send(status, safety.dumps({"error": message}).encode("utf-8"), "application/json",
                      headers)
        else:
            page = error_page(self.app.config, status, message,
                              admin=getattr(self, "_admin_page", False), path=self.path_only)
            self.send(status, page.encode("utf-8"), "text/html; charset=utf-8", headers)
