"""Extractive question answering: ``extractive_qa``, upstream Potato's SQuAD-style answer
marking. The item's question (its ``question_field``, default ``question``) is shown above
its text, the passage; the annotator marks the one stretch of the passage that answers it
(as a span is marked: spans.js, with the one label ``answer``), or, with
``allow_unanswerable`` (default true), ticks "Unanswerable".

Stored as a span list of at most one span, ``[{"start", "end", "label": "answer", "text"}]``
(offsets as span's: Unicode code points of the item's text), or ``[]`` for "unanswerable";
nothing marked and nothing ticked is no answer. The passage is the item's text:
``passage_field`` (upstream's key) must name ``item_properties.text_key`` when given.
``highlight_color`` is accepted (a colour name or code) and not used: answers are marked as
spans are. Aggregated as spans are (agreed answers; most saying unanswerable: ``[]``); no
trainer learns it (annotate-only). Upstream's output holds ``{name: "<JSON with answer_text,
start, end, unanswerable>"}`` (start and end -1 for unanswerable) and is read back the same
way.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from potato.markup import Safe, render
from potato.schemes.span import Span

ANSWER = "answer"  # the one label of an answer span
UNANSWERABLE = "unanswerable"  # the tick box's form value


class _Both:
    """``from_form``'s answer for a form with an answer marked and "Unanswerable" ticked."""

    def __repr__(self) -> str:
        return "an answer marked and Unanswerable ticked"


BOTH = _Both()


class ExtractiveQA(Span):
    type_name = "extractive_qa"
    keys = ("question_field", "passage_field", "allow_unanswerable", "highlight_color")
    label_rule = "none"
    ranks_by = None  # no trainer predicts answers: nothing to order by
    upstream_spans = False  # upstream's output holds the answer in label_annotations
    max_spans = 1
    aggregate_as = "whole"  # one answer (or unanswerable) as the annotators gave it, not
    #                         spans merged from several answers

    def __init__(self, scheme):
        super().__init__(scheme)
        self.question_field, self.passage_field = "question", ""
        self.allow_unanswerable = True

    def parse(self, r, m, p) -> None:
        self.question_field = r.text(m, "question_field", p, "question",
                                     numbers_ok=False) or "question"
        self.passage_field = r.text(m, "passage_field", p, "", numbers_ok=False) or ""
        self.allow_unanswerable = r.boolean(m, "allow_unanswerable", p, True)
        r.text(m, "highlight_color", p, "", numbers_ok=False)
        self.scheme.labels, self.scheme.label_keys = [ANSWER], ["1"]

    def text_field(self) -> Optional[str]:
        return self.passage_field or None

    # -- the item ------------------------------------------------------------------------------
    def check_item(self, row: Dict[str, Any]) -> Optional[str]:
        question = row.get(self.question_field)
        if not isinstance(question, str) or not question.strip():
            what = "no" if question is None else f"a {type(question).__name__} as its"
            return (f"has {what} {self.question_field!r} (question_field of extractive_qa "
                    f"scheme {self.name!r}); give each item its question there as text.")
        return None

    def view(self, row: Dict[str, Any]) -> Safe:
        question = row.get(self.question_field)
        if not isinstance(question, str):
            return Safe("")
        return render('<section class="qa-question" data-scheme="{n}" aria-label="Question">'
                      '<h3 class="qa-question-title">Question</h3><p class="qa-question-text">'
                      '{q}</p></section>', n=self.name, q=question)

    # -- values --------------------------------------------------------------------------------
    def answer_bytes(self, longest_text: int = 0) -> int:
        return 300 + 12 * longest_text  # one span and the text it quotes

    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is BOTH:
            raise self.fail("an answer is marked and Unanswerable is ticked; keep one (delete "
                            "the answer, or untick Unanswerable).")
        if value == []:
            if not self.allow_unanswerable:
                raise self.fail("takes an answer marked in the passage ([] says unanswerable, "
                                "which allow_unanswerable: false does not offer).")
            return []
        if isinstance(value, list) and len(value) > 1:
            raise self.fail(f"takes one answer span, not {len(value)}; mark the one stretch of "
                            f"the passage that answers the question.")
        return super().check(value, text)

    def from_form(self, values: List[str]) -> Any:
        ticked = UNANSWERABLE in values
        spans = super().from_form([v for v in values if v != UNANSWERABLE][-1:])
        if ticked:
            return [] if spans == [] else BOTH
        return None if spans == [] else spans

    def upstream_cell(self, value: Any) -> Dict[str, str]:
        if not isinstance(value, list):
            return {}
        if not value:
            entry = {"answer_text": "", "start": -1, "end": -1, "unanswerable": True}
        else:
            span = value[0]
            entry = {"answer_text": span.get("text"), "start": span.get("start"),
                     "end": span.get("end"), "unanswerable": False}
        return {self.name: json.dumps(entry, ensure_ascii=False)}

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        raw = next(iter(cell.values()), None) if cell else None
        try:
            data = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            return raw  # check names it
        if not isinstance(data, dict):
            return data
        if data.get("unanswerable") is True:
            return []
        return [{"start": data.get("start"), "end": data.get("end"), "label": ANSWER,
                 "text": data.get("answer_text")}]

    def summary(self) -> str:
        return (f"the answer to the item's {self.question_field!r}, marked in its text"
                + (", or unanswerable" if self.allow_unanswerable else ""))

    # -- the annotate page ---------------------------------------------------------------------
    def inputs(self, current: Any, first_key: int) -> Safe:
        spans = super().inputs(current if isinstance(current, list) else None, first_key)
        if not self.allow_unanswerable:
            return spans
        return render('{spans}<label class="qa-unanswerable"><input type="checkbox" '
                      'name="label:{s}" value="{u}" data-spans-none="{s}"{c}> Unanswerable: '
                      'the passage does not answer the question</label>', spans=spans,
                      s=self.name, u=UNANSWERABLE, c=Safe(" checked" if current == [] else ""))

