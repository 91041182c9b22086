"""One scheme's held-out report as the views read it: which view draws it and its headline
figure.

``report.holdout_report`` builds the report, scored the way the scheme's kind says
(``Kind.report_as``: one of ``SHAPES``), and the run keeps it as JSON; ``HeldOut.from_dict``
reads that JSON back, old run records included, by the figures it holds (an entity report has
``micro_f1``, a class report ``accuracy``, a number report neither), so no view asks which
kind made it. The stored JSON is unchanged: ``as_dict`` gives it back as it was.
"""

import math
from dataclasses import dataclass
from typing import Any, Dict, Optional

CLASSES = "classes"    # accuracy, macro-F1, per label (radio, multiselect, select, likert ...)
NUMBERS = "numbers"    # MAE, RMSE, Spearman against the median (slider, number ...)
ENTITIES = "entities"  # entity-level precision, recall and F1 (span ...)
SHAPES = (CLASSES, NUMBERS, ENTITIES)

# (name, figure, higher is better) of each shape's headline
_HEADLINES = {CLASSES: ("macro-F1", "macro_f1", True), NUMBERS: ("MAE", "mae", False),
              ENTITIES: ("entity micro-F1", "micro_f1", True)}


def _num(value: Any) -> Optional[float]:
    """A finite number of the stored report, else None (as the pages read it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        return None
    return float(value)


@dataclass(frozen=True)
class Headline:
    name: str
    value: Optional[float]
    higher_is_better: bool


@dataclass(frozen=True)
class HeldOut:
    """A held-out report (one scheme's, or a run's top level) and the view shape it has."""

    shape: str
    data: Dict[str, Any]

    @classmethod
    def from_dict(cls, data: Any) -> "HeldOut":
        data = data if isinstance(data, dict) else {}
        if "micro_f1" in data:
            shape = ENTITIES
        elif _num(data.get("accuracy")) is None:
            shape = NUMBERS
        else:
            shape = CLASSES
        return cls(shape, data)

    def as_dict(self) -> Dict[str, Any]:
        return self.data

    @property
    def headline(self) -> Headline:
        """The figure that sums the report up, the one runs are compared by: macro-F1 for
        classes, the quadratic-weighted kappa for an ordinal scale (a Likert report has
        ``qwk``), entity micro-F1 for spans, the mean absolute error for numbers (None where the
        report lacks it)."""
        if self.shape == CLASSES and _num(self.data.get("qwk")) is not None:
            return Headline(KAPPA, _num(self.data.get("qwk")), True)
        name, key, higher = _HEADLINES[self.shape]
        return Headline(name, _num(self.data.get(key)), higher)

    @property
    def f1(self) -> Optional[float]:
        """The F1 that runs are sorted and filtered by (``min_score``): the headline where it is
        an F1, else the top level's macro-F1 (None for numbers alone)."""
        headline = self.headline
        if headline.name.endswith("F1"):
            return headline.value
        return _num(self.data.get("macro_f1"))

    @property
    def versus(self) -> Optional["Versus"]:
        """The model against its baseline (report.py's ``versus_baseline``), when recorded."""
        return Versus.from_dict(self.data.get("versus_baseline"))


KAPPA = "quadratic-weighted kappa"


@dataclass(frozen=True)
class Versus:
    """The headline figure of the model against the baseline's and against chance on the same
    test items (reports/versus.py); ``beats``: better than both."""

    figure: str
    higher_is_better: bool
    model: float
    baseline: float
    baseline_is: str
    n: int
    chance_bound: float
    shuffles: int
    beats: bool

    @classmethod
    def from_dict(cls, d: Any) -> Optional["Versus"]:
        if not isinstance(d, dict):
            return None
        nums = [_num(d.get(k)) for k in ("model", "baseline", "chance_bound")]
        if any(x is None for x in nums):
            return None
        n, shuffles = _num(d.get("n")), _num(d.get("shuffles"))
        return cls(str(d.get("figure") or "score")[:80], d.get("higher_is_better") is not False,
                   nums[0], nums[1], str(d.get("baseline_is") or "the baseline")[:200],
                   int(n) if n is not None and 0 <= n < 1e12 else 0, nums[2],
                   int(shuffles) if shuffles is not None and 0 <= shuffles < 1e9 else 0,
                   d.get("beats") is True)

    def _better(self, a: float, b: float) -> bool:
        return a > b if self.higher_is_better else a < b

    def _items(self) -> str:
        return "%d test item%s" % (self.n, "" if self.n == 1 else "s")

    def _chance_words(self) -> str:
        return ("1 in 40 shuffles of its answers across its %s scores %.3f or %s" % (
            self._items(), self.chance_bound, "more" if self.higher_is_better else "less"))

    def shortfall(self) -> str:
        """Why the model does not beat them, as words ("" when it does)."""
        if self.beats:
            return ""
        if not self._better(self.model, self.baseline):
            return "does not beat the baseline's (%.3f, %s)" % (self.baseline, self.baseline_is)
        return "is no better than chance (%s)" % self._chance_words()

    def sentence(self) -> str:
        """The verdict in words, for the run page, the CLI and the model card."""
        if not self.beats:
            return "%s %.3f: the model %s, so it has not shown it learned anything." % (
                self.figure, self.model, self.shortfall())
        return ("%s %.3f against %.3f for the baseline (%s) and against chance (%s), so the "
                "model beats both." % (self.figure, self.model, self.baseline,
                                       self.baseline_is, self._chance_words()))
