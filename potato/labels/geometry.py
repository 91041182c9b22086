"""Regions drawn on an image (the ``regions`` way of aggregating, potato/schemes/regions.py):
how alike two are, which of several annotators' regions are the same object, and the one
region a group of them agrees on. Coordinates are fractions of the image (0 to 1).

- Two boxes: their intersection over union (IoU). Two polygons, or a box and a polygon: the
  IoU of their areas, counted on a 200 x 200 grid over the union of their bounding boxes
  (exact enough to tell 0.5 from 0.6; polygons may be concave). Two points: 1 at the same
  place, 0 at ``POINT_REACH`` (a twentieth of the image) or farther, linear between.
- Two regions are the same object when they have the same label and tool and a likeness of
  at least ``MATCH`` (0.5, the usual IoU threshold of detection benchmarks).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

MATCH = 0.5
POINT_REACH = 0.05
GRID = 200


def _box(shape: Dict[str, Any]) -> Tuple[float, float, float, float]:
    """(x0, y0, x1, y1) of a region."""
    c = shape["coordinates"]
    if shape["type"] == "bbox":
        return c["x"], c["y"], c["x"] + c["width"], c["y"] + c["height"]
    if shape["type"] == "polygon":
        xs, ys = [p["x"] for p in c], [p["y"] for p in c]
        return min(xs), min(ys), max(xs), max(ys)
    return c["x"], c["y"], c["x"], c["y"]


def _points(shape: Dict[str, Any]) -> List[Tuple[float, float]]:
    c = shape["coordinates"]
    if shape["type"] == "polygon":
        return [(p["x"], p["y"]) for p in c]
    x0, y0, x1, y1 = _box(shape)
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]


def _inside(x: float, y: float, poly: Sequence[Tuple[float, float]]) -> bool:
    """Whether (x, y) is inside the polygon (even-odd rule)."""
    inside = False
    j = len(poly) - 1
    for i in range(len(poly)):
        xi, yi = poly[i]
        xj, yj = poly[j]
        if (yi > y) != (yj > y) and x < (xj - xi) * (y - yi) / (yj - yi) + xi:
            inside = not inside
        j = i
    return inside


def likeness(a: Dict[str, Any], b: Dict[str, Any]) -> float:
    """How alike two regions are, 0 to 1 (see the module docstring)."""
    if a["type"] == "landmark" or b["type"] == "landmark":
        if a["type"] != b["type"]:
            return 0.0
        ca, cb = a["coordinates"], b["coordinates"]
        d = math.hypot(ca["x"] - cb["x"], ca["y"] - cb["y"])
        return max(0.0, 1.0 - d / POINT_REACH)
    ax0, ay0, ax1, ay1 = _box(a)
    bx0, by0, bx1, by1 = _box(b)
    if a["type"] == b["type"] == "bbox":
        iw = max(0.0, min(ax1, bx1) - max(ax0, bx0))
        ih = max(0.0, min(ay1, by1) - max(ay0, by0))
        inter = iw * ih
        union = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter
        return inter / union if union > 0 else 0.0
    if min(ax1, bx1) <= max(ax0, bx0) or min(ay1, by1) <= max(ay0, by0):
        return 0.0  # the bounding boxes do not meet
    x0, y0 = min(ax0, bx0), min(ay0, by0)
    w, h = max(ax1, bx1) - x0, max(ay1, by1) - y0
    pa, pb = _points(a), _points(b)
    both = either = 0
    for i in range(GRID):
        y = y0 + (i + 0.5) * h / GRID
        for j in range(GRID):
            x = x0 + (j + 0.5) * w / GRID
            ia, ib = _inside(x, y, pa), _inside(x, y, pb)
            both += ia and ib
            either += ia or ib
    return both / either if either else 0.0


def _same(a: Dict[str, Any], b: Dict[str, Any]) -> bool:
    return a["label"] == b["label"] and a["type"] == b["type"] and likeness(a, b) >= MATCH


def matched(a: List[Dict[str, Any]], b: List[Dict[str, Any]]) -> int:
    """How many of ``a``'s regions are paired one to one with the same object in ``b``
    (greedily, the most alike pairs first)."""
    pairs = sorted(((likeness(x, y), i, j) for i, x in enumerate(a) for j, y in enumerate(b)
                    if x["label"] == y["label"] and x["type"] == y["type"]), reverse=True)
    used_a, used_b, n = set(), set(), 0
    for score, i, j in pairs:
        if score < MATCH:
            break
        if i not in used_a and j not in used_b:
            used_a.add(i)
            used_b.add(j)
            n += 1
    return n


def pair_f1(a: List[Dict[str, Any]], b: List[Dict[str, Any]]) -> Optional[float]:
    """How far two annotators' regions of one image agree: the F1 of the matched regions
    (1 when both drew nothing; None when neither value is a list)."""
    if not a and not b:
        return 1.0
    return 2.0 * matched(a, b) / (len(a) + len(b))


def agreed(annotations: List[Any]) -> List[Dict[str, Any]]:
    """The regions at least half of the annotators drew (each annotator's region joins the
    group of the same object it is most like, one per annotator); each group becomes one
    region: boxes and points their mean, a polygon the group's member most like the others."""
    n = len(annotations)
    groups: List[List[Dict[str, Any]]] = []
    for shapes in annotations:
        taken = set()
        for s in shapes or []:
            best, best_score = None, MATCH
            for g, group in enumerate(groups):
                if g in taken or not _same(group[0], s):
                    continue
                score = likeness(group[0], s)
                if score >= best_score:
                    best, best_score = g, score
            if best is None:
                groups.append([s])
                taken.add(len(groups) - 1)
            else:
                groups[best].append(s)
                taken.add(best)
    return [_merge(g) for g in groups if 2 * len(g) >= n]


def _merge(group: List[Dict[str, Any]]) -> Dict[str, Any]:
    first = group[0]
    if first["type"] == "polygon":
        return max(group, key=lambda s: sum(likeness(s, o) for o in group))
    keys = ("x", "y", "width", "height") if first["type"] == "bbox" else ("x", "y")
    mean = {k: round(sum(s["coordinates"][k] for s in group) / len(group), 6) for k in keys}
    return {"type": first["type"], "label": first["label"], "coordinates": mean}
