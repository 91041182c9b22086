"""``image_annotation``: regions drawn on the item's image, each with one of the scheme's
labels — boxes (``bbox``), polygons (``polygon``) and points (``landmark``), the tools the
scheme's ``tools`` lists (default bbox). Upstream Potato's keys and value shape:

    [{"type": "bbox", "label": "person",
      "coordinates": {"x": 0.125, "y": 0.1, "width": 0.31, "height": 0.62}},
     {"type": "polygon", "label": "car", "coordinates": [{"x": 0.02, "y": 0.04}, ...]},
     {"type": "landmark", "label": "eye", "coordinates": {"x": 0.5, "y": 0.4}}]

Coordinates are fractions of the image's width and height (0 to 1), so a region stays right
whatever size the image is shown at; checked here (inside the image, at most
``max_annotations`` regions, ``MAX_POINTS`` points a polygon) before anything is stored. An
empty list is an answer: the annotator saw nothing to mark. The image is the item's
``item_properties.image_key`` field (or the scheme's ``source_field``, upstream's key);
``static/regions.js`` draws on it. Annotators' regions are aggregated by matching the same
object (IoU, potato/labels/geometry.py). No trainer learns them (a detector is not trained
here). Upstream's other tools (masks, freeform, ellipses, skeletons, SAM) are refused with
what to use instead.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Optional

from potato.config.reader import dotted
from potato.markup import Safe, join, render
from potato.schemes.base import Kind, short

TOOLS = ("bbox", "polygon", "landmark")
TOOL_KEYS = {"bbox": "r", "polygon": "p", "landmark": "k"}  # upstream's default (v7) keys
MAX_REGIONS = 500      # per item and scheme
MAX_POINTS = 200       # per polygon
EDGE = 1e-6            # a coordinate this far outside 0..1 is rounding, and is clamped
SHAPE_KEYS = ("type", "label", "coordinates", "color")  # color: upstream's, dropped


def _area(points: List[Dict[str, float]]) -> float:
    """A polygon's area by the shoelace formula (self-crossing parts may cancel: such a
    polygon's area is still more than 0 unless it is flat)."""
    return abs(sum(a["x"] * b["y"] - b["x"] * a["y"]
                   for a, b in zip(points, points[1:] + points[:1]))) / 2


class Regions(Kind):
    type_name = "image_annotation"
    keys = ("tools", "zoom_enabled", "pan_enabled", "min_annotations", "max_annotations",
            "source_field")
    label_values = True
    aggregate_as = "regions"
    script = "regions.js"

    def __init__(self, scheme):
        super().__init__(scheme)
        self.tools: List[str] = ["bbox"]
        self.zoom = True
        self.min_regions, self.max_regions = 0, MAX_REGIONS
        self.source_field: Optional[str] = None

    # -- config --------------------------------------------------------------------------------
    def parse(self, r, m, p) -> None:
        raw = m.get("tools")
        if raw is not None:
            tools = r.text_list(m, "tools", p)
            if not tools:
                r.error(p + ("tools",), f"{dotted(p + ('tools',))} is empty: list at least "
                                        f"one of {', '.join(TOOLS)}.")
            other = [t for t in tools if t not in TOOLS]
            if other:
                r.error(p + ("tools",), f"{dotted(p + ('tools',))} lists {short(other[0])}: "
                                        f"regions are drawn here with {', '.join(TOOLS)} only "
                                        f"(masks, freeform, ellipses, skeletons and model-"
                                        f"assisted tools are not); list those.")
            self.tools = [t for t in dict.fromkeys(tools) if t in TOOLS] or ["bbox"]
        self.zoom = r.boolean(m, "zoom_enabled", p, True)
        r.boolean(m, "pan_enabled", p, True)  # panning comes with zoom (scrolling the image)
        self.min_regions = r.number(m, "min_annotations", p, 0, 0, MAX_REGIONS) or 0
        most = r.number(m, "max_annotations", p, None, 1, MAX_REGIONS)
        self.max_regions = MAX_REGIONS if most is None else most
        for key, value in (("min_annotations", self.min_regions),
                           ("max_annotations", most)):
            if value is not None and value != int(value):
                r.error(p + (key,), f"{dotted(p + (key,))} must be a whole number.")
        self.min_regions, self.max_regions = int(self.min_regions), int(self.max_regions)
        if self.min_regions > self.max_regions:
            r.error(p + ("min_annotations",), f"{dotted(p)} ({self.name}): min_annotations "
                                              f"({self.min_regions}) is more than "
                                              f"max_annotations ({self.max_regions}).")
        self.source_field = r.text(m, "source_field", p, None, numbers_ok=False)
        taken = set(TOOL_KEYS.values()) | set("vn+=-0")  # the image's own keys (regions.js)
        for j, key in enumerate(self.scheme.label_keys):
            if key in taken:  # (upstream's own examples do it: a warning, the label wins)
                r.warn(p + ("labels", j), f"{dotted(p)} ({self.name}): the key {key!r} of "
                                          f"{self.scheme.labels[j]!r} is also one of the "
                                          f"image's (tools r p k, v, n, zoom + - 0): here it "
                                          f"chooses the label, and that tool or action is on "
                                          f"its button only. Give the label another key_value "
                                          f"to keep both.")

    def image_field(self) -> Optional[str]:
        return self.source_field or ""

    # -- values --------------------------------------------------------------------------------
    def answer_bytes(self, longest_text: int = 0) -> int:
        longest_label = max((len(label) for label in self.scheme.labels), default=0)
        # a point as a form sends it (percent-encoded JSON): about 50 bytes
        return self.max_regions * (MAX_POINTS * 56 + 120 + 12 * longest_label)

    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None or value == "":
            return None
        if not isinstance(value, list):
            raise self.fail(f'takes a list of regions like [{{"type": "bbox", "label": '
                            f'"{self.scheme.labels[0]}", "coordinates": {{"x": 0.1, "y": 0.1, '
                            f'"width": 0.5, "height": 0.5}}}}], not {short(value)}.')
        if len(value) > self.max_regions:
            raise self.fail(f"{len(value)} regions is more than the {self.max_regions} one "
                            f"image may hold here (max_annotations).")
        if len(value) < self.min_regions:
            raise self.fail(f"draw at least {self.min_regions} region(s) on the image "
                            f"(min_annotations); {len(value)} drawn.")
        return [self._one(i, s) for i, s in enumerate(value)]

    def _one(self, i: int, shape: Any) -> Dict[str, Any]:
        where = f"region {i + 1}"
        self.only_keys(where, shape, SHAPE_KEYS, "type, label and coordinates", "region")
        tool = shape.get("type")
        if tool not in self.tools:
            raise self.fail(f"{where}: its type {short(tool)} is not a tool of this scheme "
                            f"(tools: {', '.join(self.tools)}).")
        label = shape.get("label")
        if not isinstance(label, str) or label not in self.scheme.labels:
            raise self.fail(f"{where}: {short(label)} is not a label of this scheme (labels: "
                            f"{', '.join(self.scheme.labels)}).")
        c = shape.get("coordinates")
        if tool == "polygon":
            if not isinstance(c, list) or not 3 <= len(c) <= MAX_POINTS:
                raise self.fail(f"{where}: a polygon's coordinates are a list of 3 to "
                                f"{MAX_POINTS} points like {{\"x\": 0.1, \"y\": 0.2}}, not "
                                f"{short(c)}.")
            coords: Any = [self._point(f"{where}, point {k + 1}", q) for k, q in enumerate(c)]
            if _area(coords) <= 0:
                raise self.fail(f"{where}: a polygon needs an area (its corners lie on one "
                                f"line, or its crossing halves cancel out).")
        elif tool == "landmark":
            coords = self._point(where, c)
        else:
            coords = self._box(where, c)
        return {"type": tool, "label": label, "coordinates": coords}

    def _fraction(self, where: str, m: Dict[str, Any], key: str) -> float:
        v = m.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self.fail(f"{where}: {key} must be a number from 0 to 1 (a fraction of the "
                            f"image), not {short(v)}.")
        if not -EDGE <= v <= 1 + EDGE:
            raise self.fail(f"{where}: {key} is {v}, outside the image (coordinates are "
                            f"fractions of its size, 0 to 1).")
        return round(min(1.0, max(0.0, float(v))), 6)

    def _point(self, where: str, c: Any) -> Dict[str, float]:
        if not isinstance(c, dict) or set(c) != {"x", "y"}:
            raise self.fail(f"{where}: a point is {{\"x\": ..., \"y\": ...}}, not {short(c)}.")
        return {"x": self._fraction(where, c, "x"), "y": self._fraction(where, c, "y")}

    def _box(self, where: str, c: Any) -> Dict[str, float]:
        if not isinstance(c, dict) or set(c) != {"x", "y", "width", "height"}:
            raise self.fail(f"{where}: a box is {{\"x\", \"y\", \"width\", \"height\"}}, not "
                            f"{short(c)}.")
        box = {k: self._fraction(where, c, k) for k in ("x", "y", "width", "height")}
        if box["width"] <= 0 or box["height"] <= 0:
            raise self.fail(f"{where}: a box needs a width and a height more than 0.")
        for start, size in (("x", "width"), ("y", "height")):
            if box[start] + box[size] > 1 + EDGE:
                raise self.fail(f"{where}: {start} + {size} is {box[start] + box[size]:.6g}, "
                                f"past the image's edge (1).")
            box[size] = round(min(box[size], 1.0 - box[start]), 6)
        return box

    def from_form(self, values: List[str]) -> Any:
        if not values or not values[-1].strip():
            return []  # the scheme was on the form and nothing was drawn
        raw = values[-1]
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return raw[:80]  # the check names it as "not a list of regions"

    def cell(self, value: Any) -> str:
        return "" if value is None else json.dumps(value, ensure_ascii=False)

    def upstream_cell(self, value: Any) -> Dict[str, str]:
        return {self.name: json.dumps(value, ensure_ascii=False)}

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        value = next(iter(cell.values()), None) if cell else None
        if isinstance(value, str):
            try:
                return json.loads(value)
            except (ValueError, RecursionError):
                return value[:80]
        return value

    def summary(self) -> str:
        return "regions on the image (%s): %s" % (", ".join(self.tools),
                                                   ", ".join(self.scheme.labels))

    # -- the annotate page ---------------------------------------------------------------------
    def inputs(self, current: Any, first_key: int) -> Safe:
        tools = [render('<button type="button" class="region-tool" data-tool="{t}" '
                        'aria-pressed="false"><kbd>{k}</kbd> {t}</button>', t=t,
                        k=TOOL_KEYS[t]) for t in self.tools]
        labels = [render('<button type="button" class="region-label" data-label="{l}" '
                         'data-key="{k}" aria-pressed="false">{kbd} {l}</button>', l=label,
                         k=key, kbd=render("<kbd>{k}</kbd>", k=key) if key else "")
                  for label, key in zip(self.scheme.labels, self.scheme.label_keys)]
        listed = [render("<li>{l} ({t})</li>", l=s.get("label"), t=s.get("type"))
                  for s in current or [] if isinstance(s, dict)]
        zoom = render('<span class="region-zoom"><button type="button" data-zoom="out" '
                      'title="Zoom out (-)">−</button> <button type="button" data-zoom="in" '
                      'title="Zoom in (+)">+</button> <button type="button" data-zoom="fit" '
                      'title="Fit (0)">fit</button></span>') if self.zoom else Safe("")
        return render(
            '<div class="regions" data-scheme="{s}" data-max="{mx}" data-min="{mn}">'
            '<input type="hidden" name="label:{s}" value="{v}" data-regions="{s}">'
            '<p class="region-tools">Tool: {tools} {zoom}</p>'
            '<p class="region-labels">Label: {labels}</p>'
            '<div class="region-stage" tabindex="0" role="application" aria-label="The image: '
            'draw regions on it"><p class="hint region-noimage" hidden>This item has no image '
            'to draw on.</p></div>'
            '<p class="hint">Choose a tool and a label, then draw: a box by dragging, a polygon '
            'by clicking its corners (<kbd>Enter</kbd> or a double click closes it, '
            '<kbd>Esc</kbd> drops it), a point by clicking. Click a region to select it: drag '
            'it or its handles to move or resize, a label key relabels it, <kbd>Delete</kbd> '
            'removes it, arrow keys move it, <kbd>Shift</kbd>+arrows resize it. <kbd>v</kbd> '
            'selects without drawing; <kbd>n</kbd> puts a new box in the middle, to move and '
            'resize with the keys.</p>'
            '<p class="error region-message" role="alert" hidden></p>'
            '<ul class="region-list">{listed}</ul></div>',
            s=self.name, v=json.dumps(current or [], ensure_ascii=False), tools=join(tools),
            labels=join(labels), zoom=zoom, listed=join(listed), mx=self.max_regions,
            mn=self.min_regions)

