"""span_link (potato/schemes/link.py): upstream's block loads (span_schema resolved, link types
with their allowed labels), config errors are named, a posted value is checked with hostile
input (wrong types, offsets off the text, labels not the span scheme's or not the type's, a
self-link, a duplicate, too many), undirected links are normalised, the form's field is read,
export cells (ours and upstream's, read back), aggregation, and training's refusal."""

import json

import pytest

from potato.config.settings import load
from potato.labels.aggregate import agreed_entries, aggregate
from potato.labels.annotations import LabelError, check_label
from potato.schemes import KINDS
from potato.training.remote import trainers

CONFIG = """\
data_files: [items.jsonl]
item_properties: {id_key: id, text_key: text}
annotation_schemes:
  - annotation_type: span_link
    name: relations
    description: Relations
    span_schema: entities
    link_types:
      - name: WORKS_FOR
        directed: true
        allowed_source_labels: [PERSON]
        allowed_target_labels: [ORG]
        color: "#dc2626"
      - name: KNOWS
        directed: false
        allowed_source_labels: [PERSON]
        allowed_target_labels: [PERSON]
      - name: ANY
        directed: true
  - annotation_type: span
    name: entities
    labels: [{name: PERSON, color: "#3b82f6", tooltip: people}, ORG]
"""
TEXT = "Ana met Bo at Acme."
ANA = {"start": 0, "end": 3, "label": "PERSON"}
BO = {"start": 8, "end": 10, "label": "PERSON"}
ACME = {"start": 14, "end": 18, "label": "ORG"}


def load_of(tmp_path, config):
    (tmp_path / "items.jsonl").write_text('{"id": "1", "text": "%s"}\n' % TEXT)
    (tmp_path / "c.yaml").write_text(config)
    return load(str(tmp_path / "c.yaml"))


@pytest.fixture
def scheme(tmp_path):
    cfg, errors, warnings = load_of(tmp_path, CONFIG)
    assert errors == [] and warnings == [], [e.message for e in errors + warnings]
    return cfg.schemes[0]


def test_upstreams_block_loads(scheme):
    k = scheme.kind
    assert KINDS["span_link"] is type(k) and scheme.labels == ["WORKS_FOR", "KNOWS", "ANY"]
    assert k.span_schema == "entities" and k.span_labels == ["PERSON", "ORG"]
    assert [(t.name, t.directed, t.sources, t.targets) for t in k.types] == [
        ("WORKS_FOR", True, ["PERSON"], ["ORG"]), ("KNOWS", False, ["PERSON"], ["PERSON"]),
        ("ANY", True, [], [])]
    assert k.summary() == "links between entities spans: WORKS_FOR, KNOWS, ANY"
    assert "no trainer trains span_link schemes" in trainers.annotate_only("span_link")


@pytest.mark.parametrize("old,new,message", [
    ("span_schema: entities", "span_schema: nope",
     "'nope', which is not a span scheme of this config (span schemes: entities)"),
    ("    span_schema: entities\n", "", "give span_schema, the name of the span scheme"),
    ("allowed_target_labels: [ORG]", "allowed_target_labels: [ORGANIZATION]",
     "lists 'ORGANIZATION', which is not a label of span scheme 'entities'"),
    ("      - name: ANY\n", "      - name: KNOWS\n", "the link type 'KNOWS' is listed twice"),
    ("      - name: ANY\n        directed: true\n", "      - name: ANY\n        max_spans: 5\n",
     "links here join two spans"),
    ("        directed: false\n", "        directed: no way\n", "must be true or false"),
    ("        color: \"#dc2626\"\n", "        colour: red\n", "is not a key a link type accepts"),
])
def test_config_errors_are_named(tmp_path, old, new, message):
    assert old in CONFIG
    _, errors, _ = load_of(tmp_path, CONFIG.replace(old, new))
    assert any(message in e.message for e in errors), [e.message for e in errors]


def test_no_link_types_and_a_non_span_schema_are_errors(tmp_path):
    config = CONFIG.split("    link_types:")[0] + "  - {annotation_type: radio, name: r, " \
                                                    "labels: [a]}\n"
    _, errors, _ = load_of(tmp_path, config.replace("entities", "r"))
    messages = " ".join(e.message for e in errors)
    assert "needs link_types" in messages and "'r', which is not a span scheme" in messages


def test_visual_display_is_accepted_saying_no_arcs_are_drawn(tmp_path):
    config = CONFIG.replace("  - annotation_type: span\n", "    visual_display: {enabled: true, "
                            "arc_position: above, show_labels: true}\n"
                            "  - annotation_type: span\n")
    _, errors, warnings = load_of(tmp_path, config)
    assert errors == []
    assert any("no arcs are drawn here" in w.message for w in warnings)


def link(t, a, b):
    return {"type": t, "source": dict(a), "target": dict(b)}


def test_links_are_checked_normalised_and_sorted(scheme):
    value = [link("WORKS_FOR", BO, ACME), link("KNOWS", BO, dict(ANA, text="Ana")),
             link("ANY", ACME, ANA)]
    assert check_label(scheme, value, TEXT) == [  # undirected: the earlier span first
        link("KNOWS", ANA, BO), link("WORKS_FOR", BO, ACME), link("ANY", ACME, ANA)]
    assert check_label(scheme, [], TEXT) == [] and check_label(scheme, None, TEXT) is None


@pytest.mark.parametrize("value,message", [
    ("links", "takes a list of links"),
    ({"type": "KNOWS"}, "takes a list of links"),
    ([["KNOWS"]], "link 1 must be an object"),
    ([dict(link("KNOWS", ANA, BO), why=1)], "link 1 has the key 'why'"),
    ([link("LIKES", ANA, BO)], "'LIKES' is not a link type of this scheme"),
    ([link(None, ANA, BO)], "None is not a link type"),
    ([link("KNOWS", dict(ANA, end=99), BO)], "must satisfy 0 <= start < end <= 19"),
    ([link("KNOWS", dict(ANA, start=-1), BO)], "must satisfy"),
    ([link("KNOWS", dict(ANA, start=2.0), BO)], "start must be a whole number"),
    ([link("KNOWS", dict(ANA, start=True), BO)], "start must be a whole number"),
    ([link("KNOWS", dict(ANA, end=float("nan")), BO)], "end must be a whole number"),
    ([link("KNOWS", dict(ANA, label="<b>X</b>"), BO)],
     "'<b>X</b>' is not a label of span scheme 'entities'"),
    ([link("KNOWS", dict(ANA, text="Bob"), BO)], "its text 'Bob' is not the text at 0..3"),
    ([{"type": "KNOWS", "source": "Ana", "target": BO}], "source must be an object"),
    ([{"type": "KNOWS", "source": ANA}], "target must be an object"),
    ([link("KNOWS", ANA, ANA)], "links the span 0..3 (PERSON) to itself"),
    ([link("WORKS_FOR", ACME, BO)], "a WORKS_FOR link goes from PERSON to ORG, not from ORG"),
    ([link("KNOWS", ANA, ACME)], "not from PERSON to ORG"),
    ([link("KNOWS", ANA, BO), link("KNOWS", BO, ANA)], "link 2 (KNOWS 0..3 (PERSON) -> 8..10"),
    ([link("ANY", ANA, BO)] * 501, "501 links is more than the 500"),
])
def test_hostile_values_are_refused_naming_the_scheme(scheme, value, message):
    with pytest.raises(LabelError) as e:
        check_label(scheme, value, TEXT)
    assert str(e.value).startswith("scheme 'relations' (span_link): ")
    assert message in str(e.value), str(e.value)


def test_without_the_text_nothing_is_accepted(scheme):
    with pytest.raises(LabelError, match="checked against the item's text"):
        check_label(scheme, [link("KNOWS", ANA, BO)], None)


def test_the_form_field_is_json_and_garbage_is_named(scheme):
    k = scheme.kind
    assert k.from_form([]) == [] and k.from_form([" "]) == []
    assert k.from_form([json.dumps([link("KNOWS", ANA, BO)])]) == [link("KNOWS", ANA, BO)]
    for raw in ("[{", "x" * 3_000_000, "[" * 100_000):
        with pytest.raises(LabelError, match="takes a list of links"):
            check_label(scheme, k.from_form([raw]), TEXT)


def test_cells_ours_and_upstreams_read_back(scheme):
    k = scheme.kind
    value = check_label(scheme, [link("WORKS_FOR", BO, ACME), link("KNOWS", BO, ANA)], TEXT)
    assert json.loads(k.cell(value)) == value and k.cell(None) == ""
    cell = k.upstream_cell(value)
    records = json.loads(cell["relations"])
    assert [(r["link_type"], r["direction"], r["span_ids"], r["schema"]) for r in records] == [
        ("KNOWS", "undirected", ["entities:0-3", "entities:8-10"], "relations"),
        ("WORKS_FOR", "directed", ["entities:8-10", "entities:14-18"], "relations")]
    assert check_label(scheme, k.from_upstream_cell(cell), TEXT) == value
    assert k.from_upstream_cell({"relations": "[{"}) == "[{"
    with pytest.raises(LabelError):
        check_label(scheme, k.from_upstream_cell({"relations": '[{"link_type": "KNOWS"}]'}), TEXT)


def test_inputs_escape_and_carry_the_types(scheme):
    html = str(scheme.kind.inputs([link("KNOWS", ANA, BO)], 1))
    assert 'data-links="relations" data-span-scheme="entities"' in html
    assert 'data-type="WORKS_FOR" data-directed="1" data-sources="[&quot;PERSON&quot;]"' in html
    assert "<li>KNOWS: 0..3 (PERSON) \u2192 8..10 (PERSON)</li>" in html
    scheme.kind.types[0].name = "<script>"
    assert "<script>" not in str(scheme.kind.inputs([], 1))


def test_links_at_least_half_the_annotators_made_are_kept(scheme):
    a, b = link("KNOWS", ANA, BO), link("WORKS_FOR", BO, ACME)
    assert agreed_entries([[a, b], [a], [a, a], []]) == [a]
    assert agreed_entries([[a], [b]]) == [a, b] and agreed_entries([]) == []
    assert agreed_entries([None, "x", [a]]) == []
    result = aggregate("span_link", {"1": {"x": [a, b], "y": [b]}, "2": {"x": []}})
    assert result.labels == {"1": [a, b], "2": []}
