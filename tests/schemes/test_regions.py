"""``image_annotation`` (potato/schemes/regions.py, potato/labels/geometry.py) as its callers
see it: an upstream scheme block loads, values are checked at the boundary (inside the image,
the scheme's tools and labels, bounded), the export cells round-trip, annotators' regions are
aggregated by matching the same object, and their agreement is a number the admin sees."""

import json
import math
import random

import pytest

from potato.config.settings import load
from potato.labels.aggregate import aggregate
from potato.labels.agreement import region_agreement
from potato.labels import geometry
from potato.labels.geometry import likeness
from potato.schemes import LabelError


def load_config_text(tmp_path, text):
    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "a", "image_url": "a.png"}) + "\n")
    (tmp_path / "c.yaml").write_text(text)
    return load(str(tmp_path / "c.yaml"))

BLOCK = """data_files: [items.jsonl]
item_properties: {id_key: id, text_key: image_url}
annotation_schemes:
  - annotation_type: image_annotation
    name: objects
    description: Draw boxes around objects
    tools: [bbox, polygon, landmark]
    zoom_enabled: true
    pan_enabled: true
    labels:
      - {name: person, color: "#FF6B6B", key_value: "1"}
      - {name: vehicle, color: "#4ECDC4", key_value: "2"}
%s"""


def scheme(tmp_path, extra=""):
    cfg, errors, _ = load_config_text(tmp_path, BLOCK % extra)
    assert errors == [], [e.message for e in errors]
    return cfg, cfg.schemes[0].kind


def box(x, y, w, h, label="person"):
    return {"type": "bbox", "label": label, "coordinates": {"x": x, "y": y, "width": w,
                                                            "height": h}}


def poly(points, label="vehicle"):
    return {"type": "polygon", "label": label,
            "coordinates": [{"x": x, "y": y} for x, y in points]}


def test_upstreams_block_loads_and_the_image_is_its_text_key(tmp_path):
    cfg, kind = scheme(tmp_path)
    assert cfg.item_properties.image_key == "image_url"  # where upstream keeps the image
    assert kind.tools == ["bbox", "polygon", "landmark"]
    assert "regions on the image" in kind.summary()


@pytest.mark.parametrize("extra, words", [
    ("    tools: [bbox, brush]\n", "brush"),
    ("    min_annotations: 5\n    max_annotations: 2\n", "more than max_annotations"),
    ("    max_annotations: 100000\n", "max_annotations"),
    ("    brush_size: 20\n", "brush_size"),
    ("    tools: []\n", "is empty"),
])
def test_what_cannot_apply_is_refused_with_what_to_do(tmp_path, extra, words):
    text = (BLOCK % "").replace("    tools: [bbox, polygon, landmark]\n", "") + extra
    cfg, errors, _ = load_config_text(tmp_path, text)
    assert any(words in e.message for e in errors), [e.message for e in errors]


def test_values_are_checked_and_kept_in_the_image(tmp_path):
    _, kind = scheme(tmp_path, "    min_annotations: 1\n    max_annotations: 3\n")
    ok = [box(0.1, 0.2, 0.3, 0.4), poly([(0, 0), (0.5, 0), (0.5, 0.5)]),
          {"type": "landmark", "label": "person", "coordinates": {"x": 1.0, "y": 0.0},
           "color": "#fff"}]
    stored = kind.check(ok)
    assert stored[2] == {"type": "landmark", "label": "person",
                         "coordinates": {"x": 1.0, "y": 0.0}}  # upstream's colour not kept
    assert kind.check([box(0.5, 0.5, 0.5 + 5e-7, 0.5)])[0]["coordinates"]["width"] == 0.5
    assert kind.check(None) is None
    bad = [
        ([], "at least 1"),
        (ok + [box(0, 0, 0.1, 0.1)], "more than the 3"),
        ([box(0.8, 0.1, 0.3, 0.1)], "past the image's edge"),
        ([box(0.1, 0.1, 0, 0.1)], "more than 0"),
        ([box(-0.1, 0.1, 0.2, 0.1)], "outside the image"),
        ([box(0.1, 0.1, 0.2, 0.1, label="dog")], "not a label"),
        ([{"type": "ellipse", "label": "person", "coordinates": {}}], "not a tool"),
        ([poly([(0, 0), (1, 1)])], "3 to 200 points"),
        ([poly([(0, 0), (1, 1), (0.5, float("nan"))])], "not nan"),
        ([poly([(0, 0), (1, 1), (0.5, True)])], "not True"),
        ([dict(box(0, 0, 0.1, 0.1), onclick="x")], "has the key"),
        ([{"type": "bbox", "label": "person", "coordinates": {"x": 0, "y": 0}}], "a box is"),
        ("[{]", "takes a list of regions"),
        ([["bbox"]], "must be an object"),
        ([poly([(0.1, 0.1), (0.2, 0.2), (0.3, 0.3)])], "needs an area"),
    ]
    for value, words in bad:
        with pytest.raises(LabelError) as e:
            kind.check(value)
        assert words in str(e.value) and "objects" in str(e.value), (value, e.value)


def test_a_label_key_the_image_also_takes_is_a_warning_and_the_label_wins(tmp_path):
    text = (BLOCK % "").replace('key_value: "2"', 'key_value: "r"')
    _, errors, warnings = load_config_text(tmp_path, text)
    assert errors == []
    assert any("the key 'r' of 'vehicle' is also one of the image's" in w.message and
               "here it chooses the label" in w.message for w in warnings)


def test_the_form_and_the_export_cells_round_trip(tmp_path):
    _, kind = scheme(tmp_path)
    value = kind.check([box(0.1, 0.2, 0.3, 0.4), poly([(0, 0), (0.5, 0), (0.5, 0.5)])])
    assert kind.check(kind.from_form([json.dumps(value)])) == value
    assert kind.from_form([""]) == []  # on the form, nothing drawn: an answer
    assert json.loads(kind.cell(value)) == value
    cell = kind.upstream_cell(value)
    assert kind.check(kind.from_upstream_cell(cell)) == value
    assert kind.check(kind.from_upstream_cell({"objects": value})) == value
    with pytest.raises(LabelError):
        kind.check(kind.from_upstream_cell({"objects": "not json"}))


def test_likeness_is_iou_for_boxes_and_close_for_polygons():
    a, b = box(0, 0, 0.5, 0.5), box(0.25, 0, 0.5, 0.5)
    assert likeness(a, b) == pytest.approx(1 / 3)
    square = poly([(0, 0), (0.5, 0), (0.5, 0.5), (0, 0.5)], label="person")
    assert likeness(a, square) == pytest.approx(1.0, abs=0.02)
    triangle = poly([(0, 0), (0.5, 0), (0, 0.5)], label="person")
    assert likeness(a, triangle) == pytest.approx(0.5, abs=0.02)
    far = box(0.6, 0.6, 0.1, 0.1)
    assert likeness(a, far) == 0.0


def test_regions_are_aggregated_by_matching_the_same_object():
    rng = random.Random(1)

    def jitter(b):
        c = b["coordinates"]
        return box(c["x"] + rng.uniform(-0.01, 0.01), c["y"] + rng.uniform(-0.01, 0.01),
                   c["width"], c["height"], b["label"])

    person, car = box(0.1, 0.1, 0.3, 0.5), box(0.5, 0.5, 0.4, 0.3, label="vehicle")
    votes = {"img": {"ann1": [jitter(person), jitter(car)],
                     "ann2": [jitter(person)],
                     "ann3": [jitter(person), box(0.0, 0.7, 0.1, 0.1)]}}
    out = aggregate("image_annotation", votes).labels["img"]
    assert [r["label"] for r in out] == ["person"]  # the car: one of three; the stray: one
    got = out[0]["coordinates"]
    for k in ("x", "y", "width", "height"):
        assert got[k] == pytest.approx(person["coordinates"][k], abs=0.011)
    two = {"img": {"a": [person, car], "b": [car]}}  # two annotators: half is enough
    assert sorted(r["label"] for r in aggregate("image_annotation", two).labels["img"]) == \
        ["person", "vehicle"]
    relabelled = {"img": {"a": [person], "b": [dict(person, label="vehicle")], "c": []}}
    assert aggregate("image_annotation", relabelled).labels["img"] == []
    # a value stored before the scheme drew regions (a radio of the same name) is left out
    old = {"img": {"a": "person", "b": [person], "c": [person, {"type": "bbox"}]}}
    assert [r["label"] for r in aggregate("image_annotation", old).labels["img"]] == ["person"]


def test_aggregation_pairs_the_most_alike_whatever_the_order_of_the_annotators():
    """Review 28: the same votes in another order give the same regions, and an annotator's
    better match of an object joins it (not the first one over the threshold, which left the
    object twice)."""
    a, b, c = box(0.0, 0.0, 0.2, 0.2), box(0.1, 0.0, 0.2, 0.2), box(0.05, 0.0, 0.2, 0.2)
    one = aggregate("image_annotation", {"i": {"x": [a], "y": [b], "z": [c]}}).labels["i"]
    two = aggregate("image_annotation", {"i": {"z": [c], "x": [a], "y": [b]}}).labels["i"]
    assert one == two
    target = box(0.1, 0.1, 0.4, 0.4)
    near, nearer = box(0.1, 0.1, 0.4, 0.25), box(0.1, 0.1, 0.4, 0.38)
    assert likeness(target, near) >= 0.5 and likeness(target, nearer) > likeness(target, near)
    out = aggregate("image_annotation", {"i": {"p": [target], "q": [near, nearer]}}
                    ).labels["i"]
    assert len(out) == 2  # the object (target with nearer) and near, one of two: kept
    merged = [r for r in out if r["coordinates"]["height"] != 0.25]
    assert merged[0]["coordinates"]["height"] == pytest.approx(0.39)


def test_points_are_one_object_within_a_twentieth_of_the_image():
    p = {"type": "landmark", "label": "person", "coordinates": {"x": 0.5, "y": 0.5}}
    q = {"type": "landmark", "label": "person", "coordinates": {"x": 0.53, "y": 0.5}}
    far = {"type": "landmark", "label": "person", "coordinates": {"x": 0.56, "y": 0.5}}
    assert likeness(p, q) >= 0.5 > likeness(p, far)
    assert len(aggregate("image_annotation", {"i": {"a": [p], "b": [q]}}).labels["i"]) == 1


def test_what_annotators_send_cannot_make_the_comparison_unbounded(monkeypatch):
    """Five annotators, 500 large polygons each, all over one another: each annotator's
    first COMPARED regions are compared, and the polygons' line-by-line measure stops at the
    image's budget (then their bounding boxes): the measurements counted, not timed."""
    calls = []
    real = geometry.Measure.likeness
    monkeypatch.setattr(geometry.Measure, "likeness",
                        lambda self, a, b: calls.append(self.left) or real(self, a, b))
    ring = poly([(0.5 + 0.4 * math.cos(k / 100 * math.pi), 0.5 + 0.4 * math.sin(k / 100 *
                  math.pi)) for k in range(200)], label="person")
    votes = {"i": {"a%d" % k: [ring] * 500 for k in range(5)}}
    out = aggregate("image_annotation", votes).labels["i"]
    assert len(out) == geometry.COMPARED  # each of the compared rings, agreed by all five
    assert len(calls) <= 4 * geometry.COMPARED ** 2 + 5 * geometry.COMPARED ** 2
    assert min(calls) >= 0
    calls.clear()
    found = region_agreement(votes)
    assert found["pairs"] == 10 and len(calls) <= 10 * geometry.COMPARED ** 2


def test_agreement_is_the_f1_of_matched_regions():
    person, car = box(0.1, 0.1, 0.3, 0.5), box(0.5, 0.5, 0.4, 0.3, label="vehicle")
    votes = {"i1": {"a": [person, car], "b": [person]},    # F1 2*1/3
             "i2": {"a": [], "b": []},                       # both saw nothing: 1
             "i3": {"a": [car]}}                             # one annotator: no pair
    found = region_agreement(votes)
    assert found["pairs"] == 2
    assert found["f1"] == pytest.approx((2 / 3 + 1) / 2)
    assert region_agreement({"i3": {"a": [car]}}) is None
