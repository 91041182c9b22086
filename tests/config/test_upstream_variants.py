"""Upstream annotation types that are forms of a kind this Potato has (issue 23's measure over
upstream's own configs): rubric_eval, semantic_differential, confidence and vas are rewritten
into likert or slider schemes; multirate options as {name, label}; codebook: true as the listed
labels with a warning; user_config.require_password / allow_new_users; server.debug; per-cohort
assignment keys refused. Each bad block is an error naming its key; the rewritten schemes are
shown escaped on the annotate page and their values checked by the server."""

import pytest

from potato.config.settings import load
from potato.project.store import Store
from potato.project.validation import check
from tests.helpers import Client

HEAD = "annotation_task_name: t\ndata_files: [items.jsonl]\n"


def _config(tmp_path, body, head=HEAD):
    (tmp_path / "items.jsonl").write_text(
        "".join('{"id": "i%d", "text": "item %d says hello"}\n' % (k, k) for k in range(3)))
    path = tmp_path / "config.yaml"
    path.write_text(head + body)
    return str(path)


VARIANTS = """annotation_schemes:
  - {annotation_type: radio, name: sentiment, labels: [pos, neg]}
  - annotation_type: rubric_eval
    name: quality
    description: Rate the answer
    scale_points: 3
    scale_labels: [Poor, Fair, Good]
    criteria: [{name: accuracy, description: "Facts right?"}, clarity]
    show_overall: true
    label_requirement: {required: true}
  - annotation_type: semantic_differential
    name: word
    description: Rate the word
    scale_points: 5
    pairs: [[Good, Bad], [Strong, Weak]]
  - annotation_type: confidence
    name: sure
    description: How sure are you?
    target_schema: sentiment
    scale_points: 3
    labels: [Guessing, Fairly sure, Certain]
  - {annotation_type: confidence, name: sure2, scale_type: slider, left_label: No, max_value: 10}
  - {annotation_type: vas, name: pain, description: Pain, left_label: No pain,
     right_label: Worst pain, show_value: true}
  - {annotation_type: vas, name: whole, precision: 0, min_value: -5, max_value: 5}
  - {annotation_type: triage, name: keep, description: "Keep it?", reject_label: Drop,
     skip_key: s, auto_advance: true}
"""


def test_variants_become_the_likert_and_slider_schemes_they_are(tmp_path):
    cfg, errors, warnings = load(_config(tmp_path, VARIANTS))
    assert errors == [] and warnings == []
    got = {s.name: s for s in cfg.schemes}
    assert list(got) == ["sentiment", "quality[accuracy]", "quality[clarity]",
                         "quality[overall]", "word[Good__Bad]", "word[Strong__Weak]", "sure",
                         "sure2", "pain", "whole", "keep"]
    acc = got["quality[accuracy]"]
    assert (acc.annotation_type, acc.kind.size, acc.kind.min_label, acc.kind.max_label,
            acc.required) == ("likert", 3, "Poor", "Good", True)
    assert acc.description == ("Rate the answer accuracy: Facts right? "
                               "(1 = Poor, 2 = Fair, 3 = Good)")
    assert got["quality[overall]"].required
    word = got["word[Strong__Weak]"]
    assert (word.kind.size, word.kind.min_label, word.kind.max_label) == (5, "Strong", "Weak")
    sure = got["sure"]
    assert (sure.annotation_type, sure.kind.size) == ("likert", 3)
    assert sure.description == "How sure are you? (1 = Guessing, 2 = Fairly sure, 3 = Certain)"
    sure2 = got["sure2"]
    assert (sure2.annotation_type, sure2.kind.min_value, sure2.kind.max_value,
            sure2.kind.step, sure2.kind.min_label, sure2.kind.max_label) == (
        "slider", 0, 10, 1, "No", "Very confident")
    pain = got["pain"].kind
    assert (pain.min_value, pain.max_value, pain.step, pain.starting_value) == (0, 100, 0.1, 50)
    assert (pain.min_label, pain.max_label) == ("No pain", "Worst pain")
    assert pain.check(37.3) == 37.3 and pain.check(100) == 100
    whole = got["whole"].kind
    assert (whole.step, whole.starting_value) == (1, 0)
    keep = got["keep"]  # upstream's stored values, with what each means in the question
    assert (keep.annotation_type, keep.labels, keep.label_keys) == (
        "radio", ["accept", "reject", "skip"], ["1", "2", "s"])
    assert keep.description == "Keep it? (accept = Keep, reject = Drop, skip = Unsure)"


@pytest.mark.parametrize("block,key,says", [
    # numbers read as finite and bounded before the slider's middle is computed (review 26 M1)
    ("{annotation_type: vas, name: v, max_value: .inf}", "annotation_schemes[0].max_value",
     "must be a finite number"),
    ("{annotation_type: vas, name: v, min_value: .nan}", "annotation_schemes[0].min_value",
     "must be a finite number"),
    ("{annotation_type: vas, name: v, min_value: -.inf}", "annotation_schemes[0].min_value",
     "must be a finite number"),
    ("{annotation_type: vas, name: v, max_value: 1000000000000000000000000000000}",
     "annotation_schemes[0].max_value", "must be a finite number"),
    ("{annotation_type: confidence, name: c, scale_type: slider, step: .nan}",
     "annotation_schemes[0].step", "must be a finite number"),
    ("{annotation_type: confidence, name: c, scale_type: slider, step: 1.0e-320}",
     "annotation_schemes[0].step", "too small for the range"),
    ("{annotation_type: confidence, name: c, scale_type: slider, step: -1}",
     "annotation_schemes[0].step", "must be more than 0"),
    ("{annotation_type: slider, name: s, min_value: 0, max_value: 100, step: 1.0e-320}",
     "annotation_schemes[0].step", "too small for the range"),
    ("{annotation_type: vas, name: v, precision: 6, max_value: 1000000000000}",
     "annotation_schemes[0].precision", "give a larger step (a lower precision)"),
    # a description is text in every variant (M1, LOW 1)
    ("{annotation_type: confidence, name: c, description: [x]}",
     "annotation_schemes[0].description", "must be a string, not a list"),
    ("{annotation_type: confidence, name: c, description: true}",
     "annotation_schemes[0].description", "must be a string, not true/false"),
    ("{annotation_type: rubric_eval, name: q, criteria: [a], description: [x]}",
     "annotation_schemes[0].description", "must be a string, not a list"),
    ("{annotation_type: semantic_differential, name: w, pairs: [[a, b]], description: {k: v}}",
     "annotation_schemes[0].description", "must be a string, not a mapping"),
    ("{annotation_type: triage, name: t, description: [x]}",
     "annotation_schemes[0].description", "must be a string, not a list"),
    ("{annotation_type: multirate, name: m, labels: [a], options: [o], description: [x]}",
     "annotation_schemes[0].description", "must be a string, not a list"),
])
def test_hostile_numbers_and_descriptions_are_errors_not_tracebacks(tmp_path, block, key, says):
    _, errors, _ = load(_config(tmp_path, "annotation_schemes:\n  - " + block + "\n"))
    assert any(p.key == key and says in p.message for p in errors), errors


@pytest.mark.parametrize("block,name", [
    ('{annotation_type: radio, name: "a\\nb", labels: [x]}', "'a\\nb'"),
    ('{annotation_type: rubric_eval, name: q, criteria: ["acc\\nuracy"]}', "'q[acc\\nuracy]'"),
    ('{annotation_type: semantic_differential, name: w, pairs: [["x\\r", y]]}', "'w[x\\r__y]'"),
    ('{annotation_type: multirate, name: m, labels: [a], options: ["o\\t"]}', "'m[o\\t]'"),
    ('{annotation_type: text, name: t, labels: [a, "b\\u2028"]}', "'t[b\\u2028]'"),
])
def test_a_scheme_name_with_a_control_character_is_an_error_naming_it(tmp_path, block, name):
    """Review 26 LOW 3: a line break in a (made) scheme name lost the form's answer."""
    _, errors, _ = load(_config(tmp_path, "annotation_schemes:\n  - " + block + "\n"))
    assert any(p.key == "annotation_schemes[0].name" and f"the scheme name {name} has a "
               f"control character" in p.message for p in errors), errors


TARGETS = """annotation_schemes:
  - {annotation_type: multirate, name: dims, labels: [x, y], options: [a, b]}
  - {annotation_type: rubric_eval, name: quality, criteria: [acc]}
  - {annotation_type: confidence, name: c, target_schema: %s}
"""


@pytest.mark.parametrize("target", ["'dims[a]'", "'quality[acc]'"])
def test_target_schema_may_name_a_made_scheme(tmp_path, target):
    """Review 26 LOW 4: target_schema is checked against the schemes as made."""
    cfg, errors, _ = load(_config(tmp_path, TARGETS % target))
    assert errors == [] and "c" in [s.name for s in cfg.schemes]


@pytest.mark.parametrize("target,parts", [("dims", "dims[a], dims[b]"),
                                          ("quality", "quality[acc]")])
def test_target_schema_naming_a_block_made_into_parts_is_an_error(tmp_path, target, parts):
    _, errors, _ = load(_config(tmp_path, TARGETS % target))
    assert [(p.key, p.message) for p in errors] == [(
        "annotation_schemes[2].target_schema",
        f"annotation_schemes[2].target_schema is {target!r}, which is not another scheme of "
        f"this config ({target} is made into {parts}: name one of them); name the scheme this "
        f"confidence is about, or remove it.")]


def test_rubric_scale_labels_more_than_points_is_an_error_fewer_a_warning(tmp_path):
    """Review 26 LOW 5: labels beyond scale_points were dropped, and fewer left the ends
    unnamed, both silently."""
    block = "annotation_schemes:\n  - {annotation_type: rubric_eval, name: q, criteria: [a], " \
            "scale_points: %d, scale_labels: [Bad, Fair, Good]}\n"
    _, errors, _ = load(_config(tmp_path, block % 2))
    assert [(p.key, p.message) for p in errors] == [(
        "annotation_schemes[0].scale_labels", "annotation_schemes[0] (q) names 3 points for a "
                                              "scale of 2 (scale_points); give at most 2, or "
                                              "raise scale_points.")]
    cfg, errors, warnings = load(_config(tmp_path, block % 5))
    assert errors == [] and [(p.key, p.message[:49]) for p in warnings] == [
        ("annotation_schemes[0].scale_labels", "annotation_schemes[0] (q) names 3 of its 5 points")]
    (s,) = cfg.schemes
    assert (s.kind.size, s.kind.min_label, s.kind.max_label) == (5, "Bad", "Good")
    assert s.description == "q a"
    cfg, errors, warnings = load(_config(tmp_path, block % 3))
    assert errors == [] == warnings and cfg.schemes[0].description == "q a (1 = Bad, 2 = Fair, " \
                                                                       "3 = Good)"


@pytest.mark.parametrize("block,names,description", [
    ("{annotation_type: triage, name: t, accept_label: Yes, reject_label: No, skip_label: Off}",
     ["t"], "t (accept = Yes, reject = No, skip = Off)"),
    ("{annotation_type: rubric_eval, name: q, scale_points: 2, scale_labels: [a, b], "
     "criteria: [{name: On, description: Yes}, Off]}", ["q[On]", "q[Off]"],
     "q On: Yes (1 = a, 2 = b)"),
    ("{annotation_type: multirate, name: m, labels: [a, b], options: [{name: On, label: Off}, "
     "Yes]}", ["m[On]", "m[Yes]"], "m Off"),
])
def test_bare_yaml_booleans_are_read_as_written(tmp_path, block, names, description):
    """Review 26 LOW 6: YAML 1.1 reads a bare Yes, No, On or Off as true or false; a label,
    criterion or option written so is the text as written."""
    cfg, errors, _ = load(_config(tmp_path, "annotation_schemes:\n  - " + block + "\n"))
    assert errors == [] and [s.name for s in cfg.schemes] == names
    assert cfg.schemes[0].description == description


@pytest.mark.parametrize("kind", ["rubric_eval, criteria: [a]", "semantic_differential, "
                                  "pairs: [[a, b]]", "confidence", "vas", "triage",
                                  "multirate, labels: [a], options: [o]"])
def test_variants_take_the_looks_keys_and_hints_of_every_scheme(tmp_path, kind):
    """Review 26 LOW 7: horizontal, columns ... are accepted as on a radio; has_free_response
    is refused with the reason it is on a radio."""
    looks = ", ".join(f"{k}: x" for k in ("horizontal", "displaying_score", "label_colors",
                                          "columns", "ai_support", "layout", "title"))
    cfg, errors, _ = load(_config(tmp_path, "annotation_schemes:\n  - {annotation_type: %s, "
                                            "name: n, %s}\n" % (kind, looks)))
    assert errors == [] and cfg.schemes
    _, errors, _ = load(_config(tmp_path, "annotation_schemes:\n  - {annotation_type: %s, "
                                          "name: n, has_free_response: true}\n" % kind))
    assert any(p.key == "annotation_schemes[0].has_free_response" and "on this kind what "
               "annotators type would be lost" in p.message for p in errors), errors


def test_a_variant_named_by_a_number_is_named_by_its_text(tmp_path):
    cfg, errors, _ = load(_config(tmp_path, "annotation_schemes:\n  - {annotation_type: "
                                            "rubric_eval, name: 5, criteria: [a]}\n"))
    assert errors == [] and [s.name for s in cfg.schemes] == ["5[a]"]


def test_a_description_given_as_a_number_is_its_text(tmp_path):
    cfg, errors, _ = load(_config(tmp_path, "annotation_schemes:\n  - {annotation_type: "
                                            "confidence, name: c, description: 5}\n"))
    assert errors == [] and cfg.schemes[0].description.startswith("5 (1 = Guessing")


@pytest.mark.parametrize("block,key,says", [
    ("{annotation_type: rubric_eval, name: q}", "annotation_schemes[0].criteria",
     "give criteria, a non-empty list of {name, description}"),
    ("{annotation_type: rubric_eval, name: q, criteria: [a, a]}",
     "annotation_schemes[0].criteria", "lists a criterion twice"),
    ("{annotation_type: rubric_eval, name: q, criteria: [{name: a, weight: 2}]}",
     "annotation_schemes[0].criteria[0].weight", "is not a key a rubric criterion accepts"),
    ("{annotation_type: rubric_eval, name: q, criteria: [a], scale_points: 1}",
     "annotation_schemes[0].scale_points", "must be between 2 and 20"),
    ("{annotation_type: rubric_eval, name: q, criteria: [a], scale_labels: [1, [x]]}",
     "annotation_schemes[0].scale_labels", "must be a non-empty list of point names"),
    ("{annotation_type: rubric_eval, name: q, criteria: [a], colour: red}",
     "annotation_schemes[0].colour", "is not a key a rubric_eval scheme accepts"),
    ("{annotation_type: semantic_differential, name: w}", "annotation_schemes[0].pairs",
     "give pairs, a non-empty list of [left, right]"),
    ("{annotation_type: semantic_differential, name: w, pairs: [[Good]]}",
     "annotation_schemes[0].pairs[0]", "must be a pair of words"),
    ("{annotation_type: confidence, name: c, target_schema: nothing}",
     "annotation_schemes[0].target_schema", "is not another scheme of this config"),
    ("{annotation_type: confidence, name: c, scale_type: stars}",
     "annotation_schemes[0].scale_type", "give likert or slider"),
    ("{annotation_type: confidence, name: c, scale_points: 2, labels: [a, b, c]}",
     "annotation_schemes[0].labels", "names 3 points for a scale of 2"),
    ("{annotation_type: confidence, name: c, left_label: x}",
     "annotation_schemes[0].left_label", "is for scale_type: slider"),
    ("{annotation_type: confidence, name: c, scale_type: slider, scale_points: 3}",
     "annotation_schemes[0].scale_type", "labels and scale_points are for scale_type: likert"),
    ("{annotation_type: vas, name: v, precision: 9}", "annotation_schemes[0].precision",
     "must be between 0 and 6"),
    ("{annotation_type: vas, name: v, min_value: 5, max_value: 5}",
     "annotation_schemes[0].max_value", "must be more than min_value"),
    ("{annotation_type: vas, name: v, left_label: [x]}", "annotation_schemes[0].left_label",
     "must be a string"),
    ("{annotation_type: triage, name: t, accept_key: ab}", "annotation_schemes[0].accept_key",
     "give one printable character"),
    ("{annotation_type: triage, name: t, skip_key: 1}", "annotation_schemes[0].skip_key",
     "not the key of another answer"),
    ("{annotation_type: triage, name: t, labels: [a]}", "annotation_schemes[0].labels",
     "is not a key a triage scheme accepts"),
    ("{annotation_type: multirate, name: m, labels: [a], options: [{name: x, text: y}]}",
     "annotation_schemes[0].options", "{name, label} mappings of strings"),
])
def test_a_bad_variant_block_is_an_error_naming_its_key(tmp_path, block, key, says):
    _, errors, _ = load(_config(tmp_path, "annotation_schemes:\n  - " + block + "\n"))
    assert any(p.key == key and says in p.message for p in errors), errors


def test_multirate_options_as_name_and_label(tmp_path):
    cfg, errors, _ = load(_config(tmp_path, """annotation_schemes:
  - annotation_type: multirate
    name: dims
    description: Rate
    options: [{name: a_corr, label: Agent A correctness}, plain]
    labels: ["1", "2", "3"]
"""))
    assert errors == []
    assert [(s.name, s.description) for s in cfg.schemes] == [
        ("dims[a_corr]", "Rate Agent A correctness"), ("dims[plain]", "Rate plain")]


def test_codebook_login_and_server_keys(tmp_path):
    path = _config(tmp_path, """user_config: {allow_all_users: true, require_password: false,
              allow_new_users: true}
server: {port: 8123, debug: true}
item_properties: {id_key: id, text_key: text, kwargs: [source]}
annotation_schemes:
  - {annotation_type: multiselect, name: themes, codebook: true, labels: [cost, access],
     columns: 2, title: Themes, display_config: {x: 1}, ai_support: {enabled: true}}
""")
    cfg, report = check(path)
    assert report.errors == [], report.errors
    assert cfg.schemes[0].labels == ["cost", "access"] and cfg.server.port == 8123
    assert not cfg.debug  # server.debug never turns on this Potato's debug
    warned = {p.key: p.message for p in report.warnings}
    assert "cannot add, rename or merge codes" in warned["annotation_schemes[0].codebook"]
    assert "is ignored here" in warned["server.debug"]


@pytest.mark.parametrize("top,key,says", [
    ("user_config: {allow_all_users: true, require_password: true}\n",
     "user_config.require_password", "asks for passwords"),
    ("user_config: {allow_new_users: false}\n", "user_config", "lists the users who may log in"),
    ("user_config: {allow_all_users: 'yes'}\n", "user_config.allow_all_users", "must be"),
    ("batch_assignment: {groups: []}\n", "batch_assignment", "per-cohort assignment"),
    ("scheme_sets: {minimal: [s]}\n", "scheme_sets", "per-cohort assignment"),
    ("category_assignment: {enabled: true}\n", "category_assignment", "per-cohort assignment"),
    ("server: {debug: 1}\n", "server.debug", "must be"),
    ("trace_ingestion: {enabled: true}\n", "trace_ingestion", "annotators would never see"),
])
def test_refused_and_bad_keys_name_themselves(tmp_path, top, key, says):
    path = _config(tmp_path, top + "annotation_schemes:\n  - {annotation_type: radio, name: s, "
                                   "labels: [a, b]}\n")
    _, report = check(path)
    assert any(p.key == key and says in p.message for p in report.errors), report.errors


def test_variants_are_shown_escaped_and_checked_by_the_server(tmp_path, serve):
    hostile = VARIANTS.replace("No pain", '"No <b>pain</b>"').replace("[Good, Bad]",
                                                                      '["Good <i>", Bad]')
    _, url = serve(_config(tmp_path, hostile), training=False)
    c = Client(url)
    c.login("ana")
    page = c.get("/annotate").text
    assert '<span class="slider-end">No &lt;b&gt;pain&lt;/b&gt; 0</span>' in page
    assert '<span class="slider-end">100 Worst pain</span>' in page
    assert 'data-scheme="word[Good &lt;i&gt;__Bad]" data-type="likert"' in page
    assert "<b>pain" not in page and "Good <i>" not in page
    assert 'data-scheme="quality[overall]" data-type="likert"' in page
    status, out = c.json("POST", "/api/annotations", json_body={
        "item_id": "i0", "labels": {"pain": 37.35}})
    assert status == 400 and "pain" in out["error"] and "steps of 0.1" in out["error"], out
    status, out = c.json("POST", "/api/annotations", json_body={
        "item_id": "i0", "labels": {"quality[accuracy]": 4}})
    assert status == 400 and "from 1 to 3" in out["error"], out
    labels = {"sentiment": "pos", "quality[accuracy]": 3, "quality[clarity]": 1,
              "quality[overall]": 2, "word[Good <i>__Bad]": 5, "sure": 2, "sure2": 7,
              "pain": 37.3, "whole": -5, "keep": "skip"}
    status, out = c.json("POST", "/api/annotations", json_body={"item_id": "i0",
                                                                "labels": labels})
    assert status == 200, out
    store = Store(str(tmp_path / "annotation_output" / "potato.db"))
    try:
        assert store.labels_of("ana", "i0") == labels
    finally:
        store.close()
