"""A run's write-back result as code reads it: what was written, what was not and why, and
which schemes the run was put in use for.

``ingest.write_back`` makes one and the run keeps it as JSON (the ``writeback`` column, the
API's ``writeback``, the ``scored`` event); ``WriteBack.from_dict`` reads that JSON back, old
run records included: a missing or malformed key reads as its empty value, unknown keys are
ignored. ``as_dict`` gives the stored JSON, with the keys it always had.
"""

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


def _count(value: Any) -> int:
    """A count of the stored JSON (0 where it is missing or not a finite number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        return 0
    return int(value)


def _number(value: Any) -> Optional[float]:
    """min_confidence as stored (an int stays an int, so sentences quote it as configured)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        return None
    return value


def _names(value: Any) -> List[str]:
    return [str(s) for s in value] if isinstance(value, list) else []


def _texts(value: Any) -> Dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


@dataclass
class WriteBack:
    """``written``: predictions kept for the write-back schemes; ``below_min_confidence`` and
    ``unlabeled_skipped``: predictions not kept, and why; ``by_label``: the written ones
    counted by predicted label (not for number schemes); ``in_use``: the schemes the run was
    put in use for, ``took_over`` why (scheme -> sentence), ``kept_in_use`` why not."""

    written: int = 0
    below_min_confidence: int = 0
    unlabeled_skipped: int = 0
    schemes: List[str] = field(default_factory=list)
    min_confidence: Optional[float] = None
    by_label: Dict[str, int] = field(default_factory=dict)
    in_use: List[str] = field(default_factory=list)
    kept_in_use: Dict[str, str] = field(default_factory=dict)
    took_over: Dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Any) -> "WriteBack":
        d = data if isinstance(data, dict) else {}
        by_label = d.get("by_label") if isinstance(d.get("by_label"), dict) else {}
        return cls(written=_count(d.get("written")),
                   below_min_confidence=_count(d.get("below_min_confidence")),
                   unlabeled_skipped=_count(d.get("unlabeled_skipped")),
                   schemes=_names(d.get("schemes")),
                   min_confidence=_number(d.get("min_confidence")),
                   by_label={str(k): _count(v) for k, v in by_label.items()},
                   in_use=_names(d.get("in_use")),
                   kept_in_use=_texts(d.get("kept_in_use")),
                   took_over=_texts(d.get("took_over")))

    def as_dict(self) -> Dict[str, Any]:
        return {"written": self.written, "below_min_confidence": self.below_min_confidence,
                "unlabeled_skipped": self.unlabeled_skipped, "schemes": list(self.schemes),
                "min_confidence": self.min_confidence, "by_label": dict(self.by_label),
                "in_use": list(self.in_use), "kept_in_use": dict(self.kept_in_use),
                "took_over": dict(self.took_over)}

    @property
    def why(self) -> Dict[str, str]:
        """Per scheme, why the run was or was not put in use (a sentence each)."""
        return dict(self.took_over, **self.kept_in_use)

    def kept_words(self, in_use: Optional[List[str]] = None) -> str:
        """"872 predictions written for sentiment" when annotators see them (the run is in use
        for its schemes: ``in_use``, the ones it took over unless given), else "872
        predictions kept for sentiment, not shown (the run is not in use)"; both for a run in
        use for some of its schemes."""
        n = "%d prediction%s" % (self.written, "" if self.written == 1 else "s")
        in_use = self.in_use if in_use is None else in_use
        shown = [s for s in self.schemes if s in in_use]
        hidden = [s for s in self.schemes if s not in in_use]
        if not hidden:
            return "%s written for %s" % (n, ", ".join(self.schemes))
        if not shown:
            return "%s kept for %s, not shown (the run is not in use)" % (n, ", ".join(hidden))
        return "%s written for %s; for %s kept, not shown (not in use)" % (
            n, ", ".join(shown), ", ".join(hidden))

    @property
    def all_below(self) -> bool:
        """Nothing was written because every prediction fell below min_confidence."""
        return bool(self.below_min_confidence) and not self.written
