"""Checks at the HTTP boundary: JSON in and out, redirect targets, Host headers, and failed
admin logins. Each turns hostile input into a clear 4xx (``HTTPError``) or a safe default, so
nothing past the handler sees it raw.
"""

import json
import math
import re
import socket
import threading
import time
from typing import Any, Dict, Iterable, List, Optional
from urllib.parse import unquote, urlsplit

from potato.config.netaddr import is_loopback

MAX_JSON_DEPTH = 64


class BadInput(ValueError):
    """Input that cannot be accepted; ``str(e)`` says why."""


# -- JSON -------------------------------------------------------------------------------------

def _no_constant(name: str):
    raise BadInput("%s is not a number JSON allows" % name)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadInput("the number %s is out of range" % text[:40])
    return value


def _int(text: str) -> int:
    if len(text.lstrip("-")) > 30:
        raise BadInput("the integer %s... has more digits than any count Potato uses" % text[:20])
    return int(text)


def _check_tree(value: Any, depth: int = 0) -> None:
    if depth > MAX_JSON_DEPTH:
        raise BadInput("it is nested more than %d levels deep" % MAX_JSON_DEPTH)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise BadInput("it holds a lone surrogate (\\ud800-\\udfff) in a string")
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_tree(k, depth + 1)
            _check_tree(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check_tree(v, depth + 1)


_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def _too_deep(text: str) -> bool:
    """A cheap guard before the recursive decoder sees the text: brackets nest deeper than
    MAX_JSON_DEPTH (brackets inside strings do not count)."""
    depth = 0
    for m in _BRACKETS.finditer(text):
        ch = m.group()
        if ch in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def parse_json(raw: bytes) -> Any:
    """JSON from a request body: UTF-8, finite numbers only (no NaN, Infinity or 1e309), no
    lone surrogates, at most MAX_JSON_DEPTH levels. Raises BadInput with the reason."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput("it is not UTF-8")
    if _too_deep(text):
        raise BadInput("it is nested more than %d levels deep" % MAX_JSON_DEPTH)
    try:
        value = json.loads(text or "null", parse_constant=_no_constant, parse_float=_finite,
                           parse_int=_int)
    except json.JSONDecodeError as e:
        raise BadInput(str(e))
    except RecursionError:
        raise BadInput("it is nested too deeply")
    except ValueError as e:  # e.g. an integer too long to convert
        raise BadInput(str(e)[:200])
    _check_tree(value)
    return value


def finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (for output)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """JSON for a response: never NaN or Infinity, which no JSON parser accepts."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        return json.dumps(finite(value), allow_nan=False)


# -- redirects --------------------------------------------------------------------------------

def safe_next(url: Optional[str], default: str) -> str:
    """A same-site path to go to after a login, else ``default``: it starts with one ``/``,
    holds only printable ASCII (no TAB, CR, LF, which browsers drop or which would split
    headers), no backslash, and stays same-site once percent-decoded."""
    if not url or len(url) > 2000 or not url.startswith("/"):
        return default
    for candidate in (url, unquote(url)):
        if candidate.startswith("//") or "\\" in candidate:
            return default
        if any(ord(c) < 0x21 or ord(c) > 0x7e for c in candidate):
            return default
    return url


# -- Host headers -----------------------------------------------------------------------------

def host_of(header: Optional[str]) -> str:
    """The host name in a Host header, lower-case, without the port."""
    header = (header or "").strip().lower()
    if header.startswith("["):
        return header[:header.find("]") + 1] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def default_allowed_hosts(bound: str, server_url: Optional[str]) -> List[str]:
    """Loopback names, this host's names and addresses, the bound address, and server_url's."""
    names = {"localhost", "127.0.0.1", "[::1]"}
    for name in (socket.gethostname(), socket.getfqdn()):
        if name:
            names.add(name.lower())
            try:
                names.update(a[4][0] for a in socket.getaddrinfo(name, None))
            except OSError:
                pass
    if bound and bound not in ("0.0.0.0", "::", ""):
        names.add(bound.lower())
    if server_url:
        host = urlsplit(server_url).hostname
        if host:
            names.add(host.lower())
    # an IPv6 address is written as a Host header holds it: in brackets
    return sorted("[%s]" % n if ":" in n and not n.startswith("[") else n for n in names)


def host_allowed(header: Optional[str], allowed: Iterable[str]) -> bool:
    allowed = list(allowed)
    if "*" in allowed:
        return True
    return host_of(header) in allowed


def origin(scheme: Optional[str], netloc: Optional[str]) -> Optional[str]:
    """``scheme://host:port``, lower-case, with the scheme's default port written out, so that
    an Origin header and a Host header can be compared; None when either part is missing."""
    scheme, netloc = (scheme or "").strip().lower(), (netloc or "").strip().lower()
    if scheme not in ("http", "https") or not netloc or "@" in netloc:
        return None
    try:
        port = urlsplit("//" + netloc).port
    except ValueError:
        return None
    host = host_of(netloc)
    return "%s://%s:%d" % (scheme, host, port or (443 if scheme == "https" else 80))


def host_is_loopback(header: Optional[str]) -> bool:
    return is_loopback(host_of(header))


# -- failed admin logins ------------------------------------------------------------------------

class LoginLimiter:
    """At most ``limit`` failed admin logins per client address in ``window_s``; bounded
    memory (the oldest addresses are forgotten first)."""

    def __init__(self, limit: int = 10, window_s: float = 60.0, max_clients: int = 4096):
        self.limit, self.window_s, self.max_clients = limit, window_s, max_clients
        self._failures: Dict[str, List[float]] = {}
        self._lock = threading.Lock()

    def retry_after(self, client: str) -> int:
        """Seconds until ``client`` may try again (0: now)."""
        now = time.monotonic()
        with self._lock:
            recent = [t for t in self._failures.get(client, []) if now - t < self.window_s]
            if len(recent) < self.limit:
                return 0
            return max(1, int(self.window_s - (now - recent[0])) + 1)

    def failed(self, client: str) -> None:
        now = time.monotonic()
        with self._lock:
            recent = [t for t in self._failures.pop(client, []) if now - t < self.window_s]
            self._failures[client] = (recent + [now])[-self.limit:]
            while len(self._failures) > self.max_clients:
                self._failures.pop(next(iter(self._failures)))

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._failures.pop(client, None)
