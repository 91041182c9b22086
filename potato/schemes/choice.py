"""Choices among a scheme's labels: ``radio`` (one), ``multiselect`` (any number) and
``select`` (one, from a dropdown). Stored as the label (a string) or a list of labels in the
scheme's order."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from potato.schemes.base import KEEP, Kind, LabelError, short
from potato.markup import Safe, join, render


def _not_a_label(kind: Kind, value: Any) -> LabelError:
    return LabelError(f"{short(value)} is not a label of scheme {kind.name!r} "
                      f"(labels: {', '.join(kind.scheme.labels)}).")


def label_key(n: int) -> str:
    """The number key of the page's n-th label: 1..9, and 0 for the tenth (a digit
    classifier's ten labels all have a key)."""
    return str(n) if n <= 9 else "0" if n == 10 else ""


def _picked(cell: Dict[str, Any]) -> List[str]:
    """The labels an upstream label_annotations entry marks (any value but false, 0, "")."""
    return [k for k, v in cell.items() if str(v).lower() not in ("false", "0", "")]


class Radio(Kind):
    type_name = "radio"
    ranks_by = "distribution"
    label_values = True
    one_label = True
    suggests_labels = True
    confusion = True
    input_type = "radio"

    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None or value == [] or value == "":
            return None
        if not isinstance(value, str):
            raise LabelError(f"scheme {self.name!r} takes one label (a string), not "
                             f"{short(value)}.")
        if value not in self.scheme.labels:
            raise _not_a_label(self, value)
        return value

    def from_form(self, values: List[str]) -> Any:
        return values[-1] if values else KEEP  # a radio group cannot be cleared from the page

    def key_count(self) -> int:
        return len(self.scheme.labels)

    def upstream_cell(self, value: Any) -> Dict[str, str]:
        return {label: "true" for label in (value if isinstance(value, list) else [value])}

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        picked = _picked(cell)
        return picked[0] if len(picked) == 1 else picked or None

    def inputs(self, current: Any, first_key: int) -> Safe:
        chosen = current if isinstance(current, list) else ([current] if current else [])
        opts = []
        for i, label in enumerate(self.scheme.labels):
            n = first_key + i
            checked = label in chosen
            opts.append(render(
                '<label class="option{c}"><input type="{t}" name="label:{s}" value="{v}" '
                'data-key="{k}"{checked}> {kbd} {v}</label>',
                c=" chosen" if checked else "", t=self.input_type, s=self.name, v=label,
                k=label_key(n), checked=Safe(" checked" if checked else ""),
                kbd=render("<kbd>{n}</kbd>", n=label_key(n)) if label_key(n) else ""))
        return join(opts)


class Multiselect(Radio):
    type_name = "multiselect"
    aggregate_as = "multi"
    one_label = False
    predicts = "labels"
    ranks_by = "each"
    multi_label = True
    confusion = False
    input_type = "checkbox"

    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None or value == [] or value == "":
            return None
        values = value if isinstance(value, list) else [value]
        for v in values:
            if not isinstance(v, str) or v not in self.scheme.labels:
                raise _not_a_label(self, v)
        return sorted(set(values), key=self.scheme.labels.index)

    def from_form(self, values: List[str]) -> Any:
        return values

    def cell(self, value: Any) -> str:
        return ";".join(value) if isinstance(value, list) else super().cell(value)

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        return _picked(cell)


class Select(Radio):
    """A dropdown of the labels; the empty choice clears it."""

    type_name = "select"
    confusion = False  # as it always was: the held-out report draws radio's and likert's

    def from_form(self, values: List[str]) -> Any:
        return values[-1] if values else None

    def key_count(self) -> int:
        return 0

    def inputs(self, current: Any, first_key: int) -> Safe:
        opts = [render('<option value="">(none)</option>')]
        for label in self.scheme.labels:
            opts.append(render('<option value="{v}"{sel}>{v}</option>', v=label,
                               sel=Safe(" selected" if label == current else "")))
        return render('<select name="label:{s}" aria-label="{s}">{opts}</select>',
                      s=self.name, opts=join(opts))
