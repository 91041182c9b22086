"""Small questions about host names and addresses (standard library only)."""

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) means this machine only."""
    host = (host or "").strip("[]").lower()
    if host in ("", "localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"):
        return True
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return host.endswith(".localhost")
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or ip.is_unspecified or bool(mapped and mapped.is_loopback)


def in_networks(address: str, networks) -> bool:
    """Whether the client ``address`` is in one of ``networks`` (strings like ``10.0.0.0/24``
    or ``127.0.0.1``); an IPv4 address mapped into IPv6 counts as itself."""
    if not networks:
        return False
    try:
        ip = ipaddress.ip_address((address or "").strip("[]").split("%")[0])
    except ValueError:
        return False
    ip = getattr(ip, "ipv4_mapped", None) or ip
    return any(ip in ipaddress.ip_network(n, strict=False) for n in networks)
