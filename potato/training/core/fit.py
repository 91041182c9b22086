"""Which trainers fit this project: those that take at least one of its schemes' annotation
kinds and read what its items hold (their text, images or audio). The Training form offers
only those (the others greyed, with the reason), Check judges only those, and a request for
one that does not fit is refused before it queues (``refusal``).
"""

from typing import Dict, FrozenSet, Optional

from potato.project import display
from potato.training.remote import trainers
from potato.training.core.runs import RequestError


def holds(cfg, store=None) -> FrozenSet[str]:
    """What the project's items hold: "text", and the media kinds they may name. A project
    whose items name media holds text only if some active item has text (the store says;
    without one, a media project is taken as one without text)."""
    kinds = set(display.media_kinds(cfg))
    if not kinds:
        return frozenset({"text"})  # every item then has its text_key
    if store is not None and store.conn().execute(
            "SELECT 1 FROM items WHERE active=1 AND text != '' LIMIT 1").fetchone():
        kinds.add("text")
    return frozenset(kinds)


def kinds(cfg):
    """The annotation kinds of the project's schemes."""
    return {s.annotation_type for s in cfg.schemes}


def reasons(cfg, store=None) -> Dict[str, str]:
    """Each trainer's name with why it does not fit this project ("" when it fits)."""
    has, types = holds(cfg, store), kinds(cfg)
    return {name: trainers.unfit(info, types, has)
            for name, info in trainers.all_trainers().items()}


def refusal(info, cfg, store=None) -> Optional[str]:
    """The sentence refusing a run of ``info`` on this project when it does not fit (what,
    where, what to do), else None."""
    why = trainers.unfit(info, kinds(cfg), holds(cfg, store))
    if not why:
        return None
    fitting = [n for n, r in reasons(cfg, store).items() if not r]
    return "Trainer %s does not fit project %s: %s. %s" % (
        info.name, cfg.path or "in this config", why,
        "Choose one that does: %s." % ", ".join(fitting) if fitting else
        "No trainer fits its schemes and items.")


def refuse(info, cfg, store=None) -> None:
    """Raises RequestError(400) with ``refusal``'s sentence when ``info`` does not fit."""
    why = refusal(info, cfg, store)
    if why:
        raise RequestError(400, why)
