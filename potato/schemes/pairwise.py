"""Pairwise preference: ``pairwise``, upstream Potato's comparison of an item's responses shown
side by side. The responses are the list in the item's ``items_key`` field (default ``text``),
one per option; ``labels`` names the options (default A and B; 2 to 9 of them).

- ``mode: binary`` (the default): the annotator picks one response (a tile, or its number
  key), or, with ``allow_tie``, the tie (``tie_label``, default "No preference"). Stored as
  the option's label or the tie label, and aggregated and agreed on as a choice.
- ``mode: scale``: a slider between the first and the last response, ``scale: {min, max,
  step, default, labels: {min, max, center}}`` (default -3 to 3 in steps of 1, starting at
  0). Stored as the number, and aggregated as a rating (the median) — its own kind,
  ``pairwise_scale``, which ``Pairwise.form`` picks by the mode.

Upstream's output holds ``{"selection": "A" | "B" | ... | "tie"}`` (the option's letter) and
``{"scale_value": "-2"}``. No trainer learns either (they are annotate-only). Upstream's
``multi_dimension`` mode, ``dimensions``, ``justification`` and inline ``items`` are refused,
each with what to do instead.
"""

from __future__ import annotations

import math
import string
from typing import Any, Dict, List, Optional

from potato.config.reader import dotted
from potato.config.upstream_keys import SCHEME_HINTS
from potato.markup import Safe, join, render
from potato.schemes.base import KEEP, Kind, LabelError, number_key, parse_number_text, short
from potato.schemes.choice import label_key
from potato.schemes.rating import (MAX_STEPS, as_int, end_label, nearest_step, on_steps,
                                   slider_html, upstream_number)

MAX_OPTIONS = 9  # one number key each
MODES = ("binary", "scale")
TIE = "tie"  # upstream's stored value for the tie
# upstream's inline items, refused here; its dimensions and justification are refused, with
# the reason, as every scheme's unknown keys are (potato.config.upstream_keys.SCHEME_HINTS)
ITEMS_KEY_HINT = ("Upstream's inline items are not read here: put the responses in each item "
                  "of the data file, as a list under items_key.")


def _written(r, m, key: str, p, default: str) -> str:
    """A label's text as written (a bare No or Yes is not false or true), or ``default``."""
    return default if m.get(key) is None else end_label(r, m, key, p)


class Pairwise(Kind):
    type_name = "pairwise"
    keys = ("mode", "items_key", "show_labels", "allow_tie", "tie_label", "scale", "items")
    label_rule = "optional"
    label_values = True
    one_label = True

    def __init__(self, scheme):
        super().__init__(scheme)
        self.items_key, self.options, self.show_labels = "text", ["A", "B"], True
        self.allow_tie, self.tie_label, self.with_keys = False, "No preference", True

    @classmethod
    def form(cls, m: Dict[str, Any]) -> type:
        return PairwiseScale if m.get("mode") == "scale" else cls

    # -- config --------------------------------------------------------------------------------
    def parse(self, r, m, p) -> None:
        if m.get("items") is not None:
            r.error(p + ("items",), f"{dotted(p + ('items',))}: {ITEMS_KEY_HINT}")
        mode = m.get("mode")
        # multi_dimension with dimensions: the error on dimensions (refused with its reason
        # as the mapping was read) already says what to do
        said = any(e.key == dotted(p + ("dimensions",)) for e in r.errors)
        if mode is not None and mode not in MODES and not (mode == "multi_dimension" and said):
            hint = SCHEME_HINTS["dimensions"] if mode == "multi_dimension" else \
                "Give binary (pick one response) or scale (a slider between them)."
            r.error(p + ("mode",), f"{dotted(p + ('mode',))} is {short(mode)}. {hint}")
        self.items_key = r.text(m, "items_key", p, "text", numbers_ok=False) or "text"
        self.show_labels = r.boolean(m, "show_labels", p, True)
        self.with_keys = m.get("sequential_key_binding") is not False
        if self.scheme.labels:
            self.options = list(self.scheme.labels)
        if not 2 <= len(self.options) <= MAX_OPTIONS:
            r.error(p + ("labels",), f"{dotted(p)} ({self.name}) names {len(self.options)} "
                                     f"response(s) in labels; a pairwise scheme compares 2 to "
                                     f"{MAX_OPTIONS}, one label per response (default A, B).")
            self.options = (self.options + ["A", "B"])[:max(2, min(len(self.options),
                                                                   MAX_OPTIONS))]
        self.parse_mode(r, m, p)

    def parse_mode(self, r, m, p) -> None:
        self.allow_tie = r.boolean(m, "allow_tie", p, False)
        self.tie_label = _written(r, m, "tie_label", p, "No preference") or "No preference"
        if self.allow_tie and self.tie_label in self.options:
            r.error(p + ("tie_label",), f"{dotted(p + ('tie_label',))} is {self.tie_label!r}, "
                                        f"which also names a response; give the tie its own "
                                        f"label.")
        if m.get("tie_label") is not None and not self.allow_tie:
            r.warn(p + ("tie_label",), f"{dotted(p + ('tie_label',))} has no effect without "
                                       f"allow_tie: true (no tie is offered).")
        if m.get("scale") is not None:
            r.warn(p + ("scale",), f"{dotted(p + ('scale',))} has no effect in mode binary; "
                                   f"set mode: scale for a slider between the responses.")
        self.scheme.labels = self.options + ([self.tie_label] if self.allow_tie else [])

    # -- the item ------------------------------------------------------------------------------
    def item_fields(self):
        return (self.items_key,)

    def check_item(self, row: Dict[str, Any]) -> Optional[str]:
        where = f"{self.items_key!r} (items_key of pairwise scheme {self.name!r})"
        if self.items_key not in row:
            return f"has no {where}: give it the list of responses to compare."
        responses = row[self.items_key]
        if not isinstance(responses, list):
            return (f"has {where} as a {type(responses).__name__}, not a list of the responses "
                    f"to compare.")
        n = len(self.options)
        if len(responses) != n:
            return (f"has {len(responses)} response(s) in {where}, and the scheme compares {n} "
                    f"(one per label: {', '.join(self.options)}); give the item {n} responses"
                    + (", or the scheme a label per response." if len(responses) >= 2 else "."))
        for j, text in enumerate(responses):
            if not isinstance(text, (str, int, float)) or isinstance(text, bool):
                return (f"has a {type(text).__name__} as response {j + 1} in {where}; each "
                        f"response must be text.")
            if isinstance(text, float) and not math.isfinite(text):
                return (f"has {text} as response {j + 1} in {where}, not a response to show; "
                        f"each response must be text.")
        return None

    def view(self, row: Dict[str, Any]) -> Safe:
        responses = row.get(self.items_key)
        if not isinstance(responses, list):
            return Safe("")
        boxes = [render('<div class="pairwise-response" data-option="{o}">{title}'
                        '<div class="pairwise-text">{t}</div></div>', o=option,
                        title=render('<h3 class="pairwise-title">{o}</h3>', o=option)
                        if self.show_labels else "", t=str(text))
                 for option, text in zip(self.options, responses)]
        return render('<section class="pairwise-view" data-field="{k}" aria-label="Responses '
                      'to compare">{b}</section>', k=self.items_key, b=join(boxes))

    # -- values --------------------------------------------------------------------------------
    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None or value == "":
            return None
        if not isinstance(value, str) or value not in self.scheme.labels:
            raise self.fail(f"takes one of {', '.join(map(repr, self.scheme.labels))}, not "
                            f"{short(value)}.")
        return value

    def from_form(self, values: List[str]) -> Any:
        return values[-1] if values else KEEP  # a tile cannot be unchosen from the page

    def upstream_cell(self, value: Any) -> Dict[str, str]:
        if value == self.tie_label and self.allow_tie:
            return {"selection": TIE}
        if value in self.options:
            return {"selection": string.ascii_uppercase[self.options.index(value)]}
        return {"selection": str(value)}  # stored before the labels changed: as it is

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        value = super().from_upstream_cell(cell)
        if value == TIE and self.allow_tie:
            return self.tie_label
        letters = string.ascii_uppercase[:len(self.options)]
        if isinstance(value, str) and len(value) == 1 and value in letters:
            return self.options[letters.index(value)]
        return value  # check names it

    def summary(self) -> str:
        tie = f" (or {self.tie_label})" if self.allow_tie else ""
        return f"which response is preferred: {', '.join(self.options)}{tie}"

    # -- the annotate page ---------------------------------------------------------------------
    def key_count(self) -> int:
        return len(self.scheme.labels) if self.with_keys else 0

    def inputs(self, current: Any, first_key: int) -> Safe:
        tiles = []
        for i, label in enumerate(self.scheme.labels):
            key = label_key(first_key + i) if self.with_keys else ""
            tie = self.allow_tie and i == len(self.options)
            checked = label == current
            tiles.append(render(
                '<label class="option pairwise-{what}{c}"><input type="radio" name="label:{s}" '
                'value="{v}"{k}{checked}> {kbd} {v}</label>', what="tie" if tie else "tile",
                c=" chosen" if checked else "", s=self.name, v=label,
                k=render(' data-key="{k}"', k=key) if key else "",
                checked=Safe(" checked" if checked else ""),
                kbd=render("<kbd>{k}</kbd>", k=key) if key else ""))
        return render('<div class="pairwise-tiles">{t}</div>', t=join(tiles))


class PairwiseScale(Pairwise):
    """``mode: scale``: a number between the first response (min) and the last (max)."""

    type_name = "pairwise_scale"
    label_values = False
    one_label = False
    aggregate_as = "median"
    quantity = True
    predicts = "value"
    report_as = "numbers"

    def __init__(self, scheme):
        super().__init__(scheme)
        self.min_value, self.max_value, self.step, self.default = -3, 3, 1, 0
        self.min_label = self.max_label = self.center_label = ""

    def parse_mode(self, r, m, p) -> None:
        for key in ("allow_tie", "tie_label"):
            if m.get(key) is not None:
                r.warn(p + (key,), f"{dotted(p + (key,))} has no effect in mode scale (its "
                                   f"center is the tie); remove it, or use mode: binary.")
        if len(self.options) != 2:
            r.error(p + ("labels",), f"{dotted(p)} ({self.name}) is a scale between two "
                                     f"responses, and labels names {len(self.options)}; give "
                                     f"two labels, or use mode: binary to pick one of them.")
        q = p + ("scale",)
        s = r.mapping(m.get("scale"), q, ("min", "max", "step", "default", "labels"),
                      f"{dotted(q)}")
        lo, hi = number_key(r, s, "min", q, -3), number_key(r, s, "max", q, 3)
        if lo >= hi:
            r.error(q + ("max",), f"{dotted(q)}: max ({hi}) must be more than min ({lo}).")
            lo, hi = -3, 3
        step = number_key(r, s, "step", q, 1)
        if step <= 0 or (hi - lo) / step > MAX_STEPS:
            r.error(q + ("step",), f"{dotted(q + ('step',))} is {step}: give a step more than 0 "
                                   f"that makes at most {MAX_STEPS:g} steps from min to max.")
            step = 1 if hi - lo <= MAX_STEPS else (hi - lo) / MAX_STEPS
        self.min_value, self.max_value, self.step = lo, hi, step
        middle = nearest_step((lo + hi) / 2, lo, step)
        default = number_key(r, s, "default", q, 0 if lo <= 0 <= hi else middle)
        try:
            self.default = self.check(default)
        except LabelError:
            r.error(q + ("default",), f"{dotted(q + ('default',))} ({default}) must be a value "
                                      f"the slider can take: from {lo:g} to {hi:g} in steps of "
                                      f"{step:g}.")
            self.default = middle
        ends = r.mapping(s.get("labels"), q + ("labels",), ("min", "max", "center"),
                         f"{dotted(q + ('labels',))}")
        first, last = self.options[0], self.options[-1]
        for key, default_text in (("min", f"{first} is better"), ("max", f"{last} is better"),
                                  ("center", "Equal")):
            setattr(self, f"{key}_label", _written(r, ends, key, q + ("labels",), default_text))
        self.scheme.labels = []  # a number is stored, not a label; the options name the ends

    # -- values --------------------------------------------------------------------------------
    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None or value == "":
            return None
        lo, hi, step = self.min_value, self.max_value, self.step
        value = as_int(self.number(value, f"a number from {lo:g} to {hi:g}"))
        if not lo <= value <= hi:
            raise self.fail(f"{short(value)} is outside {lo:g} to {hi:g}.")
        return on_steps(self, value, lo, step, "the scale's")

    def from_form(self, values: List[str]) -> Any:
        # the hidden field: empty until the annotator moves the slider
        return parse_number_text(values[-1]) if values else None

    def upstream_cell(self, value: Any) -> Dict[str, str]:
        return {"scale_value": str(value)}

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        return upstream_number(cell)

    def training_schema(self) -> Dict[str, Any]:
        return {"labels": [], "min_value": self.min_value, "max_value": self.max_value}

    def summary(self) -> str:
        return (f"how much one response is preferred: {self.min_value:g} ({self.options[0]}: "
                f"{self.min_label}) to {self.max_value:g} ({self.options[-1]}: "
                f"{self.max_label}) in steps of {self.step:g}")

    # -- the annotate page ---------------------------------------------------------------------
    def key_count(self) -> int:
        return 0  # the slider takes the arrow keys when it has the focus

    slider_class = "pairwise-scale"

    def inputs(self, current: Any, first_key: int) -> Safe:
        return slider_html(self, self.default, current,
                           f"{self.options[0]}: {self.min_label}",
                           f"{self.options[-1]}: {self.max_label}",
                           render('<p class="pairwise-center">{c}</p>', c=self.center_label))


Pairwise.forms = (PairwiseScale,)
