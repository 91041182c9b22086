"""Numbers: ``likert`` (a point 1..size between two named ends), ``slider`` (a number on a
grid from min_value to max_value) and ``number`` (a typed number, optionally bounded).
Stored as the number itself: an int for likert, an int or a float for slider and number."""

from __future__ import annotations

import decimal
import math
import re
from typing import Any, Dict, List, Optional

from potato.config.reader import dotted
from potato.schemes.base import (KEEP, MAX_MAGNITUDE, Kind, LabelError, number_key,
                                 parse_number_text, short)
from potato.markup import Safe, join, render

MAX_LIKERT = 20
MAX_STEPS = 10 ** 9  # a slider's steps at most: a smaller step is no slider (and overflows)


def as_int(value: Any) -> Any:
    """3.0 -> 3 (JSON and forms do not say int or float); anything else as it is."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2 ** 53:
        return int(value)
    return value


def upstream_number(cell: Dict[str, Any]) -> Any:
    """An upstream entry's number (upstream writes it as a string), or the value as it is."""
    value = next(iter(cell.values()), None) if cell else None
    if isinstance(value, str):
        try:
            return int(value) if re.fullmatch(r"-?\d+", value.strip()) else float(value)
        except ValueError:
            return value
    return value


def end_label(r, m, key: str, p) -> str:
    """A scale end's text as written: YAML 1.1 reads a bare No or Yes as false or true."""
    if isinstance(m.get(key), bool) and p + (key,) in r.scalars:
        return r.scalars[p + (key,)]
    return r.text(m, key, p, "") or ""


class Likert(Kind):
    type_name = "likert"
    keys = ("min_label", "max_label", "size")
    label_rule = "none"
    one_label = True
    predicts = "point"
    ranks_by = "distribution"
    ordinal = True
    confusion = True

    def __init__(self, scheme):
        super().__init__(scheme)
        self.size, self.min_label, self.max_label = 5, "", ""

    def parse(self, r, m, p) -> None:
        size = r.number(m, "size", p, None, 2, MAX_LIKERT, integer=True)
        if size is None and "size" not in m:
            r.error(p, f"{dotted(p)} ({self.name}) is a likert scale without size: give the "
                       f"number of points (2 to {MAX_LIKERT}), for example size: 5.")
        self.size = size or 5
        self.min_label, self.max_label = (end_label(r, m, key, p)
                                          for key in ("min_label", "max_label"))

    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None or value == "":
            return None
        value = as_int(self.number(value, f"a point from 1 to {self.size}"))
        if not isinstance(value, int) or not 1 <= value <= self.size:
            raise self.fail(f"takes a whole point from 1 to {self.size}, not {short(value)}.")
        return value

    def from_form(self, values: List[str]) -> Any:
        return parse_number_text(values[-1]) if values else KEEP

    def key_count(self) -> int:
        return self.size

    def upstream_cell(self, value: Any) -> Dict[str, str]:
        return {f"scale_{value}": str(value)}

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        return upstream_number(cell)

    def preselect(self, predicted: Any) -> Optional[str]:
        try:
            point = self.check(predicted)
        except LabelError:
            return None
        return None if point is None else str(point)

    def training_schema(self):
        # The points as integers, the values the store holds: a model's classes, and its
        # predictions, are the points themselves (never the strings "1".."size").
        return {"labels": list(range(1, self.size + 1)), "min_label": self.min_label,
                "max_label": self.max_label}

    def summary(self) -> str:
        ends = " to ".join(x for x in (self.min_label, self.max_label) if x)
        return f"points 1 to {self.size}" + (f" ({ends})" if ends else "")

    def inputs(self, current: Any, first_key: int) -> Safe:
        points = []
        for point in range(1, self.size + 1):
            n = first_key + point - 1
            checked = current == point
            points.append(render(
                '<label class="option point{c}"><input type="radio" name="label:{s}" '
                'value="{v}" data-key="{k}"{checked}> {kbd}</label>', c=" chosen" if checked
                else "", s=self.name, v=str(point), k=str(n) if n <= 9 else "",
                checked=Safe(" checked" if checked else ""),
                kbd=render("<kbd>{n}</kbd>", n=n) if n <= 9 else render("{v}", v=str(point))))
        return render('<div class="likert"><span class="likert-end">{lo}</span>{points}'
                      '<span class="likert-end">{hi}</span></div>', lo=self.min_label,
                      hi=self.max_label, points=join(points))


def nearest_step(value: Any, base: float, step: float) -> Any:
    """A number on the nearest of the steps from ``base``, without the grid's float noise
    (0.30000000000000004 -> 0.3: rounded to 10 decimals, or to 3 more than the step has when it
    is finer than 1e-7); anything else (not a finite number, too far for the grid) as it is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or abs((value - base) / step) > 1e15:
        return value
    nearest = base + round((value - base) / step) * step
    return as_int(round(nearest, max(10, 3 - math.floor(math.log10(step)))))


def on_steps(kind: Kind, value: Any, base: float, step: float, whose: str) -> Any:
    """A checked number that must be ``base`` plus whole steps (a slider's, a pairwise
    scale's): LabelError off the steps, else the value without the grid's float noise."""
    steps = (value - base) / step
    if abs(steps - round(steps)) > 1e-6:
        raise kind.fail(f"{short(value)} is not on {whose} steps of {step:g} from {base:g}.")
    return value if isinstance(value, int) else nearest_step(value, base, step)


def slider_html(kind: Kind, start: Any, current: Any, left: str, right: str,
                below: Safe = Safe("")) -> Safe:
    """The slider the page's script drives (a slider's, a pairwise scale's): the range input
    between the two end texts, the value shown, the hidden field that holds the answer (empty
    until the annotator moves the slider), ``below`` it, and the "not set yet" hint."""
    return render(
        '<div class="slider{extra}"><span class="slider-end">{left}</span><input '
        'type="range" data-slider="{s}" aria-label="{s}" min="{lo}" max="{hi}" step="{st}" '
        'value="{v}"><span class="slider-end">{right}</span> '
        '<output class="slider-value">{shown}</output>'
        '<input type="hidden" name="label:{s}" value="{cur}"></div>{below}'
        '<p class="hint slider-unset"{hide}>Not set yet: move the slider (arrow keys when '
        'it has the focus) to choose a value.</p>',
        extra=" " + kind.slider_class if kind.slider_class else "", s=kind.name, left=left,
        right=right, lo=str(kind.min_value), hi=str(kind.max_value), st=str(kind.step),
        v=str(start if current is None else current),
        shown="–" if current is None else str(current),
        cur="" if current is None else str(current), below=below,
        hide=Safe(" hidden" if current is not None else ""))


class Number(Kind):
    type_name = "number"
    aggregate_as = "median"
    quantity = True
    predicts = "value"
    report_as = "numbers"
    # min / max / step: upstream's names (its number input's HTML attributes)
    keys = ("min_value", "max_value", "min", "max", "step")
    label_rule = "none"

    def __init__(self, scheme):
        super().__init__(scheme)
        self.min_value: Optional[float] = None
        self.max_value: Optional[float] = None
        self.typed_step: Optional[float] = None  # a number scheme's step (None: any number)

    def parse(self, r, m, p) -> None:
        for ours, theirs in (("min_value", "min"), ("max_value", "max")):
            value = number_key(r, m, ours, p)
            if m.get(theirs) is not None:
                also = number_key(r, m, theirs, p)
                if value is not None and also is not None and also != value:
                    r.error(p + (theirs,), f"{dotted(p)} ({self.name}) gives both {ours} "
                                           f"({value!r}) and {theirs} ({also!r}), upstream's "
                                           f"name for it: keep one.")
                value = also if value is None else value
            setattr(self, ours, value)
        if None not in (self.min_value, self.max_value) and self.min_value >= self.max_value:
            r.error(p + ("max_value",), f"{dotted(p)} ({self.name}): max_value "
                                        f"({self.max_value}) must be more than min_value "
                                        f"({self.min_value}).")
        self.typed_step = number_key(r, m, "step", p)
        if self.typed_step is not None and self.typed_step <= 0:
            r.error(p + ("step",), f"{dotted(p + ('step',))} must be more than 0, not "
                                   f"{self.typed_step:g}.")
            self.typed_step = None

    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None or value == "":
            return None
        value = as_int(self.number(value))
        lo, hi = self.min_value, self.max_value
        if lo is not None and value < lo or hi is not None and value > hi:
            raise self.fail(f"{short(value)} is outside {self._range()}.")
        if self.typed_step is not None and not self._on_steps(value):
            raise self.fail(f"{short(value)} is not on the steps of {self.typed_step!r} from "
                            f"{self.min_value or 0!r}.")
        return value

    def _on_steps(self, value: Any) -> bool:
        """Whether ``value`` is min_value (or 0) plus a whole number of steps, in decimals as
        a browser checks it (a step too fine to check a value against is "not on it")."""
        with decimal.localcontext() as ctx:
            ctx.prec = 60
            try:
                return (decimal.Decimal(repr(value)) - decimal.Decimal(repr(self.min_value or 0))
                        ) % decimal.Decimal(repr(self.typed_step)) == 0
            except decimal.InvalidOperation:
                return False

    def _range(self) -> str:
        lo = -MAX_MAGNITUDE if self.min_value is None else self.min_value
        hi = MAX_MAGNITUDE if self.max_value is None else self.max_value
        return f"{lo:g} to {hi:g}"

    def from_form(self, values: List[str]) -> Any:
        return parse_number_text(values[-1]) if values else None

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        return upstream_number(cell)

    def preselect(self, predicted: Any) -> Optional[str]:
        try:
            value = self.check(self.snap(predicted))
        except LabelError:
            return None
        return None if value is None else str(value)

    def snap(self, value: Any) -> Any:
        """A predicted value as the annotator could give it: on the nearest step when the
        scheme has one (a regression predicts any number), else as it is."""
        if self.typed_step is None:
            return value
        return nearest_step(value, self.min_value or 0, self.typed_step)

    def training_schema(self):
        # No classes: a model predicts a number, within the bounds the scheme has.
        return {"labels": [], "min_value": self.min_value, "max_value": self.max_value}

    def summary(self) -> str:
        return f"a number from {self._range()}"

    def inputs(self, current: Any, first_key: int) -> Safe:
        bounds = "".join(f' {k}="{v}"' for k, v in (("min", self.min_value),
                                                       ("max", self.max_value)) if v is not None)
        return render('<input type="number" name="label:{s}" aria-label="{s}" step="{step}"{b} '
                      'value="{v}">', s=self.name, b=Safe(bounds),
                      step="any" if self.typed_step is None else repr(self.typed_step),
                      v="" if current is None else str(current))


class Slider(Number):
    type_name = "slider"
    slider_class = ""  # a class the page's slider gets beside "slider"
    # min_label / max_label (this Potato's, as likert's): names shown at the two ends (upstream's
    # vas and slider confidence give them as left_label / right_label: potato.schemes.variants)
    keys = ("min_value", "max_value", "step", "starting_value", "show_labels", "min_label",
            "max_label")

    def __init__(self, scheme):
        super().__init__(scheme)
        self.min_value, self.max_value, self.step, self.starting_value = 0, 100, 1, 0
        self.min_label, self.max_label = "", ""

    def parse(self, r, m, p) -> None:
        for key in ("min_value", "max_value"):
            if m.get(key) is None:
                r.error(p, f"{dotted(p)} ({self.name}) is a slider without {key}: give "
                           f"min_value and max_value (for example 0 and 100).")
        self.min_value = number_key(r, m, "min_value", p, 0)
        self.max_value = number_key(r, m, "max_value", p, 100)
        if self.min_value >= self.max_value:
            r.error(p + ("max_value",), f"{dotted(p)} ({self.name}): max_value "
                                        f"({self.max_value}) must be more than min_value "
                                        f"({self.min_value}).")
            self.max_value = self.min_value + 1
        self.step = number_key(r, m, "step", p, 1)
        if self.step <= 0:
            r.error(p + ("step",), f"{dotted(p + ('step',))} must be more than 0, not "
                                   f"{self.step}.")
            self.step = 1
        if not (self.max_value - self.min_value) / self.step <= MAX_STEPS:
            r.error(p + ("step",), f"{dotted(p + ('step',))} ({self.step}) is too small for "
                                   f"the range: a slider has at most {MAX_STEPS:g} steps; "
                                   f"give a larger step.")
            self.step = 1 if self.max_value - self.min_value <= MAX_STEPS else \
                (self.max_value - self.min_value) / MAX_STEPS
        self.starting_value = number_key(r, m, "starting_value", p, self.min_value)
        if not self.min_value <= self.starting_value <= self.max_value:
            r.error(p + ("starting_value",), f"{dotted(p + ('starting_value',))} "
                                             f"({self.starting_value}) must be between "
                                             f"min_value and max_value.")
            self.starting_value = self.min_value
        r.boolean(m, "show_labels", p, True)
        self.min_label, self.max_label = (end_label(r, m, key, p)
                                          for key in ("min_label", "max_label"))

    def check(self, value: Any, text: Optional[str] = None) -> Any:
        value = super().check(value, text)
        if value is None:
            return None
        return on_steps(self, value, self.min_value, self.step, "the slider's")

    def snap(self, value: Any) -> Any:
        """A model's value on the slider's nearest step (a regression predicts any number)."""
        return nearest_step(value, self.min_value, self.step)

    def from_form(self, values: List[str]) -> Any:
        # The hidden field: empty until the annotator moves the slider (a slider always shows
        # a value, so its position alone does not mean the annotator chose it).
        return parse_number_text(values[-1]) if values else None

    def summary(self) -> str:
        ends = " to ".join(x for x in (self.min_label, self.max_label) if x)
        return (f"a value from {self.min_value:g} to {self.max_value:g} in steps of "
                f"{self.step:g}" + (f" ({ends})" if ends else ""))

    def inputs(self, current: Any, first_key: int) -> Safe:
        lo, hi = str(self.min_value), str(self.max_value)
        return slider_html(self, self.starting_value, current,
                           (self.min_label + " " if self.min_label else "") + lo,
                           hi + (" " + self.max_label if self.max_label else ""))
