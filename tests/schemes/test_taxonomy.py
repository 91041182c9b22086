"""Hierarchical multiselect (potato/schemes/taxonomy.py): upstream's keys and their decided
answers, bad taxonomies named, the posted value checked with hostile input, the page's nested
checkboxes (escaped), form reading, export cells in our format and upstream's, aggregation,
and training's refusal."""

import json

import pytest

from potato.config.settings import load
from potato.labels import aggregate
from potato.labels.annotations import LabelError
from potato.schemes import kind_class
from potato.training.remote import trainers

CONFIG = """\
data_files: [items.jsonl]
annotation_schemes:
  - annotation_type: hierarchical_multiselect
    name: topic
    description: Pick the topics.
    taxonomy:
      Science:
        Physics:
          - Quantum Mechanics
          - Thermodynamics
        Biology:
          - Genetics
          - Ecology
      Medicine:
        - Genetics
      Arts: [Music, "<img src=x onerror=alert(1)>Painting"]
    auto_select_children: false
    auto_select_parent: true
    show_search: true
    max_selections: 4
    expand_depth: 1
    tooltips: {Physics: Matter and energy}
    label_requirement: {required: true}
"""


def scheme_of(tmp_path, config=CONFIG):
    (tmp_path / "items.jsonl").write_text('{"id": "1", "text": "t"}\n')
    (tmp_path / "c.yaml").write_text(config)
    cfg, errors, warnings = load(str(tmp_path / "c.yaml"))
    return cfg, errors, warnings


def topic(tmp_path, config=CONFIG):
    cfg, errors, _ = scheme_of(tmp_path, config)
    assert errors == [], [e.message for e in errors]
    return cfg.schemes[0]


def errors_of(tmp_path, config):
    _, errors, _ = scheme_of(tmp_path, config)
    return " | ".join(e.message for e in errors)


def test_every_node_is_a_path_from_the_top_in_the_taxonomys_order(tmp_path):
    s = topic(tmp_path)
    assert s.labels == [
        "Science", "Science/Physics", "Science/Physics/Quantum Mechanics",
        "Science/Physics/Thermodynamics", "Science/Biology", "Science/Biology/Genetics",
        "Science/Biology/Ecology", "Medicine", "Medicine/Genetics", "Arts", "Arts/Music",
        "Arts/<img src=x onerror=alert(1)>Painting"]
    assert s.required and s.kind.summary() == \
        "any nodes of a taxonomy of 12 (top: Science, Medicine, Arts)"


@pytest.mark.parametrize("change,message", [
    ("taxonomy: []", "needs taxonomy: a mapping of top-level names"),
    ("taxonomy: {A: [x, {B: [y]}]}", "a list holds leaf names only"),
    ("taxonomy: {A: [x, x]}", "'x' is listed twice under the same parent"),
    ("taxonomy: {A/B: [x]}", "without '/'"),
    ("taxonomy: {A: [\"\"]}", "must be 1 to 200 printable characters"),
    ("taxonomy: {A: 7}", "must be a mapping of names to their children or a list"),
    ("taxonomy: {A: {B: {C: {D: {E: {F: {G: {H: [I]}}}}}}}}", "deeper than 8 levels"),
    ("taxonomy: {A: [x]}\n    taxonomy_preset: mast", "write the tree out under taxonomy"),
    ("taxonomy: {A: [x]}\n    tooltips: {Nope: hi}", "'Nope' is not a node name"),
    ("taxonomy: {A: [x]}\n    max_selections: 0", "max_selections"),
    ("taxonomy: {A: [x]}\n    auto_select_children: maybe", "must be true or false"),
    ("taxonomy: {A: [x]}\n    labels: [a, b]", "takes no labels; remove labels"),
    ("taxonomy: {A: [x]}\n    show_serch: true", "Did you mean show_search?"),
])
def test_a_bad_scheme_is_an_error_that_says_what_to_do(tmp_path, change, message):
    config = ("data_files: [items.jsonl]\nannotation_schemes:\n"
              "  - annotation_type: hierarchical_multiselect\n    name: t\n    " + change + "\n")
    assert message in errors_of(tmp_path, config)


def test_a_taxonomy_too_large_for_a_person_is_refused(tmp_path):
    leaves = json.dumps(["leaf %d" % i for i in range(2100)])
    config = ("data_files: [items.jsonl]\nannotation_schemes:\n"
              "  - annotation_type: hierarchical_multiselect\n    name: t\n"
              "    taxonomy: {A: %s}\n" % leaves)
    assert "more than 2000 nodes" in errors_of(tmp_path, config)


def test_check_keeps_taxonomy_order_and_an_empty_answer_is_none(tmp_path):
    k = topic(tmp_path).kind
    assert k.check(["Arts/Music", "Science"]) == ["Science", "Arts/Music"]
    assert k.check("Medicine") == ["Medicine"]
    assert k.check([]) is None and k.check(None) is None and k.check("") is None


@pytest.mark.parametrize("value,message", [
    (["Genetics"], "'Genetics' is not a node of the taxonomy"),
    (["Science/Genetics"], "is not a node"),
    (["science"], "is not a node"),
    (["Science", "Science"], "'Science' is given twice"),
    ([1], "1 is not a node"),
    ([None], "None is not a node"),
    ([["Science"]], "is not a node"),
    ([{"path": "Science"}], "is not a node"),
    (["Science\x00"], "is not a node"),
    (["Arts/<img src=x onerror=alert(1)>Painting", "<script>"], "'<script>' is not a node"),
    (["Science"] * 10 ** 6, "1000000 nodes given; the taxonomy has 12"),
    (["Science", "Medicine", "Arts", "Arts/Music", "Medicine/Genetics"],
     "5 nodes are ticked; at most 4 may be (max_selections)"),
    ({"Science": True}, "is not a node"),
    (3.5, "is not a node"),
])
def test_check_refuses_hostile_values_naming_the_scheme(tmp_path, value, message):
    k = topic(tmp_path).kind
    with pytest.raises(LabelError) as e:
        k.check(value)
    assert "scheme 'topic' (hierarchical_multiselect)" in str(e.value)
    assert message in str(e.value)


def test_the_page_has_nested_checkboxes_escaped_with_the_search_box(tmp_path):
    k = topic(tmp_path).kind
    page = str(k.fieldset(["Science/Physics"], 1))
    assert page.count("<ul") == 6 and page.count('type="checkbox"') == 12
    assert ('<input type="checkbox" name="label:topic" value="Science/Physics" checked> '
            'Physics') in page
    assert 'title="Matter and energy"' in page
    assert "&lt;img src=x onerror=alert(1)&gt;Painting" in page and "<img" not in page
    assert 'type="search"' in page and 'data-auto-parent="1"' in page
    assert "data-auto-children" not in page
    assert "style=" not in page and "<script" not in page
    assert k.script == "taxonomy.js"


def test_the_form_posts_the_ticked_paths(tmp_path):
    k = topic(tmp_path).kind
    assert k.check(k.from_form(["Arts", "Science/Biology/Ecology"])) == \
        ["Science/Biology/Ecology", "Arts"]
    assert k.check(k.from_form([])) is None  # nothing ticked clears the answer


def test_export_cells_ours_and_upstreams(tmp_path):
    k = topic(tmp_path).kind
    value = ["Science/Physics", "Science/Biology/Genetics", "Arts/Music"]
    assert k.cell(value) == "Science/Physics;Science/Biology/Genetics;Arts/Music"
    # upstream writes bare names; a name two nodes share is written as its path
    cell = k.upstream_cell(value)
    assert cell == {"selected_labels": "Physics,Science/Biology/Genetics,Music"}
    assert k.check(k.from_upstream_cell(cell)) == value
    assert k.check(k.from_upstream_cell({"selected_labels": "Quantum Mechanics,Arts"})) == \
        ["Science/Physics/Quantum Mechanics", "Arts"]
    with pytest.raises(LabelError):  # upstream's bare shared name cannot say which node
        k.check(k.from_upstream_cell({"selected_labels": "Genetics"}))


def test_aggregated_as_lists_and_annotate_only(tmp_path):
    k = topic(tmp_path).kind
    assert k.one_label is False
    votes = {"1": {"a": ["Science"], "b": ["Science"], "c": ["Arts"]}}
    assert aggregate.aggregate("hierarchical_multiselect", votes).labels == {"1": ["Science"]}
    assert kind_class("hierarchical_multiselect") is type(k)
    assert "no trainer trains hierarchical_multiselect schemes" in \
        trainers.annotate_only("hierarchical_multiselect")


def test_a_big_taxonomy_raises_the_save_allowance(tmp_path):
    leaves = json.dumps(["a long leaf name number %d" % i for i in range(1500)])
    s = topic(tmp_path, "data_files: [items.jsonl]\nannotation_schemes:\n"
                        "  - annotation_type: hierarchical_multiselect\n    name: t\n"
                        "    taxonomy: {A: %s}\n" % leaves)
    posted = sum(len("label%3At=") + 3 * len(p) + 1 for p in s.labels)
    assert s.kind.answer_bytes() >= posted


def test_a_node_name_the_exports_cannot_hold_is_a_warning():
    # Review 36.8: "Sports, Games" came back from upstream's format as two nodes
    from potato.config.reader import Reader
    from potato.schemes import parse_schemes
    r = Reader("c.yaml", {}, {})
    parse_schemes(r, [{"annotation_type": "hierarchical_multiselect", "name": "t",
                       "taxonomy": {"Sports, Games": ["Chess"], "A;B": ["c"]}}], {})
    assert r.errors == []
    [w] = [w.message for w in r.warnings]
    assert w.startswith("annotation_schemes[0] (t): node 'Sports, Games' and 1 more holds")
