"""``span_link``: typed links between the spans of another span scheme of the config (its
``span_schema``): relations between entities, dependency arcs between tokens. Upstream
Potato's keys: ``link_types`` (each a ``name``, ``directed`` (default false),
``allowed_source_labels`` and ``allowed_target_labels`` (labels of the span scheme; none
listed: any label), ``color`` (accepted, not used), ``max_spans`` (2 only: upstream's n-ary
links are refused with what to do instead)), ``visual_display`` (accepted: the links are
listed under the scheme, no arcs are drawn; validate says so).

Stored as a sorted list of at most ``MAX_LINKS`` links, each ``{"type", "source", "target"}``
whose ends are ``{"start", "end", "label"}`` (a span of the item's text: offsets as span's,
Unicode code points; the label one of the span scheme's). A link of an undirected type is
stored with its earlier end as source; a link to itself and a link given twice are refused.
``[]`` is an answer (no links). The check sees this scheme's value and the item's text only:
that each end is also among the spans posted for the span scheme is not checked by the server
(the page drops a link whose span is deleted before it is sent).

The page (static/links.js) offers the link types as buttons; a click on two marks in the text
(or picking them in the two menus) makes a link of the chosen type, listed with a delete
button. Annotators' links are aggregated as the links at least half of them made; no trainer
learns them (annotate-only). Upstream's output holds ``{name: "<JSON list of upstream's
link records>"}``: ``link_type``, ``span_ids`` (source then target), ``direction``, and in
``properties`` the two spans (``span_annotations`` entries carry no id to point at).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

from potato.config.reader import dotted
from potato.markup import Safe, join, render
from potato.schemes.base import Kind, short
from potato.schemes.span import MAX_FORM_CHARS, Span

MAX_LINKS = 500
MAX_TYPES = 100
LINK_KEYS = ("type", "source", "target")
END_KEYS = ("start", "end", "label", "text")
TYPE_KEYS = ("name", "directed", "allowed_source_labels", "allowed_target_labels", "color",
             "max_spans", "tooltip", "description")


class LinkType:
    def __init__(self, name: str, directed: bool, sources: List[str], targets: List[str]):
        self.name, self.directed = name, directed
        self.sources, self.targets = sources, targets

    def fits(self, source: str, target: str) -> bool:
        return (not self.sources or source in self.sources) and (
            not self.targets or target in self.targets)


class SpanLink(Kind):
    type_name = "span_link"
    keys = ("span_schema", "link_types", "visual_display")
    label_rule = "none"
    script = "links.js"
    aggregate_as = "agreed_entries"
    ranks_by = None  # no trainer predicts links: nothing to order by

    def __init__(self, scheme):
        super().__init__(scheme)
        self.span_schema = ""
        self.types: List[LinkType] = []
        self.span_labels: List[str] = []

    # -- config --------------------------------------------------------------------------------
    def parse(self, r, m, p) -> None:
        self.span_schema = r.text(m, "span_schema", p, "", numbers_ok=False) or ""
        if not self.span_schema:
            r.error(p + ("span_schema",), f"{dotted(p)} ({self.name}) is a span_link scheme: "
                                          f"give span_schema, the name of the span scheme "
                                          f"whose spans it links.")
        raw = m.get("link_types")
        if not isinstance(raw, list) or not raw or len(raw) > MAX_TYPES:
            r.error(p + ("link_types",), f"{dotted(p)} ({self.name}) needs link_types: a list "
                                         f"of 1 to {MAX_TYPES} link types, each with a name.")
            raw = []
        for j, item in enumerate(raw):
            q = p + ("link_types", j)
            t = r.mapping(item, q, TYPE_KEYS, "a link type")
            name = r.text(t, "name", q, "") or ""
            if not name.strip() or not name.isprintable() or len(name) > 100:
                r.error(q + ("name",), f"{dotted(q)} needs a name (printable text, at most "
                                       f"100 characters).")
                continue
            if name in [x.name for x in self.types]:
                r.error(q + ("name",), f"{dotted(q)}: the link type {short(name)} is listed "
                                       f"twice.")
                continue
            r.text(t, "color", q, "", numbers_ok=False)
            spans = r.number(t, "max_spans", q, 2, integer=True)
            if spans != 2:
                r.error(q + ("max_spans",), f"{dotted(q + ('max_spans',))} is {spans}: links "
                                            f"here join two spans (a source and a target); "
                                            f"make a link from each member to the first "
                                            f"instead, or remove max_spans.")
            self.types.append(LinkType(name, r.boolean(t, "directed", q, False),
                                       r.text_list(t, "allowed_source_labels", q),
                                       r.text_list(t, "allowed_target_labels", q)))
        self.scheme.labels = [t.name for t in self.types]
        self.scheme.label_keys = [""] * len(self.types)
        if m.get("visual_display") is not None:
            r.mapping(m.get("visual_display"), p + ("visual_display",),
                      ("enabled", "arc_position", "show_labels", "multi_line_mode"),
                      "visual_display")
            r.warn(p + ("visual_display",), f"{dotted(p + ('visual_display',))}: no arcs are "
                                            f"drawn here; {self.name}'s links are listed under "
                                            f"the scheme (type, source and target), each with "
                                            f"a delete button.")

    def settle(self, r, schemes, p) -> None:
        """The span scheme named by span_schema, once every scheme is read."""
        if not self.span_schema:
            return
        other = next((s for s in schemes if s.name == self.span_schema), None)
        if other is None or not isinstance(other.kind, Span):
            spans = [s.name for s in schemes if isinstance(s.kind, Span)]
            r.error(p + ("span_schema",), f"{dotted(p + ('span_schema',))} is "
                                          f"{short(self.span_schema)}, which is not a span "
                                          f"scheme of this config (span schemes: "
                                          f"{', '.join(spans) or 'none; add one'}).")
            return
        self.span_labels = list(other.labels)
        for j, t in enumerate(self.types):
            for key, labels in (("allowed_source_labels", t.sources),
                                ("allowed_target_labels", t.targets)):
                for label in labels:
                    if label not in self.span_labels:
                        r.error(p + ("link_types", j, key),
                                f"{dotted(p + ('link_types', j, key))} lists {short(label)}, "
                                f"which is not a label of span scheme {self.span_schema!r} "
                                f"(labels: {', '.join(self.span_labels)}).")

    # -- values --------------------------------------------------------------------------------
    def answer_bytes(self, longest_text: int = 0) -> int:
        longest = max([len(x) for x in self.span_labels + self.scheme.labels] or [0])
        return MAX_LINKS * (300 + 36 * longest)

    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None or value == "":
            return None
        if value == []:
            return []
        if text is None:
            raise self.fail("links can only be checked against the item's text.")
        if not isinstance(value, list):
            raise self.fail(f'takes a list of links like [{{"type": "{self.scheme.labels[0]}", '
                            f'"source": {{"start": 0, "end": 3, "label": ...}}, "target": '
                            f'{{...}}}}], not {short(value)}.')
        if len(value) > MAX_LINKS:
            raise self.fail(f"{len(value)} links is more than the {MAX_LINKS} one item may "
                            f"hold.")
        links, seen = [], set()
        for i, link in enumerate(value):
            one = self._one(i, link, text)
            key = _key(one)
            if key in seen:
                raise self.fail(f"link {i + 1} ({_show(one)}) is given twice.")
            seen.add(key)
            links.append(one)
        return sorted(links, key=_key)

    def _one(self, i: int, link: Any, text: str) -> Dict[str, Any]:
        where = f"link {i + 1}"
        self.only_keys(where, link, LINK_KEYS, "type, source and target", "link")
        kind = next((t for t in self.types if t.name == link.get("type")), None)
        if kind is None:
            raise self.fail(f"{where}: {short(link.get('type'))} is not a link type of this "
                            f"scheme (types: {', '.join(self.scheme.labels)}).")
        source = self._end(f"{where}'s source", link.get("source"), text)
        target = self._end(f"{where}'s target", link.get("target"), text)
        if source == target:
            raise self.fail(f"{where} links the span {_span(source)} to itself.")
        if not kind.directed and _end_key(target) < _end_key(source):
            source, target = target, source
        if not (kind.fits(source["label"], target["label"]) or not kind.directed and
                kind.fits(target["label"], source["label"])):
            raise self.fail(f"{where}: a {kind.name} link goes from "
                            f"{' or '.join(kind.sources) or 'any label'} to "
                            f"{' or '.join(kind.targets) or 'any label'}, not from "
                            f"{source['label']} to {target['label']}.")
        return {"type": kind.name, "source": source, "target": target}

    def _end(self, where: str, end: Any, text: str) -> Dict[str, Any]:
        self.only_keys(where, end, END_KEYS, "start, end and label", "link's end")
        start, stop = self.offsets(where, end, text)
        label = end.get("label")
        if not isinstance(label, str) or label not in self.span_labels:
            raise self.fail(f"{where}: {short(label)} is not a label of span scheme "
                            f"{self.span_schema!r} (labels: {', '.join(self.span_labels)}).")
        if "text" in end and end["text"] != text[start:stop]:
            raise self.fail(f"{where}: its text {short(end['text'])} is not the text at "
                            f"{start}..{stop}, {short(text[start:stop])}.")
        return {"start": start, "end": stop, "label": label}

    def fits(self, value: Any, row: Dict[str, Any],
             answers: Optional[Dict[str, Any]] = None) -> Any:
        """The links only between spans marked in ``span_schema`` (the annotator's answers
        once this save is stored): a link to a span not marked is refused."""
        if not value or answers is None:
            return value
        marked = {_end_key(s) for s in (answers.get(self.span_schema) or [])
                  if isinstance(s, dict) and {"start", "end", "label"} <= set(s)}
        for link in value:
            for end in ("source", "target"):
                if _end_key(link[end]) not in marked:
                    raise self.fail(f"the link {_show(link)} has the {end} {_span(link[end])}, "
                                    f"which is not a span marked in {self.span_schema}: mark it "
                                    f"first (in the same save, or before), or remove the link.")
        return value

    def from_form(self, values: List[str]) -> Any:
        if not values or not values[-1].strip():
            return []
        raw = values[-1]
        if len(raw) > MAX_FORM_CHARS:
            return raw[:80]
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return raw[:80]

    def cell(self, value: Any) -> str:
        return "" if value is None else json.dumps(value, ensure_ascii=False)

    def summary(self) -> str:
        return f"links between {self.span_schema} spans: " + ", ".join(self.scheme.labels)

    def training_schema(self) -> Dict[str, Any]:
        return {"labels": list(self.scheme.labels), "span_schema": self.span_schema}

    # -- upstream Potato's output --------------------------------------------------------------
    def upstream_cell(self, value: Any) -> Dict[str, str]:
        if not isinstance(value, list):
            return {}
        kinds = {t.name: t for t in self.types}
        records = [{"id": f"link_{i}", "schema": self.name, "link_type": link["type"],
                    "span_ids": [self._span_id(link["source"]), self._span_id(link["target"])],
                    "direction": "directed" if kinds.get(link["type"]) is None or
                    kinds[link["type"]].directed else "undirected",
                    "properties": {"spans": [link["source"], link["target"]]}}
                   for i, link in enumerate(value)]
        return {self.name: json.dumps(records, ensure_ascii=False)}

    def _span_id(self, end: Dict[str, Any]) -> str:
        return f"{self.span_schema}:{end['start']}-{end['end']}"

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        raw = next(iter(cell.values()), None) if cell else None
        try:
            data = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            return raw  # check names it
        if not isinstance(data, list):
            return data
        out = []
        for rec in data:
            spans = (rec.get("properties") or {}).get("spans") if isinstance(rec, dict) else None
            if not isinstance(spans, list) or len(spans) != 2:
                return rec  # check names it
            out.append({"type": rec.get("link_type"), "source": spans[0], "target": spans[1]})
        return out

    # -- the annotate page ---------------------------------------------------------------------
    def inputs(self, current: Any, first_key: int) -> Safe:
        buttons = [render('<button type="button" class="link-type" data-type="{t}" '
                          'data-directed="{d}" data-sources="{src}" data-targets="{tg}" '
                          'aria-pressed="false">{t} {arrow}</button>', t=t.name,
                          d="1" if t.directed else "", src=json.dumps(t.sources),
                          tg=json.dumps(t.targets), arrow="\u2192" if t.directed else "\u2194")
                   for t in self.types]
        listed = [render('<li>{t}: {a} \u2192 {b}</li>', t=link.get("type"),
                         a=_span(link.get("source")), b=_span(link.get("target")))
                  for link in (current if isinstance(current, list) else [])
                  if isinstance(link, dict)]
        return render(
            '<input type="hidden" name="label:{s}" value="{v}" data-links="{s}" '
            'data-span-scheme="{sp}">'
            '<p class="link-types">Link type: {buttons}</p>'
            '<p class="link-pick"><label>From <select class="link-source" aria-label="Source '
            'span"></select></label> <label>to <select class="link-target" aria-label="Target '
            'span"></select></label> <button type="button" class="link-add">Add link</button>'
            '</p>'
            '<p class="hint">Choose a link type, then click the source span\'s mark and the '
            'target span\'s mark in the text (or pick them in the menus and press Add link). '
            'Links are listed here, not drawn as arcs; a link whose span is deleted goes '
            'too.</p>'
            '<p class="error link-message" role="alert" hidden></p>'
            '<ul class="link-list" data-scheme="{s}">{listed}</ul>',
            s=self.name, sp=self.span_schema, v=json.dumps(current or [], ensure_ascii=False),
            buttons=join(buttons), listed=join(listed))


def _end_key(end: Dict[str, Any]) -> Tuple[int, int, str]:
    return end["start"], end["end"], end["label"]


def _key(link: Dict[str, Any]) -> Tuple:
    return _end_key(link["source"]), _end_key(link["target"]), link["type"]


def _span(end: Any) -> str:
    if not isinstance(end, dict):
        return "?"
    return f"{end.get('start')}..{end.get('end')} ({end.get('label')})"


def _show(link: Dict[str, Any]) -> str:
    return f"{link['type']} {_span(link['source'])} -> {_span(link['target'])}"
