"""Post-editing: ``text_edit``, upstream Potato's inline text editing (machine translation
post-editing, grammar correction, simplification). The annotator gets a text area prefilled
with the item's ``source_field`` value (the text to edit; the original is shown above the box)
and edits it; stored as the edited text, checked as free text is (at most ``max_length``
characters, default 5000, no control characters other than tab and newline).

The box starts with the source, so saving an item without typing stores the source unchanged
(an edit distance of 0: "nothing to fix" is an answer in post-editing); an emptied box stores
no answer. ``allow_reset`` (default true) offers a button that puts the source back;
``show_edit_distance`` (default true) shows the character edit distance (Levenshtein) from the
source as the annotator types (edit.js); ``show_diff``'s word-by-word diff is not drawn here
(the original above the box is what the annotator compares with).

Every item must have the source field as text, at most max_length characters: an item that
does not is an error when items are read. Not aggregated; no trainer learns it
(annotate-only). Upstream's output holds ``{name: "<JSON with edited_text>"}``; the original
text and the distances upstream adds to that JSON are not in it here (the value is the edited
text alone), and upstream's entry is read back by its ``edited_text``.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

from potato.config.reader import dotted
from potato.markup import Safe, render
from potato.schemes.text import CONTROL, DEFAULT_MAX_LENGTH, MAX_MAX_LENGTH, Text

# The page counts the edit distance only while source and edit are at most this many
# characters each (a Levenshtein table of their product: about a second at the limit).
DISTANCE_LIMIT = 5000


class TextEdit(Text):
    type_name = "text_edit"
    keys = ("source_field", "show_diff", "show_edit_distance", "allow_reset", "max_length",
            "rows")
    label_rule = "none"
    script = "edit.js"

    def __init__(self, scheme):
        super().__init__(scheme)
        self.source_field, self.rows = "", 5
        self.show_edit_distance = self.allow_reset = True

    def parse(self, r, m, p) -> None:
        self.source_field = r.text(m, "source_field", p, "", numbers_ok=False) or ""
        if not self.source_field:
            r.error(p + ("source_field",), f"{dotted(p)} ({self.name}) is a text_edit scheme "
                                           f"without source_field: give source_field, the item "
                                           f"field holding the text to edit (e.g. mt_output).")
        if r.boolean(m, "show_diff", p, False):
            r.warn(p + ("show_diff",), f"{dotted(p + ('show_diff',))}: upstream's word-by-word "
                                       f"diff is not drawn here; the page shows the original "
                                       f"above the box (and the edit distance with "
                                       f"show_edit_distance). Remove show_diff to silence this.")
        self.show_edit_distance = r.boolean(m, "show_edit_distance", p, True)
        self.allow_reset = r.boolean(m, "allow_reset", p, True)
        self.rows = r.number(m, "rows", p, 5, 1, 50, integer=True)
        self.max_length = r.number(m, "max_length", p, DEFAULT_MAX_LENGTH, 1, MAX_MAX_LENGTH,
                                   integer=True)
        self.multiline = True

    # -- the item ------------------------------------------------------------------------------
    def item_fields(self):
        return (self.source_field,)

    def source(self, row: Dict[str, Any]) -> Optional[str]:
        """The item's text to edit (CR LF as LF, as the box posts it), or None."""
        value = row.get(self.source_field)
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            return None
        return str(value).replace("\r\n", "\n").replace("\r", "\n")

    def check_item(self, row: Dict[str, Any]) -> Optional[str]:
        where = f"{self.source_field!r} (source_field of text_edit scheme {self.name!r})"
        if self.source_field not in row:
            return f"has no {where}: give each item the text to edit there."
        text = self.source(row)
        if text is None:
            return (f"has {where} as a {type(row[self.source_field]).__name__}, not the text "
                    f"to edit.")
        if len(text) > self.max_length:
            return (f"has {len(text)} characters in {where}, more than the {self.max_length} "
                    f"an edit may keep; raise the scheme's max_length.")
        bad = CONTROL.search(text)
        if bad:
            return (f"has the control character U+{ord(bad.group()):04X} in {where} at "
                    f"character {bad.start()}, which an edit may not keep; remove it.")
        return None

    def initial(self, row: Dict[str, Any]) -> Any:
        return self.source(row)

    def view(self, row: Dict[str, Any]) -> Safe:
        text = self.source(row)
        if text is None:
            return Safe("")
        return render('<section class="edit-source" data-scheme="{n}" aria-label="Original '
                      'text to edit ({n})"><h3 class="edit-source-title">Original ({n})</h3>'
                      '<div class="edit-source-text">{t}</div></section>', n=self.name, t=text)

    # -- values --------------------------------------------------------------------------------
    def upstream_cell(self, value: Any) -> Dict[str, str]:
        return {self.name: json.dumps({"edited_text": str(value)}, ensure_ascii=False)}

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        raw = next(iter(cell.values()), None) if cell else None
        if isinstance(raw, str) and raw.lstrip().startswith("{"):
            try:
                data = json.loads(raw)
            except ValueError:
                return raw  # text after all: check judges it
            if isinstance(data, dict) and "edited_text" in data:
                return data["edited_text"]
            return data  # check names it
        return raw

    def summary(self) -> str:
        return (f"the item's {self.source_field!r} edited, at most {self.max_length} "
                f"characters")

    # -- the annotate page ---------------------------------------------------------------------
    def inputs(self, current: Any, first_key: int) -> Safe:
        box = render('<textarea name="label:{s}" aria-label="{s}: edited text" rows="{r}" '
                     'maxlength="{n}" data-edit-box="{s}">{v}</textarea>', s=self.name,
                     r=self.rows, n=self.max_length,
                     v="\n" + (current if isinstance(current, str) else ""))
        reset = render('<button type="button" class="edit-reset" data-edit-reset="{s}">Reset '
                       'to the original</button>', s=self.name) if self.allow_reset else ""
        distance = render('<p class="hint edit-distance" data-edit-distance="{s}" '
                          'data-limit="{lim}" aria-live="polite">Characters changed: '
                          '<output>–</output></p>', s=self.name, lim=DISTANCE_LIMIT) \
            if self.show_edit_distance else ""
        return render('<div class="text-edit">{box}<div class="edit-controls">{reset}'
                      '{distance}</div></div>', box=box, reset=reset, distance=distance)
