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
        """The figure that sums the report up: macro-F1 for classes, entity micro-F1 for spans,
        the mean absolute error for numbers (None where the report lacks it)."""
        name, key, higher = _HEADLINES[self.shape]
        return Headline(name, _num(self.data.get(key)), higher)

    @property
    def f1(self) -> Optional[float]:
        """The F1 that runs are sorted and filtered by (``min_score``): the headline where it is
        an F1, else the top level's macro-F1 (None for numbers alone)."""
        headline = self.headline
        if headline.higher_is_better:
            return headline.value
        return _num(self.data.get("macro_f1"))
