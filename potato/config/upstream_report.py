"""The migration report of an upstream config (``potato validate``; with ``--upstream``, what
each key does here): the keys implemented, accepted but unused and blocking, from
``potato.config.upstream``'s ``Upstream`` and ``POLICY``."""

from __future__ import annotations

from typing import Dict, List

from potato.config.upstream import Upstream
from potato.config.upstream_keys import POLICY, REFUSED


def report_lists(up: Upstream) -> Dict[str, List[str]]:
    """The migration report's three lists: implemented, accepted but unused, blocking (the
    refused keys, then each scheme or display type not here with how many ask for it)."""
    return {"implemented": list(up.implemented), "accepted": list(up.accepted),
            "blocking": blocking(up)}


def blocking(up: Upstream) -> List[str]:
    return list(up.refused) + ["%s (%d %s)" % (what, n, ("scheme" if what.startswith(
        ("annotation_type", "scheme key")) else "field") + ("s" if n != 1 else ""))
        for what, n in up.blockers.items()]


def migration_report(up: Upstream, errors: int, why: bool = False) -> List[str]:
    """The three short lists, as lines (``potato validate`` on an upstream config); ``why``
    (``--upstream``): then each key's decided answer in a sentence."""
    lines = ["Upstream Potato keys in this config:"]
    blocked = blocking(up)
    for title, keys in (("implemented", up.implemented),
                        ("accepted but unused", up.accepted), ("blocking", blocked)):
        lines.append(f"  {title} ({len(keys)}): {', '.join(keys) if keys else '-'}")
    other = errors - len(up.refused) - sum(up.blockers.values())
    if other > 0:
        lines.append(f"  and {other} other error(s) listed above block it too.")
    if up.unknown:
        lines.append(f"  unknown to both (ignored): {', '.join(up.unknown)}")
    if why and (up.implemented or up.accepted or up.refused or up.blockers):
        lines.append("What each upstream key does here:")
        for title, keys in (("implemented", up.implemented),
                            ("accepted, no effect", up.accepted), ("refused", up.refused)):
            lines += [f"  {key} ({title}): " + _why(key, title) for key in keys
                      if key in POLICY]
        lines += [f"  {what}: not here; its error above says what to do" for what in up.blockers]
    return lines


def _why(key: str, title: str) -> str:
    policy = POLICY[key]
    if title == "refused" and policy.status != REFUSED:
        return ("refused for the value given (another form of it works here); its error above "
                "says what to do")
    if title != "refused" and policy.status == REFUSED:
        return "turned off in this config, so it asks for nothing; turned on, " + policy.why
    return policy.why
