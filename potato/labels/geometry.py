"""Regions drawn on an image (the ``regions`` way of aggregating, potato/schemes/regions.py):
how alike two are, which of several annotators' regions are the same object, and the one
region a group of them agrees on. Coordinates are fractions of the image (0 to 1).

- Two boxes: their intersection over union (IoU). Two polygons, or a box and a polygon: the
  IoU of their areas, measured on ``ROWS`` horizontal lines across the two (where each line
  crosses a polygon, even-odd: concave and self-crossing polygons too); exact enough to tell
  0.5 from 0.6. Two points: 1 at the same place, 0.5 (the same object) at ``POINT_REACH`` (a
  twentieth of the image), 0 at twice that.
- Two regions are the same object when they have the same label and tool and a likeness of
  at least ``MATCH`` (0.5, the usual IoU threshold of detection benchmarks).
- Bounded: each annotator's first ``COMPARED`` regions of an image are compared (the rest
  count as matching nothing); regions whose bounding boxes do not meet are never measured;
  past ``POLYGON_BUDGET`` line crossings for one image (hundreds of large polygons) polygons
  are compared by their bounding boxes (``Measure``). So an admin page or an export spends
  at most about a second on one image's regions, whatever annotators sent.
- Stored values that are not regions (a scheme whose type changed under its name) are left out.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

MATCH = 0.5
POINT_REACH = 0.05
ROWS = 64
POLYGON_BUDGET = 400_000  # line-by-edge steps per image, then bounding boxes
COMPARED = 100            # regions per annotator and image that are compared

Box = Tuple[float, float, float, float]


def regions_of(value: Any) -> List[Dict[str, Any]]:
    """The well-formed regions of a stored value (anything else: none)."""
    if not isinstance(value, list):
        return []
    out = []
    for s in value:
        if not isinstance(s, dict) or not isinstance(s.get("label"), str):
            continue
        c = s.get("coordinates")
        try:
            if s.get("type") == "bbox":
                float(c["x"]) + float(c["y"]) + float(c["width"]) + float(c["height"])
            elif s.get("type") == "polygon":
                if not isinstance(c, list) or len(c) < 3:
                    continue
                [float(p["x"]) + float(p["y"]) for p in c]
            elif s.get("type") == "landmark":
                float(c["x"]) + float(c["y"])
            else:
                continue
        except (TypeError, KeyError, ValueError):
            continue
        out.append(s)
    return out


def _box(shape: Dict[str, Any]) -> Box:
    """(x0, y0, x1, y1) of a region."""
    c = shape["coordinates"]
    if shape["type"] == "bbox":
        return c["x"], c["y"], c["x"] + c["width"], c["y"] + c["height"]
    if shape["type"] == "polygon":
        xs, ys = [p["x"] for p in c], [p["y"] for p in c]
        return min(xs), min(ys), max(xs), max(ys)
    return c["x"], c["y"], c["x"], c["y"]


def _box_iou(a: Box, b: Box) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _edges(shape: Dict[str, Any]) -> List[Tuple[float, float, float, float]]:
    c = shape["coordinates"]
    if shape["type"] == "polygon":
        pts = [(p["x"], p["y"]) for p in c]
    else:
        x0, y0, x1, y1 = _box(shape)
        pts = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
    return [(pts[i - 1][0], pts[i - 1][1], pts[i][0], pts[i][1]) for i in range(len(pts))]


def _spans(edges, y: float) -> List[Tuple[float, float]]:
    """Where the line at height ``y`` is inside the polygon (even-odd), as x intervals."""
    xs = sorted(x0 + (y - y0) * (x1 - x0) / (y1 - y0) for x0, y0, x1, y1 in edges
                if (y0 > y) != (y1 > y))
    return list(zip(xs[::2], xs[1::2]))


def _overlap(a: List[Tuple[float, float]], b: List[Tuple[float, float]]) -> float:
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


class Measure:
    """Likeness with one image's budget of polygon work (see the module docstring)."""

    def __init__(self) -> None:
        self.left = POLYGON_BUDGET
        self._boxes: Dict[int, Box] = {}  # by id(): the regions live as long as the Measure
        self._keep: List[Dict[str, Any]] = []

    def box(self, shape: Dict[str, Any]) -> Box:
        found = self._boxes.get(id(shape))
        if found is None:
            found = self._boxes[id(shape)] = _box(shape)
            self._keep.append(shape)  # its id stays its own while it is cached
        return found

    def likeness(self, a: Dict[str, Any], b: Dict[str, Any]) -> float:
        """How alike two regions are, 0 to 1 (see the module docstring)."""
        if a["type"] == "landmark" or b["type"] == "landmark":
            if a["type"] != b["type"]:
                return 0.0
            ca, cb = a["coordinates"], b["coordinates"]
            d = math.hypot(ca["x"] - cb["x"], ca["y"] - cb["y"])
            return max(0.0, 1.0 - d / (2 * POINT_REACH))
        ba, bb = self.box(a), self.box(b)
        if min(ba[2], bb[2]) <= max(ba[0], bb[0]) or min(ba[3], bb[3]) <= max(ba[1], bb[1]):
            return 0.0  # the bounding boxes do not meet
        if a["type"] == b["type"] == "bbox":
            return _box_iou(ba, bb)
        cost = ROWS * sum(len(s["coordinates"]) if s["type"] == "polygon" else 4 for s in (a, b))
        if cost > self.left:
            return _box_iou(ba, bb)
        self.left -= cost
        ea, eb = _edges(a), _edges(b)
        y0, y1 = min(ba[1], bb[1]), max(ba[3], bb[3])
        inter = area_a = area_b = 0.0
        for k in range(ROWS):
            y = y0 + (k + 0.5) * (y1 - y0) / ROWS
            sa, sb = _spans(ea, y), _spans(eb, y)
            area_a += sum(hi - lo for lo, hi in sa)
            area_b += sum(hi - lo for lo, hi in sb)
            inter += _overlap(sa, sb)
        union = area_a + area_b - inter
        return inter / union if union > 0 else 0.0


def likeness(a: Dict[str, Any], b: Dict[str, Any]) -> float:
    return Measure().likeness(a, b)


def _pairs(m: Measure, a: List[Dict[str, Any]], b: List[Dict[str, Any]]
           ) -> List[Tuple[int, int]]:
    """One-to-one pairs of the same object (index in ``a``, index in ``b``): the most alike
    first, each region in at most one pair. Only the first COMPARED of each are compared."""
    kb: Dict[Tuple[str, str], List[Tuple[int, Box, Dict[str, Any]]]] = {}
    for j, y in enumerate(b[:COMPARED]):
        kb.setdefault((y["label"], y["type"]), []).append((j, m.box(y), y))
    scored = []
    for i, x in enumerate(a[:COMPARED]):
        bx = m.box(x)
        for j, by, y in kb.get((x["label"], x["type"]), ()):
            if x["type"] != "landmark" and (min(bx[2], by[2]) <= max(bx[0], by[0]) or
                                            min(bx[3], by[3]) <= max(bx[1], by[1])):
                continue  # the bounding boxes do not meet
            score = m.likeness(x, y)
            if score >= MATCH:
                scored.append((-score, i, j))
    scored.sort()
    used_a, used_b, out = set(), set(), []
    for _, i, j in scored:
        if i not in used_a and j not in used_b:
            used_a.add(i)
            used_b.add(j)
            out.append((i, j))
    return out


def pair_f1(a: Any, b: Any, m: Optional[Measure] = None) -> float:
    """How far two annotators' regions of one image agree: the F1 of the matched regions
    (1 when both drew nothing)."""
    a, b = regions_of(a), regions_of(b)
    if not a and not b:
        return 1.0
    return 2.0 * len(_pairs(m or Measure(), a, b)) / (len(a) + len(b))


def agreed(by_annotator: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The regions at least half of the annotators drew. Annotators in name order: each one's
    regions are paired one to one, most alike first, with the groups so far (a group is
    represented by its first region); the rest start groups. Each group drawn by at least
    half becomes one region: boxes and points their mean, a polygon the member most like the
    others."""
    n = len(by_annotator)
    m = Measure()
    groups: List[List[Dict[str, Any]]] = []
    for name in sorted(by_annotator):
        mine = regions_of(by_annotator[name])
        pairs = _pairs(m, mine, [g[0] for g in groups])
        for i, g in pairs:
            groups[g].append(mine[i])
        paired = {i for i, _ in pairs}
        groups += [[s] for i, s in enumerate(mine) if i not in paired]
    return [_merge(m, g) for g in groups if 2 * len(g) >= n]


def _merge(m: Measure, group: List[Dict[str, Any]]) -> Dict[str, Any]:
    first = group[0]
    if first["type"] == "polygon":
        best = max(group, key=lambda s: sum(m.likeness(s, o) for o in group))
        return {"type": "polygon", "label": best["label"], "coordinates": best["coordinates"]}
    keys = ("x", "y", "width", "height") if first["type"] == "bbox" else ("x", "y")
    mean = {k: round(sum(s["coordinates"][k] for s in group) / len(group), 6) for k in keys}
    return {"type": first["type"], "label": first["label"], "coordinates": mean}
