"""Free text: ``text``, one text box (a one-line input, or a text area with ``textarea: {on:
true, rows: N}`` or ``multiline: true`` and ``rows``), stored as the string, at most
``max_length`` characters (Unicode code points)."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from potato.config.reader import dotted
from potato.schemes.base import Kind, short
from potato.markup import Safe, render

DEFAULT_MAX_LENGTH = 5000
MAX_MAX_LENGTH = 100000
# Control characters other than tab and newline (C0, DEL, C1) have no place in an answer typed
# by a person, nor have bidi overrides and isolates, which make a text read as what it is not.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class Text(Kind):
    type_name = "text"
    aggregate_as = "none"
    keys = ("textarea", "multiline", "rows", "cols", "max_length", "placeholder",
            "text_box_single_line")
    label_rule = "optional-one"

    def __init__(self, scheme):
        super().__init__(scheme)
        self.multiline, self.rows = False, 3
        self.max_length, self.placeholder = DEFAULT_MAX_LENGTH, ""

    def parse(self, r, m, p) -> None:
        raw = m.get("textarea")
        if isinstance(raw, dict) and True in raw:  # YAML 1.1 reads the key `on` as true
            raw = {("on" if k is True else k): v for k, v in raw.items()}
        ta = r.mapping(raw, p + ("textarea",), ("on", "rows", "cols"),
                       f"{dotted(p + ('textarea',))}")
        self.multiline = r.boolean(m, "multiline", p, False) or r.boolean(
            ta, "on", p + ("textarea",), False) or not r.boolean(  # upstream's form of it
            m, "text_box_single_line", p, True)
        self.rows = r.number(m, "rows", p, None, 1, 50, integer=True) or r.number(
            ta, "rows", p + ("textarea",), 3, 1, 50, integer=True)
        r.number(m, "cols", p, None, 1, 500, integer=True)
        r.number(ta, "cols", p + ("textarea",), None, 1, 500, integer=True)
        self.max_length = r.number(m, "max_length", p, DEFAULT_MAX_LENGTH, 1, MAX_MAX_LENGTH,
                                   integer=True)
        self.placeholder = r.text(m, "placeholder", p, "") or ""

    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail(f"takes text (a string), not {short(value)}.")
        value = value.replace("\r\n", "\n").replace("\r", "\n")  # browsers post CR LF
        if not value.strip():
            return None
        if len(value) > self.max_length:
            raise self.fail(f"the text has {len(value)} characters; at most {self.max_length} "
                            f"are allowed (max_length).")
        bad = CONTROL.search(value)
        if bad:
            raise self.fail(f"the text holds the control character U+{ord(bad.group()):04X} at "
                            f"character {bad.start()}; remove it.")
        return value

    def answer_bytes(self, longest_text: int = 0) -> int:
        # A code point is at most 4 bytes of UTF-8; a form percent-encodes each byte (3
        # characters), and JSON may escape it as a surrogate pair (12): 12 bytes each covers
        # every way a browser or a client sends it (a newline sent as CR LF takes 6).
        return 12 * self.max_length

    def from_form(self, values: List[str]) -> Any:
        return values[-1] if values else None

    def upstream_cell(self, value: Any) -> Dict[str, str]:
        return {"text_box": str(value)}  # upstream's name for its text box

    def summary(self) -> str:
        return f"free text, at most {self.max_length} characters"

    def inputs(self, current: Any, first_key: int) -> Safe:
        label = self.scheme.labels[0] if self.scheme.labels else ""
        caption = render('<span class="text-label">{l}</span>', l=label) if label else ""
        if self.multiline:
            box = render('<textarea name="label:{s}" aria-label="{s}" rows="{r}" '
                         'maxlength="{n}" placeholder="{ph}">{v}</textarea>', s=self.name,
                         r=self.rows, n=self.max_length, ph=self.placeholder,
                         v="\n" + (current or ""))  # the parser drops one leading newline
        else:
            box = render('<input type="text" name="label:{s}" aria-label="{s}" maxlength="{n}" '
                         'placeholder="{ph}" value="{v}">', s=self.name, n=self.max_length,
                         ph=self.placeholder, v=current or "")
        return render('<label class="text-box">{c}{box}</label>', c=caption, box=box)
