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
