"""An order of the scheme's labels: ``ranking``, upstream Potato's "put these in order, best
first". Every label gets a place; with ``allow_ties: true`` several may share one.

The value is the list of the labels, best first; labels tied for a place are a list inside it,
in the scheme's order: ``["B", ["A", "D"], "C"]`` is upstream's ``"B,A=D,C"`` (B first, A and D
tied second, C last). The annotate page gives each label a rank menu (1 to n; keys and mouse
alike) and shows the order they make; ``ranking.js`` moves a label that held a taken rank when
ties are not allowed and fills in the last one.

Aggregated by mean rank (``aggregate_as = "order"``, potato/labels/aggregate.py). No trainer
learns an order: the kind is annotate-only.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional

from potato.config.reader import dotted
from potato.markup import Safe, join, render
from potato.schemes.base import Kind, short

MAX_RANKED = 20  # more labels than this are no ranking a person makes in one go
ITEMS_KEY_HINT = ("Upstream's per-item lists to rank (items_key) are not read here: list what "
                  "annotators rank under labels (the same for every item), and show each "
                  "item's versions in its text.")
_RANKED = re.compile(r"([0-9]{1,3}):(.*)", re.S)  # a rank menu's value: "<rank>:<label>"


class Ranking(Kind):
    type_name = "ranking"
    keys = ("allow_ties", "items_key")
    script = "ranking.js"
    aggregate_as = "order"
    one_label = False

    def __init__(self, scheme):
        super().__init__(scheme)
        self.allow_ties = False

    # -- config --------------------------------------------------------------------------------
    def parse(self, r, m, p) -> None:
        if m.get("items_key") is not None:
            r.error(p + ("items_key",), f"{dotted(p + ('items_key',))}: {ITEMS_KEY_HINT}")
        self.allow_ties = r.boolean(m, "allow_ties", p, False)
        odd = [x for x in self.scheme.labels if "," in x or "=" in x]
        if odd:  # review 36.8: upstream's rank_order joins labels with ',' and ties with '='
            r.warn(p + ("labels",), f"{dotted(p)} ({self.name}): label {odd[0]!r} holds ',' "
                                    f"or '=', which upstream's output format (rank_order "
                                    f"\"A,B=C\") cannot tell apart from two labels: that "
                                    f"export cannot be read back. Rename it if you use it.")
        n = len(self.scheme.labels)
        if n and not 2 <= n <= MAX_RANKED:
            r.error(p + ("labels",), f"{dotted(p)} ({self.name}) has {n} label(s) to rank; a "
                                     f"ranking takes 2 to {MAX_RANKED}. "
                                     + ("Add the others." if n < 2 else
                                        "Split them into several schemes."))

    # -- values --------------------------------------------------------------------------------
    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None or value == [] or value == "":
            return None
        labels = self.scheme.labels
        if not isinstance(value, list):
            raise self.fail(f"takes the labels in order, best first (a list; tied labels as a "
                            f"list inside it), not {short(value)}.")
        if len(value) > len(labels):
            raise self.fail(f"{len(value)} places given; there are {len(labels)} labels.")
        out, seen = [], set()
        for place in value:
            group = place if isinstance(place, list) else [place]
            if isinstance(place, list) and not self.allow_ties:
                raise self.fail(f"{short(place)} ties labels, and this ranking has no ties "
                                f"(allow_ties: false): give each label its own place.")
            if not group or len(group) > len(labels):
                raise self.fail(f"{short(place)} is no place in the ranking (a label, or a "
                                f"list of tied labels).")
            for label in group:
                if not isinstance(label, str) or label not in labels:
                    raise self.fail(f"{short(label)} is not a label of the ranking (labels: "
                                    f"{', '.join(labels)}).")
                if label in seen:
                    raise self.fail(f"{short(label)} has two places; give each label one.")
                seen.add(label)
            group = sorted(group, key=labels.index)
            out.append(group if len(group) > 1 else group[0])
        missing = [label for label in labels if label not in seen]
        if missing:
            raise self.fail(f"{', '.join(map(short, missing))} ha{'s' if len(missing) == 1 else 've'}"
                            f" no place; a ranking places every label.")
        return out

    def answer_bytes(self, longest_text: int = 0) -> int:
        # each label's rank menu posted as label:<scheme>=<rank>:<label>, percent-encoded
        return 12 * sum(len(label) + len(self.name) + 12 for label in self.scheme.labels)

    def from_form(self, values: List[str]) -> Any:
        """The rank menus' values ("<rank>:<label>", "" for a label not yet ranked) as the
        order they make: labels that share a rank are one place (check refuses that without
        allow_ties); a value that is no menu's is passed on for check to name."""
        places: Dict[int, List[Any]] = {}
        for v in values:
            if not v:
                continue
            found = _RANKED.fullmatch(v)
            if not found:  # no menu's value: check refuses it, naming it (review 36.12)
                return v
            places.setdefault(int(found.group(1)), []).append(found.group(2))
        return [group if len(group) > 1 else group[0]
                for _, group in sorted(places.items())] or None

    def cell(self, value: Any) -> str:
        return "" if value is None else json.dumps(value, ensure_ascii=False)

    def upstream_cell(self, value: Any) -> Dict[str, str]:
        places = value if isinstance(value, list) else [value]
        return {"rank_order": ",".join("=".join(map(str, p)) if isinstance(p, list) else str(p)
                                       for p in places)}

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        raw = next(iter(cell.values()), None) if cell else None
        if not isinstance(raw, str):
            return raw  # check names it
        return [p.split("=") if "=" in p else p for p in raw.split(",") if p] or None

    def summary(self) -> str:
        ties = " (ties allowed)" if self.allow_ties else ""
        return f"an order of {', '.join(self.scheme.labels)}, best first{ties}"

    # -- the annotate page ---------------------------------------------------------------------
    def inputs(self, current: Any, first_key: int) -> Safe:
        labels, rank = self.scheme.labels, {}
        for i, place in enumerate(current if isinstance(current, list) else []):
            for label in (place if isinstance(place, list) else [place]):
                rank[label] = i + 1
        rows = []
        for label in labels:
            options = [render('<option value="">–</option>')] + [
                render('<option value="{k}:{v}"{sel}>{k}</option>', k=k, v=label,
                       sel=Safe(" selected" if rank.get(label) == k else ""))
                for k in range(1, len(labels) + 1)]
            rows.append(render('<li class="ranking-row"><label><select name="label:{s}" '
                               'aria-label="Rank of {v}">{o}</select> {v}</label></li>',
                               s=self.name, v=label, o=join(options)))
        return render('<ul class="ranking" data-ranking="{s}"{t}>{rows}</ul>'
                      '<p class="hint">1 is best.{tie} Your order: '
                      '<output class="ranking-order" aria-live="polite"></output></p>',
                      s=self.name, t=Safe(' data-ties="1"' if self.allow_ties else ""),
                      rows=join(rows),
                      tie=" Give tied labels the same rank." if self.allow_ties else "")
