"""A range on a scale: ``range_slider`` (upstream's "Goldilocks" range), two slider thumbs
from ``min_value`` to ``max_value`` (default 0 to 100) in steps of ``step`` (1), between
``left_label`` and ``right_label``; ``default_low`` and ``default_high`` (default the two
ends) are where the thumbs start. Stored as ``[low, high]``, min_value <= low <= high <=
max_value, both on the steps from min_value (a zero-width range is a point, as upstream).

The page shows two range inputs (arrow keys move the one that has the focus; range.js keeps
the low one at or below the high one and fills the scheme's two hidden fields); as with a
slider, nothing is stored until a thumb is moved. ``show_values: false`` hides the numbers
shown beside the thumbs. Annotators' answers are aggregated as the median of each end;
agreement (kappa) does not apply; no trainer learns them (annotate-only). Upstream's output
holds ``{"range_low": "25", "range_high": "75"}``.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from potato.config.reader import dotted
from potato.markup import Safe, render
from potato.schemes.base import Kind, LabelError, number_key, parse_number_text, short
from potato.schemes.rating import MAX_STEPS, as_int, end_label, on_steps, upstream_number

ENDS = ("range_low", "range_high")  # upstream's names of the two ends in its output


class RangeSlider(Kind):
    type_name = "range_slider"
    keys = ("min_value", "max_value", "step", "left_label", "right_label", "show_values",
            "default_low", "default_high")
    label_rule = "none"
    aggregate_as = "median_each"
    script = "range.js"

    def __init__(self, scheme):
        super().__init__(scheme)
        self.min_value, self.max_value, self.step = 0, 100, 1
        self.left_label = self.right_label = ""
        self.show_values = True
        self.default_low, self.default_high = 0, 100

    # -- config --------------------------------------------------------------------------------
    def parse(self, r, m, p) -> None:
        lo, hi = number_key(r, m, "min_value", p, 0), number_key(r, m, "max_value", p, 100)
        if lo >= hi:
            r.error(p + ("max_value",), f"{dotted(p)} ({self.name}): max_value ({hi:g}) must be "
                                        f"more than min_value ({lo:g}).")
            lo, hi = 0, 100
        step = number_key(r, m, "step", p, 1)
        if step <= 0 or (hi - lo) / step > MAX_STEPS:
            r.error(p + ("step",), f"{dotted(p + ('step',))} is {step:g}: give a step more "
                                   f"than 0 that makes at most {MAX_STEPS:g} steps from "
                                   f"min_value to max_value.")
            step = 1 if hi - lo <= MAX_STEPS else (hi - lo) / MAX_STEPS
        self.min_value, self.max_value, self.step = as_int(lo), as_int(hi), as_int(step)
        self.left_label, self.right_label = (end_label(r, m, key, p)
                                             for key in ("left_label", "right_label"))
        self.show_values = r.boolean(m, "show_values", p, True)
        for key, default in (("default_low", self.min_value), ("default_high", self.max_value)):
            start = number_key(r, m, key, p, default)
            try:
                start = self.end(start, key)
            except LabelError as e:  # off the scale or its steps
                r.error(p + (key,), f"{dotted(p + (key,))} ({start}) must be a value the "
                                    f"slider can take: from {lo:g} to {hi:g} in steps of "
                                    f"{step:g} ({e}).")
                start = default
            setattr(self, key, start)
        if self.default_low > self.default_high:
            r.error(p + ("default_low",), f"{dotted(p)} ({self.name}): default_low "
                                          f"({self.default_low:g}) is above default_high "
                                          f"({self.default_high:g}); swap them.")
            self.default_low, self.default_high = self.min_value, self.max_value

    # -- values --------------------------------------------------------------------------------
    def end(self, value: Any, which: str) -> Any:
        """One end of a range, checked: a number on the scale's steps."""
        lo, hi = self.min_value, self.max_value
        value = as_int(self.number(value, f"a number from {lo:g} to {hi:g} as {which}"))
        if not lo <= value <= hi:
            raise self.fail(f"{which} is {short(value)}, outside {lo:g} to {hi:g}.")
        return on_steps(self, value, lo, self.step, "the range's")

    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None or value == "" or value == []:
            return None
        if not isinstance(value, list) or len(value) != 2:
            raise self.fail(f"takes a range [low, high] of two numbers from {self.min_value:g} "
                            f"to {self.max_value:g}, not {short(value)}.")
        low, high = self.end(value[0], "low"), self.end(value[1], "high")
        if low > high:
            raise self.fail(f"low ({low:g}) is above high ({high:g}); give [low, high] with "
                            f"low at most high.")
        return [low, high]

    def from_form(self, values: List[str]) -> Any:
        # the two hidden fields, low then high: empty until a thumb is moved
        if not values or all(not v.strip() for v in values):
            return None
        return [parse_number_text(v) for v in values]

    def cell(self, value: Any) -> str:
        return "" if value is None else json.dumps(value)

    def upstream_cell(self, value: Any) -> Dict[str, str]:
        if not isinstance(value, list) or len(value) != 2:
            return {}
        return {end: str(v) for end, v in zip(ENDS, value)}

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        if not cell:
            return None
        if set(cell) != set(ENDS):
            return cell  # check names it
        return [upstream_number({end: cell[end]}) for end in ENDS]

    def training_schema(self) -> Dict[str, Any]:
        return {"labels": [], "min_value": self.min_value, "max_value": self.max_value}

    def summary(self) -> str:
        ends = " to ".join(x for x in (self.left_label, self.right_label) if x)
        return (f"a range within {self.min_value:g} to {self.max_value:g} in steps of "
                f"{self.step:g}" + (f" ({ends})" if ends else ""))

    # -- the annotate page ---------------------------------------------------------------------
    def inputs(self, current: Any, first_key: int) -> Safe:
        low, high = current if isinstance(current, list) and len(current) == 2 else \
            (self.default_low, self.default_high)
        unset = not (isinstance(current, list) and len(current) == 2)

        def thumb(which: str, start: Any) -> Safe:
            return render('<input type="range" data-range-end="{w}" aria-label="{s}: {w}" '
                          'min="{lo}" max="{hi}" step="{st}" value="{v}">', w=which,
                          s=self.name, lo=str(self.min_value), hi=str(self.max_value),
                          st=str(self.step), v=str(start))

        return render(
            '<div class="range-slider"><span class="slider-end">{left}</span>{a}{b}'
            '<span class="slider-end">{right}</span> <output class="range-values"{hide}>'
            '{shown}</output><input type="hidden" name="label:{s}" value="{cl}">'
            '<input type="hidden" name="label:{s}" value="{ch}"></div>'
            '<p class="hint range-unset"{unset}>Not set yet: move either thumb (arrow keys '
            'when it has the focus) to choose a range.</p>',
            left=self.left_label or str(self.min_value), a=thumb("low", low),
            b=thumb("high", high), right=self.right_label or str(self.max_value),
            hide=Safe("" if self.show_values else " hidden"),
            shown="–" if unset else f"{low} – {high}", s=self.name,
            cl="" if unset else str(low), ch="" if unset else str(high),
            unset=Safe("" if unset else " hidden"))
