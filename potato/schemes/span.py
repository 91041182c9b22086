"""``span``: stretches of the item's text, each with one of the scheme's labels. Stored as a
list of ``{"start", "end", "label", "text"}`` sorted by start: ``start`` and ``end`` are
character offsets into the item's text (Python ``str`` indices, i.e. Unicode code points; end
exclusive), ``text`` the characters they cover. Spans of one scheme never overlap. An empty
list is an answer too: the annotator submitted the scheme and marked nothing.

The browser works in UTF-16 code units; ``static/spans.js`` converts its selections to code
points before it posts them, and this check is the one that decides.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from potato.schemes.base import Kind, short
from potato.markup import Safe, join, render

MAX_SPANS = 1000
SPAN_KEYS = ("start", "end", "label", "text")
MAX_FORM_CHARS = 2_000_000


class Span(Kind):
    type_name = "span"
    aggregate_as = "spans"
    predicts = "spans"
    ranks_by = "confidence"
    report_as = "entities"
    upstream_spans = True  # an empty answer (nothing marked) is an empty label_annotations entry
    label_values = True
    script = "spans.js"
    marks_text = True
    max_spans = MAX_SPANS        # spans one answer may hold (spans.js replaces the one at 1)

    def answer_bytes(self, longest_text: int = 0) -> int:
        # Up to MAX_SPANS spans, each {"start", "end", "label", "text"} (about 200 bytes as a
        # form sends them, plus its label), and their texts, which do not overlap: at most the
        # item's text, 12 bytes a character however it is sent.
        longest_label = max((len(label) for label in self.scheme.labels), default=0)
        return MAX_SPANS * (200 + 12 * longest_label) + 12 * longest_text

    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None or value == "":
            return None
        if value == []:
            return []  # the annotator marked nothing: an answer ("no entities"), kept
        if text is None:
            raise self.fail("spans can only be checked against the item's text.")
        if not isinstance(value, list):
            raise self.fail(f'takes a list of spans like [{{"start": 0, "end": 5, "label": '
                            f'"{self.scheme.labels[0]}"}}], not {short(value)}.')
        if len(value) > MAX_SPANS:
            raise self.fail(f"{len(value)} spans is more than the {MAX_SPANS} one item may hold.")
        spans = sorted((self._one(i, s, text) for i, s in enumerate(value)),
                       key=lambda s: (s["start"], s["end"]))
        for a, b in zip(spans, spans[1:]):
            if b["start"] < a["end"]:
                raise self.fail(f"the spans {_show(a)} and {_show(b)} overlap; spans of one "
                                f"scheme may not overlap.")
        return spans

    def _one(self, i: int, span: Any, text: str) -> Dict[str, Any]:
        where = f"span {i + 1}"
        self.only_keys(where, span, SPAN_KEYS, "start, end and label", "span")
        start, end = self.offsets(where, span, text)
        label = span.get("label")
        if not isinstance(label, str) or label not in self.scheme.labels:
            raise self.fail(f"{where}: {short(label)} is not a label of this scheme (labels: "
                            f"{', '.join(self.scheme.labels)}).")
        covered = text[start:end]
        if "text" in span and span["text"] != covered:
            raise self.fail(f"{where}: its text {short(span['text'])} is not the text at "
                            f"{start}..{end}, {short(covered)} (offsets count characters, "
                            f"Unicode code points, not bytes or UTF-16 units).")
        return {"start": start, "end": end, "label": label, "text": covered}

    def from_form(self, values: List[str]) -> Any:
        if not values or not values[-1].strip():
            return []  # the scheme was on the form (present:) and nothing was marked
        raw = values[-1]
        if len(raw) > MAX_FORM_CHARS:
            return raw[:80]  # the check names it as "not a list of spans"
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return raw[:80]

    def cell(self, value: Any) -> str:
        return "" if value is None else json.dumps(value, ensure_ascii=False)

    def upstream_cell(self, value: Any) -> Dict[str, str]:
        return {}  # submitted with nothing marked; marked spans go to span_annotations

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        return []

    def summary(self) -> str:
        return "spans of the text: " + ", ".join(self.scheme.labels)

    def inputs(self, current: Any, first_key: int) -> Safe:
        buttons, listed = [], []
        for label, key in zip(self.scheme.labels, self.scheme.label_keys):
            buttons.append(render(
                '<button type="button" class="span-label" data-scheme="{s}" data-label="{l}" '
                'data-key="{k}">{kbd} {l}</button>', s=self.name, l=label, k=key,
                kbd=render("<kbd>{k}</kbd>", k=key) if key else ""))
        for span in current or []:
            listed.append(render('<li>{l}: {t}</li>', l=span.get("label"), t=span.get("text")))
        return render(
            '<input type="hidden" name="label:{s}" value="{v}" data-spans="{s}"{mx}>'
            '<p class="span-labels">Mark the selected text as: {buttons}</p>'
            '<p class="hint">Select text with the mouse, or click the text (or Tab to it) and '
            'use <kbd>Shift</kbd>+arrows; then press a label\'s key. Click a marked span to '
            'change or delete it (<kbd>Delete</kbd> with the cursor in it).</p>'
            '<p class="error span-message" role="alert" hidden></p>'
            '<ul class="span-list" data-scheme="{s}">{listed}</ul>',
            s=self.name, v=json.dumps(current or [], ensure_ascii=False),
            buttons=join(buttons), listed=join(listed),
            mx=render(' data-max-spans="{n}"', n=self.max_spans)
            if self.max_spans < MAX_SPANS else "")


    def suggestion(self, prediction: Optional[Dict[str, Any]]) -> Safe:
        """The model's spans, for spans.js to draw (dashed, apart from the annotator's own) and
        to accept one by one or all at once; nothing is stored until the annotator accepts."""
        spans = prediction.get("label") if isinstance(prediction, dict) else None
        if not isinstance(spans, list) or not spans:
            return Safe("")
        keep = [{"start": s.get("start"), "end": s.get("end"), "label": s.get("label"),
                 "text": s.get("text"), "confidence": s.get("confidence")}
                for s in spans[:MAX_SPANS] if isinstance(s, dict)]
        return render(
            '<div class="span-suggestions" data-scheme="{s}" data-spans="{v}">'
            '<p class="suggestion">Model suggests {n} span{pl} for {s} (dashed in the text): '
            'click one to accept it, or press <kbd>A</kbd> to accept them all; they are not '
            'saved unless you accept them. <button type="button" class="link '
            'accept-all-spans">accept all (<kbd>A</kbd>)</button></p>'
            '<ul class="suggested-list" data-scheme="{s}"></ul></div>',
            s=self.name, v=json.dumps(keep, ensure_ascii=False), n=len(keep),
            pl="" if len(keep) == 1 else "s")


def _show(span: Dict[str, Any]) -> str:
    return f"{span['start']}..{span['end']} ({span['label']})"
