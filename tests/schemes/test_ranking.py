"""Ranking (potato/schemes/ranking.py): upstream's keys and their decided answers, the posted
order checked with hostile input (every label exactly once; ties only with allow_ties), the
page's rank menus (escaped), form reading, export cells in our format and upstream's, the mean
rank aggregation, and training's refusal."""

import pytest

from potato.config.settings import load
from potato.labels import aggregate
from potato.labels.annotations import LabelError
from potato.training.remote import trainers

CONFIG = """\
data_files: [items.jsonl]
annotation_schemes:
  - annotation_type: ranking
    name: quality
    description: Best first.
    labels: [Response A, Response B, Response C, "<i>D</i>"]
    allow_ties: %s
    label_requirement: {required: true}
"""


def load_config(tmp_path, config):
    (tmp_path / "items.jsonl").write_text('{"id": "1", "text": "t"}\n')
    (tmp_path / "c.yaml").write_text(config)
    return load(str(tmp_path / "c.yaml"))


def kind(tmp_path, ties=False):
    cfg, errors, _ = load_config(tmp_path, CONFIG % ("true" if ties else "false"))
    assert errors == [], [e.message for e in errors]
    return cfg.schemes[0].kind


A, B, C, D = "Response A", "Response B", "Response C", "<i>D</i>"


def test_the_scheme_ranks_its_labels(tmp_path):
    k = kind(tmp_path)
    assert k.scheme.required and not k.allow_ties
    assert k.summary() == ("an order of Response A, Response B, Response C, <i>D</i>, best "
                           "first")
    assert kind(tmp_path, ties=True).summary().endswith("(ties allowed)")


@pytest.mark.parametrize("change,message", [
    ("labels: [only]", "has 1 label(s) to rank; a ranking takes 2 to 20. Add the others."),
    ("labels: [%s]" % ", ".join("l%d" % i for i in range(21)), "Split them into several"),
    ("labels: [a, a]", "lists the label 'a' twice"),
    ("labels: [a, b]\n    items_key: translations", "list what annotators rank under labels"),
    ("labels: [a, b]\n    allow_ties: sometimes", "must be true or false"),
    ("labels: [a, b]\n    allow_tie: true", "Did you mean allow_ties?"),
    ("allow_ties: true", "needs a non-empty list of labels"),
])
def test_a_bad_scheme_is_an_error_that_says_what_to_do(tmp_path, change, message):
    _, errors, _ = load_config(tmp_path, "data_files: [items.jsonl]\nannotation_schemes:\n"
                                         "  - annotation_type: ranking\n    name: r\n    "
                                         + change + "\n")
    assert message in " | ".join(e.message for e in errors)


def test_a_complete_order_is_kept_and_an_empty_one_is_none(tmp_path):
    k = kind(tmp_path)
    assert k.check([B, D, A, C]) == [B, D, A, C]
    assert k.check([]) is None and k.check(None) is None and k.check("") is None


def test_ties_are_a_list_inside_in_the_schemes_order(tmp_path):
    k = kind(tmp_path, ties=True)
    assert k.check([B, [D, A], C]) == [B, [A, D], C]
    assert k.check([[A, B, C, D]]) == [[A, B, C, D]]
    assert k.check([[B], A, C, D]) == [B, A, C, D]  # a place of one is that label


@pytest.mark.parametrize("value,message", [
    ([B, [D, A], C], "ties labels, and this ranking has no ties (allow_ties: false)"),
    ([A, B, C], "'<i>D</i>' has no place; a ranking places every label"),
    ([A, B], "'Response C', '<i>D</i>' have no place"),
    ([A, B, C, C], "'Response C' has two places"),
    ([A, B, C, D, A], "5 places given; there are 4 labels"),
    ([A, B, C, "E"], "'E' is not a label of the ranking"),
    ([A, B, C, "response d"], "is not a label"),
    ([A, B, C, 4], "4 is not a label"),
    ([A, B, C, None], "None is not a label"),
    ([A, B, C, {"label": D}], "is not a label"),
    (A, "takes the labels in order, best first"),
    ({"order": [A]}, "takes the labels in order"),
    (7, "takes the labels in order"),
    ([A] * 10 ** 6, "1000000 places given"),
])
def test_check_refuses_hostile_values_naming_the_scheme(tmp_path, value, message):
    with pytest.raises(LabelError) as e:
        kind(tmp_path).check(value)
    assert "scheme 'quality' (ranking)" in str(e.value) and message in str(e.value)


@pytest.mark.parametrize("value,message", [
    ([[A, [B]], C, D], "is not a label"),            # nested deeper than a tie
    ([[], A, B, C], "is no place in the ranking"),
    ([[A, A], B, C, D], "has two places"),
])
def test_check_refuses_bad_ties_when_ties_are_allowed(tmp_path, value, message):
    with pytest.raises(LabelError) as e:
        kind(tmp_path, ties=True).check(value)
    assert message in str(e.value)


def test_the_page_has_a_rank_menu_per_label_escaped(tmp_path):
    k = kind(tmp_path)
    page = str(k.fieldset([B, A, D, C], 1))
    assert page.count("<select") == 4 and page.count("<option") == 4 * 5
    assert '<option value="2:Response A" selected>2</option>' in page
    assert '<option value="4:Response C" selected>4</option>' in page
    assert "&lt;i&gt;D&lt;/i&gt;" in page and "<i>" not in page
    assert "style=" not in page and "<script" not in page
    assert "data-ties" not in page and 'data-ties="1"' in str(kind(tmp_path, True).inputs(None, 1))
    assert k.script == "ranking.js"


def test_the_form_turns_rank_menus_into_the_order(tmp_path):
    k = kind(tmp_path)
    assert k.check(k.from_form(["2:" + A, "1:" + B, "4:" + C, "3:" + D])) == [B, A, D, C]
    assert k.from_form(["", "", "", ""]) is None  # nothing ranked: no answer
    with pytest.raises(LabelError, match="has no place"):  # one left unranked
        k.check(k.from_form(["2:" + A, "1:" + B, "3:" + C, ""]))
    with pytest.raises(LabelError, match="has no ties"):  # two share a rank
        k.check(k.from_form(["1:" + A, "1:" + B, "3:" + C, "4:" + D]))
    with pytest.raises(LabelError, match="'Response E' is not a label"):
        k.check(k.from_form(["1:Response E", "2:" + B, "3:" + C, "4:" + D]))
    with pytest.raises(LabelError, match="a list; tied labels as a list inside it.*'garbage'"):
        k.check(k.from_form(["garbage", "2:" + B, "3:" + C, "4:" + D]))
    t = kind(tmp_path, ties=True)  # review 36.12: menu-less values were one all-way tie
    with pytest.raises(LabelError, match=r"not '%s'" % A):
        t.check(t.from_form([A, B, C, D]))
    t = kind(tmp_path, ties=True)
    assert t.check(t.from_form(["2:" + A, "1:" + B, "2:" + C, "4:" + D])) == [B, [A, C], D]


def test_export_cells_ours_and_upstreams(tmp_path):
    k = kind(tmp_path, ties=True)
    value = [B, [A, D], C]
    assert k.cell(value) == '["Response B", ["Response A", "<i>D</i>"], "Response C"]'
    cell = k.upstream_cell(value)
    assert cell == {"rank_order": "Response B,Response A=<i>D</i>,Response C"}
    assert k.check(k.from_upstream_cell(cell)) == value
    with pytest.raises(LabelError, match="has no ties"):
        kind(tmp_path).check(kind(tmp_path).from_upstream_cell(cell))


def test_annotators_orders_aggregate_by_mean_rank(tmp_path):
    votes = {"1": {"a": [A, B, C, D], "b": [B, A, C, D], "c": [A, C, B, D]},
             "2": {"a": [A, B, C, D], "b": [B, A, D, C]},
             "3": {"a": [[A, B], C, D], "b": [C, D, A, B]}}
    result = aggregate.aggregate("ranking", votes)
    assert result.method == "mean rank" and result.note == ""
    assert result.labels["1"] == [A, B, C, D]
    assert result.labels["2"] == [[A, B], [C, D]]  # equal means tie
    # a tie shares its places: A (1.5 + 3) / 2, B (1.5 + 4) / 2, C (3 + 1) / 2, D (4 + 2) / 2
    assert result.labels["3"] == [C, A, B, D]
    assert aggregate.aggregate("ranking", {"1": {"a": None}}).labels == {"1": None}
    assert "mean rank was used" in aggregate.aggregate("ranking", votes, "consensus").note


def test_a_ranking_is_annotate_only(tmp_path):
    assert kind(tmp_path).one_label is False
    assert "no trainer trains ranking schemes" in trainers.annotate_only("ranking")


def test_a_label_upstreams_format_cannot_hold_is_a_warning(tmp_path):
    # Review 36.8: "B,x" and "C=y" made the upstream export unreadable
    from potato.config.reader import Reader
    from potato.schemes import parse_schemes
    r = Reader("c.yaml", {}, {})
    parse_schemes(r, [{"annotation_type": "ranking", "name": "o",
                       "labels": ["A", "B,x", "C=y"]}], {})
    assert r.errors == []
    [w] = [w.message for w in r.warnings]
    assert w.startswith("annotation_schemes[0] (o): label 'B,x' holds ',' or '='")
