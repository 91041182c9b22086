"""Upstream's ``pure_display``: a scheme that asks nothing and only shows its description
between the other schemes (a section heading, a note to annotators). Its description is text;
upstream's Markdown heading marks (``## Selection Types``) make it a heading, other Markdown
is shown as written. It stores nothing: any value posted for it is refused."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from potato.markup import Safe, render
from potato.schemes.base import KEEP, Kind, short

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")


class PureDisplay(Kind):
    type_name = "pure_display"
    label_rule = "none"
    aggregate_as = "none"
    answers = False

    def parse(self, r, m, p) -> None:
        if self.scheme.required:
            r.error(p + ("label_requirement",), f"{self.name}: a pure_display scheme asks "
                                                f"nothing, so it cannot be required. Remove "
                                                f"label_requirement.")

    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None or value == "" or value == []:
            return None
        raise self.fail(f"shows a note and takes no answer, not {short(value)}.")

    def from_form(self, values: List[str]) -> Any:
        return KEEP  # nothing of it is in the form

    def summary(self) -> str:
        return "a note: " + (self.scheme.description or "")[:80]

    def fieldset(self, current: Any, first_key: int,
                 row: Optional[Dict[str, Any]] = None) -> Safe:
        s = self.scheme
        text = s.description or ""
        heading = _HEADING.match(text)
        body = render('<h3 class="scheme-note-heading">{t}</h3>', t=text[heading.end():]) \
            if heading else render('<p class="scheme-note-text">{t}</p>', t=text)
        logic = render(' data-show-when="{j}"', j=s.display_logic.as_json()) \
            if s.display_logic else ""
        return render('<fieldset class="scheme scheme-{t}" data-scheme="{n}" data-type="{t}"'
                      '{logic}>{b}</fieldset>', t=self.type_name, n=s.name, logic=Safe(logic),
                      b=body)
