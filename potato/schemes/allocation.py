"""A total shared out over the labels: ``constant_sum`` (upstream's ``total_points``,
default 100, at least ``min_per_item`` per label, default 0) and ``soft_label`` (``total``,
default 100, at least ``min_per_label``). The two differ upstream only in their key names and
widgets; here both are one number box per label under a live "N of TOTAL left" line
(allocation.js), and both are stored as ``{label: number}`` with every label of the scheme,
in its order.

The check is the authority (the page's line only helps): only the scheme's labels, finite
numbers of at least the minimum, whose sum is the total: exactly for whole numbers, and
within a millionth of the total (at least 1e-6) when a share has a fraction, so that 33.3,
33.3 and 33.4 make 100 and float rounding never refuses an honest answer. A label left out
counts as 0 (then refused where the minimum is more). Annotators' answers are aggregated as
the mean per label (which still sums to the total); agreement (kappa) does not apply; no
trainer learns them (annotate-only).

Upstream's ``input_type: slider`` (constant_sum) and ``show_distribution_chart`` (soft_label)
are looks: the number boxes are shown, no chart is drawn, and annotators are asked the same.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Optional

from potato.config.reader import dotted
from potato.markup import Safe, join, render
from potato.schemes.base import Kind, number_key, parse_number_text, short
from potato.schemes.rating import as_int, upstream_number

MAX_TOTAL = 1e9  # a share of more than a billion is a typo, not an allocation
INPUT_TYPES = ("number", "slider")


def tolerance(total: float) -> float:
    """How far a sum with fractions may be from the total: a millionth of it, at least 1e-6."""
    return max(1e-6, abs(total) * 1e-6)


def shown(number: Any) -> str:
    """A number as the page and messages show it: 30, 33.3 (never 30.0 or 1e+02)."""
    number = as_int(number)
    return str(number) if isinstance(number, int) else f"{number:.10g}"


class Allocation(Kind):
    """The shared part: subclasses name their keys (``total_key``, ``min_key``)."""

    label_rule = "required"
    aggregate_as = "mean_per_label"
    script = "allocation.js"
    total_key = "total"
    min_key = "min_per_label"

    def __init__(self, scheme):
        super().__init__(scheme)
        self.total: float = 100
        self.minimum: float = 0

    # -- config --------------------------------------------------------------------------------
    def parse(self, r, m, p) -> None:
        total = number_key(r, m, self.total_key, p, 100)
        if not 0 < total <= MAX_TOTAL:
            r.error(p + (self.total_key,), f"{dotted(p + (self.total_key,))} is {shown(total)}; "
                                           f"give the total to share out, more than 0 and at "
                                           f"most {MAX_TOTAL:g} (for example 100).")
            total = 100
        self.total = as_int(total)
        minimum = number_key(r, m, self.min_key, p, 0)
        n = len(self.scheme.labels)
        if minimum < 0:
            r.error(p + (self.min_key,), f"{dotted(p + (self.min_key,))} is {shown(minimum)}; "
                                         f"a share cannot be negative: give 0 or more.")
            minimum = 0
        elif n and minimum * n > self.total + tolerance(self.total):
            r.error(p + (self.min_key,), f"{dotted(p)} ({self.name}): {self.min_key} "
                                         f"({shown(minimum)}) times the {n} labels is more "
                                         f"than {self.total_key} ({shown(self.total)}), so no "
                                         f"answer is possible; lower {self.min_key} to at most "
                                         f"{shown(self.total / n)}.")
            minimum = 0
        self.minimum = as_int(minimum)
        if n < 2 and n:
            r.error(p + ("labels",), f"{dotted(p)} ({self.name}) shares the total over one "
                                     f"label, which always gets all of it; give two or more "
                                     f"labels.")
        self.parse_looks(r, m, p)

    def parse_looks(self, r, m, p) -> None:
        """Each kind's keys about looks alone (see the module docstring)."""

    # -- values --------------------------------------------------------------------------------
    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None or value == "" or value == {}:
            return None
        labels = self.scheme.labels
        needs = "an object of {label: number}"
        if not isinstance(value, dict):
            raise self.fail(f"takes {needs} (labels: {', '.join(labels)}), not {short(value)}.")
        if len(value) > len(labels):
            raise self.fail(f"has {len(value)} shares; it has {len(labels)} labels "
                            f"({', '.join(labels)}).")
        known = set(labels)
        unknown = [k for k in value if k not in known]
        if unknown:
            raise self.fail(f"{short(unknown[0])} is not one of its labels ({', '.join(labels)}).")
        out: Dict[str, Any] = {}
        for label in labels:
            share = as_int(self.number(value.get(label, 0), f"a number for {label!r}"))
            if share < self.minimum:
                raise self.fail(f"{label!r} gets {shown(share)}; each label gets at least "
                                f"{shown(self.minimum)}.")
            out[label] = share
        total = sum(out.values())
        exact = all(isinstance(v, int) for v in out.values()) and isinstance(self.total, int)
        off = (total != self.total) if exact else abs(total - self.total) > tolerance(self.total)
        if off:
            left = self.total - total
            raise self.fail(f"the shares add up to {shown(total)}, not {shown(self.total)}: "
                            + (f"{shown(left)} left to give." if left > 0 else
                               f"{shown(-left)} too many."))
        return out

    def from_form(self, values: List[str]) -> Any:
        # One box per label, in the scheme's order: a blank box among filled ones is 0 (as
        # upstream reads it); all blank is no answer. Any other count: check names the shape.
        if not values or all(not v.strip() for v in values):
            return None
        if len(values) != len(self.scheme.labels):
            return values
        return {label: parse_number_text(v) if v.strip() else 0
                for label, v in zip(self.scheme.labels, values)}

    def cell(self, value: Any) -> str:
        return "" if value is None else json.dumps(value, ensure_ascii=False)

    def upstream_cell(self, value: Any) -> Dict[str, str]:
        if not isinstance(value, dict):
            return {}
        return {label: shown(share) for label, share in value.items()}

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        if not cell:
            return None
        return {label: upstream_number({label: raw}) for label, raw in cell.items()}

    def summary(self) -> str:
        least = f", at least {shown(self.minimum)} each" if self.minimum else ""
        return f"{shown(self.total)} shared over {', '.join(self.scheme.labels)}{least}"

    # -- the annotate page ---------------------------------------------------------------------
    def inputs(self, current: Any, first_key: int) -> Safe:
        have = current if isinstance(current, dict) else {}
        given = sum(v for v in have.values() if isinstance(v, (int, float))
                    and not isinstance(v, bool) and math.isfinite(v))
        rows = [render('<label class="allocation-row"><span class="allocation-label">{lab}'
                       '</span> <input type="number" name="label:{s}" data-share="{lab}" '
                       'aria-label="{s}: {lab}" min="{lo}" max="{hi}" step="any" '
                       'value="{v}"></label>', s=self.name, lab=label, lo=shown(self.minimum),
                       hi=shown(self.total), v=shown(have[label]) if label in have else "")
                for label in self.scheme.labels]
        return render('<div class="allocation" data-scheme="{s}" data-total="{t}" '
                      'data-min="{lo}"><p class="allocation-left" '
                      'aria-live="polite"><output>{left}</output> of {t} left</p>{rows}'
                      '<p class="hint">Share {t} over the labels (at least {lo} each); a blank '
                      'box counts as 0.</p></div>', s=self.name, t=shown(self.total),
                      left=shown(self.total - given), rows=join(rows), lo=shown(self.minimum))


class ConstantSum(Allocation):
    type_name = "constant_sum"
    keys = ("total_points", "min_per_item", "input_type")
    total_key = "total_points"
    min_key = "min_per_item"

    def parse_looks(self, r, m, p) -> None:
        kind = m.get("input_type")
        if kind is not None and kind not in INPUT_TYPES:
            r.error(p + ("input_type",), f"{dotted(p + ('input_type',))} is {short(kind)}; give "
                                         f"number or slider (both are shown here as number "
                                         f"boxes).")


class SoftLabel(Allocation):
    type_name = "soft_label"
    keys = ("total", "min_per_label", "show_distribution_chart")

    def parse_looks(self, r, m, p) -> None:
        r.boolean(m, "show_distribution_chart", p, True)

