"""Upstream Potato's configs (issue 23): a fixture set of upstream-style configs written for these
tests (tests/data/upstream, with expected.json saying what the policy gives each one): each
validates as the policy says; each that opens shows every scheme on the annotate page (a real
server); a few train naive Bayes on the local backend; data files as upstream writes them;
instance_display; the per-item and per-user limits; the migration report; upstream's output
layout, out and back in."""

import io
import json
import os
import re
import shutil
import zipfile

import pytest

from potato.project.assignment import Limited
from potato.commands.cli import main
from potato.config.settings import load
from potato.project.data import DataError, load_items
from potato.project.store import Store
from potato.config import upstream, upstream_keys, upstream_report
from potato.config.reader import Reader
from potato.config.upstream_keys import ACCEPTED, IMPLEMENTED, POLICY, REFUSED
from potato.project.validation import check
from tests.helpers import KEY, ROOT, Client, start_run, wait_run

UP = os.path.join(ROOT, "tests", "data", "upstream")
CASES = json.load(open(os.path.join(UP, "expected.json")))
OPEN = [c for c in CASES if c["expect"] != "error"]
GOLD = json.load(open(os.path.join(UP, "data", "gold.json")))


@pytest.fixture
def up(tmp_path):
    """A copy of the fixture folder (the servers write their stores inside it)."""
    dest = tmp_path / "upstream"
    shutil.copytree(UP, dest)
    return dest


# -- the policy, key by key (upstream.split on a config's top level) ----------------------------

def split_top(data, ours=("annotation_schemes", "data_files")):
    """(our keys, Upstream, errors, warnings) of a config's top level."""
    r = Reader("c.yaml", {}, {})
    top, got = upstream.split(r, data, ours)
    return top, got, [p.message for p in r.errors], [p.message for p in r.warnings]


def docs_policy():
    """docs/configuration.md's three lists of upstream keys: {key: status}."""
    text = open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8").read()
    part = text.split("**Implemented**")[1]
    implemented, part = part.split("**Accepted, not used here**")
    accepted, refused = part.split("**Refused**")
    accepted = accepted.split("`host` is among them")[0].split("`--strict`:")[1]
    rows = lambda block: re.findall(r"^\| `([a-z_]+)` \|", block, re.M)  # noqa: E731
    out = {k: IMPLEMENTED for k in rows(implemented)}
    out.update((k, ACCEPTED) for k in re.findall(r"`([a-z_]+)`", accepted))
    out.update((k, REFUSED) for k in rows(refused.split("### ")[0]))
    return out


def test_the_policy_is_the_table_the_docs_give():
    documented = docs_policy()
    assert len(documented) > 90
    assert {k: p.status for k, p in POLICY.items()} == documented
    # what each implemented key does and what to do about each refused one, word for word
    text = open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8").read()
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| (.+) \|$", text, re.M))
    for key, policy in POLICY.items():
        if policy.status != ACCEPTED:
            assert rows[key] == policy.why, key


@pytest.mark.parametrize("key", sorted(k for k, p in POLICY.items() if p.status == ACCEPTED))
def test_an_accepted_key_is_read_and_ignored_without_a_word(key):
    top, got, errors, warnings = split_top({key: {"anything": [1, 2]}, "data_files": ["a"]})
    assert top == {"data_files": ["a"]} and errors == [] == warnings
    assert (got.accepted, got.implemented, got.refused, got.unknown) == ([key], [], [], [])
    assert got.seen and upstream_report.report_lists(got) == {"implemented": [], "accepted": [key],
                                                       "blocking": []}


@pytest.mark.parametrize("key", sorted(k for k, p in POLICY.items() if p.status == REFUSED))
def test_a_refused_key_is_an_error_that_names_it_and_says_what_to_do(key):
    _, got, errors, warnings = split_top({key: True})
    assert got.refused == [key] and got.accepted == got.implemented == [] and warnings == []
    assert errors == ["%s is upstream Potato's, and refused here: %s" % (key, POLICY[key].why)]
    assert "Remove" in POLICY[key].why
    assert upstream_report.report_lists(got)["blocking"] == [key]


def test_every_key_of_upstreams_documented_schema_has_a_decided_answer():
    with open(os.path.join(os.path.dirname(__file__), "upstream_schema_keys.txt")) as f:
        documented = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    assert len(documented) == 161
    from potato.config.settings import TOP_KEYS

    _, got, errors, warnings = split_top(dict.fromkeys(documented, {"enabled": True}),
                                         ours=TOP_KEYS)
    assert got.unknown == [] and not [w for w in warnings if "nor of upstream" in w]
    assert not [e for e in errors if "Did you mean" in e]
    assert sorted(got.implemented + got.accepted + got.refused) == sorted(
        k for k in documented if k not in TOP_KEYS)


@pytest.mark.parametrize("value", [False, None, {"enabled": False, "schema": "x"}])
def test_a_refused_feature_switched_off_asks_for_nothing_and_is_accepted(value):
    _, got, errors, warnings = split_top({"truth_serum": value, "keystroke_logging": value})
    assert errors == [] == warnings
    assert got.accepted == ["truth_serum", "keystroke_logging"] and got.refused == []
    lines = upstream_report.migration_report(got, 0, why=True)
    assert "  truth_serum (accepted, no effect): turned off in this config, so it asks for " \
           "nothing; turned on, " + POLICY["truth_serum"].why in lines
    # switched on (or any other value) it is refused as before
    _, got, errors, _ = split_top({"truth_serum": {"enabled": True}, "pocket": {"batch_size": 5}})
    assert got.refused == ["truth_serum", "pocket"] and len(errors) == 2


def test_the_why_lines_have_a_header_only_when_there_is_a_key_to_explain():
    _, got, _, _ = split_top({"page_zoom": 1})  # only a key of neither
    lines = upstream_report.migration_report(got, 0, why=True)
    assert "What each upstream key does here:" not in lines
    assert "  unknown to both (ignored): page_zoom" in lines
    _, got, _, _ = split_top({"site_dir": "x"})
    assert "What each upstream key does here:" in upstream_report.migration_report(got, 0, True)


@pytest.mark.parametrize("value", [{"on": False, "order": ["pre"]}, {True: False}, False])
def test_surveyflows_older_on_switch_turns_it_off(value):
    _, got, errors, _ = split_top({"surveyflow": value})
    assert errors == [] and got.accepted == ["surveyflow"]


@pytest.mark.parametrize("key, value", [
    # upstream acts on these whenever they are there: its code reads no enabled switch
    ("phases", {"enabled": False, "order": ["consent"]}),
    ("prolific", {"enabled": False, "token": "t", "study_id": "s"}),
    ("mturk", {"enabled": False, "sandbox": True}),
    ("agent_proxy", False),
    # a switch that is not plainly false, or two switches that disagree
    ("truth_serum", {"enabled": "false"}), ("truth_serum", {"enabled": 0}),
    ("truth_serum", {}), ("surveyflow", {"on": False, True: True}),
    ("surveyflow", {"on": "off"})])
def test_a_refused_feature_is_not_taken_as_off_unless_upstream_reads_it_so(key, value):
    _, got, errors, _ = split_top({key: value})
    assert got.refused == [key] and len(errors) == 1, errors



def test_a_key_of_neither_is_a_warning_and_a_near_miss_is_did_you_mean():
    top, got, errors, warnings = split_top({"page_zoom": 1, "annotation_schemez": [],
                                            "annotation_codebook_ur": "x"})
    assert top == {} and got.unknown == ["page_zoom"] and got.seen
    assert warnings == ["page_zoom is not a key of this Potato nor of upstream Potato; it "
                        "is ignored. Remove it (or check its spelling)."]
    assert len(errors) == 2
    assert errors[0].startswith("annotation_schemez is not a key a Potato config accepts. Did "
                                "you mean annotation_schemes?")
    assert "Did you mean annotation_codebook_url?" in errors[1]
    _, nothing, errors, warnings = split_top({"data_files": []})
    assert not nothing.seen and errors == warnings == []
    _, nothing, errors, _ = split_top(None)
    assert not nothing.seen and errors == []
    top, got, errors, _ = split_top(["port"])
    assert top == {} and errors == ["The config must be a mapping of keys to values, not a "
                                    "list."]
    assert not got.seen and (got.instructions, got.codebook_url, got.port, got.per_item,
                             got.per_user, got.all_required, got.display) == (
        "", None, None, None, None, False, [])


@pytest.mark.parametrize("data, status", [
    ({"user_config": {"allow_all_users": True, "users": []}}, IMPLEMENTED),
    ({"user_config": {"allow_new_users": True, "require_password": False}}, IMPLEMENTED),
    ({"user_config": {"allow_all_users": True, "require_password": True}}, REFUSED),
    ({"user_config": {"users": ["ann"]}}, REFUSED),
    ({"user_config": {"allow_all_users": False}}, REFUSED),
    ({"user_config": {"allow_new_users": False}}, REFUSED),
    ({"require_password": False}, IMPLEMENTED), ({"require_password": True}, REFUSED),
    ({"require_no_password": True}, IMPLEMENTED), ({"require_no_password": False}, REFUSED),
    ({"num_annotators_per_item": 2}, IMPLEMENTED),
    ({"num_annotators_per_item": {"overlap": 2}}, REFUSED),
])
def test_keys_implemented_in_one_form_refuse_the_others(data, status):
    _, got, errors, _ = split_top(data)
    key = next(iter(data))
    assert getattr(got, status) == [key]
    assert bool(errors) == (status == REFUSED), errors
    if errors:
        assert len(errors) == 1 and key in errors[0] and "refused here" not in errors[0]


def test_a_password_asked_for_anywhere_is_refused_naming_where():
    r = Reader("c.yaml", {}, {})
    upstream.split(r, {"user_config": {"allow_all_users": True, "require_password": True},
                       "require_password": True, "require_no_password": False}, ())
    assert [p.key for p in r.errors] == ["user_config.require_password", "require_password",
                                         "require_no_password"]
    assert "require_password: true asks for passwords" in r.errors[1].message
    assert "require_no_password: false asks for passwords" in r.errors[2].message
    assert all("keep the server on a network only your annotators reach." in p.message
               for p in r.errors)


def test_an_accepted_key_is_accepted_whatever_its_mapping_holds():
    _, got, errors, _ = split_top({"ui": {"users": ["ann"], "require_password": True,
                                          "allow_all_users": False}})
    assert got.accepted == ["ui"] and errors == []


def test_the_implemented_keys_values():
    _, got, errors, _ = split_top({
        "task_description": "  Read it.  ", "annotation_task_description": "Read it.",
        "annotation_instructions": "Then label.", "annotation_codebook_url": " HTTPS://x.org/c ",
        "port": 8123, "require_fully_annotated": True})
    assert errors == []
    assert got.instructions == "Read it.\n\nThen label." and got.codebook_url == "HTTPS://x.org/c"
    for key in ("task_description", "annotation_task_description", "annotation_instructions"):
        assert split_top({key: "Only this."})[1].instructions == "Only this."
    assert split_top({"annotation_codebook_url": "http://x.org/c"})[1].codebook_url == \
        "http://x.org/c"
    r = Reader("c.yaml", {}, {})
    upstream.split(r, {"annotation_codebook_url": "x.org/c", "user_config": {
        "allow_all_users": True, "password_file": "p", "allow_anonymous": 1}}, ())
    assert [p.key for p in r.errors] == ["annotation_codebook_url", "user_config.password_file",
                                         "user_config.allow_anonymous"]
    assert "user_config.password_file is not a key user_config accepts" in r.errors[1].message
    assert got.port == 8123 and got.all_required is True
    _, got, errors, _ = split_top({"annotation_instructions": " ", "task_description": "",
                                   "require_fully_annotated": False, "port": 0})
    assert errors == [] and got.instructions == "" and not got.all_required and got.port == 0
    assert got.codebook_url is None and got.per_item is None and got.per_user is None
    assert split_top({"port": 65535})[1].port == 65535


@pytest.mark.parametrize("data, says", [
    ({"annotation_codebook_url": "ftp://x.org/c"}, "give an http:// or https:// address"),
    ({"annotation_codebook_url": "javascript:alert(1)"}, "give an http:// or https://"),
    ({"annotation_codebook_url": 5}, "must be a string"),
    ({"task_description": ["a"]}, "task_description must be a string"),
    ({"annotation_instructions": {"a": 1}}, "annotation_instructions must be a string"),
    ({"port": 65536}, "port"), ({"port": -1}, "port"), ({"port": 80.5}, "whole number"),
    ({"require_fully_annotated": "yes"}, "true or false"),
    ({"require_password": "no"}, "true or false"),
    ({"require_no_password": 1}, "true or false"),
    ({"user_config": {"allow_anonymous": "yes"}}, "true or false"),
    ({"user_config": {"allow_all_users": "yes"}}, "true or false"),
    ({"user_config": {"allow_new_users": 1}}, "true or false"),
    ({"user_config": {"allow_all_users": True, "require_password": "no"}}, "true or false"),
    ({"user_config": {"allow_all_users": True, "password_file": "p"}}, "password_file"),
    ({"max_annotations_per_user": 2.5}, "whole number"),
    ({"max_annotations_per_user": -2}, "max_annotations_per_user"),
    ({"max_annotations_per_item": "3"}, "whole number"),
])
def test_a_bad_value_of_an_implemented_key_is_an_error(data, says):
    _, got, errors, _ = split_top(data)
    assert len(errors) == 1 and says in errors[0], errors
    assert got.codebook_url is None


@pytest.mark.parametrize("limits, per_item, per_user", [
    ({"num_annotators_per_item": 3}, 3, None),
    ({"max_annotations_per_item": 2}, 2, None),
    ({"num_annotators_per_item": 3, "max_annotations_per_item": 2}, 2, None),
    ({"num_annotators_per_item": 2, "max_annotations_per_item": 3}, 2, None),
    ({"num_annotators_per_item": -1, "max_annotations_per_item": 4}, 4, None),
    ({"num_annotators_per_item": 0, "max_annotations_per_item": -1}, None, None),
    ({"num_annotators_per_item": 1}, 1, None),
    ({"max_annotations_per_user": 1}, None, 1),
    ({"max_annotations_per_user": 0}, None, None),
    ({"max_annotations_per_user": -1}, None, None),
    ({"max_annotations_per_user": 7, "num_annotators_per_item": 2}, 2, 7),
])
def test_the_assignment_limits_the_smaller_per_item_and_no_limit_as_upstream_writes_it(
        limits, per_item, per_user):
    _, got, errors, _ = split_top(limits)
    assert errors == [] and (got.per_item, got.per_user) == (per_item, per_user)


def test_instance_display_fields_become_typed_fields_or_errors_that_name_them():
    _, got, errors, _ = split_top({"instance_display": {"layout": "x", "fields": [
        {"key": "text", "type": "text"}, {"key": "turns", "type": "dialogue", "label": "Chat"},
        {"key": "table", "type": "spreadsheet"}, {"key": "pic", "type": "image"},
        {"key": "clip", "type": "audio"}, {"key": "film", "type": "video"}, {"key": "plain"}]}})
    assert errors == []
    assert [(f.key, f.type, f.label) for f in got.display] == [
        ("text", "text", ""), ("turns", "dialogue", "Chat"), ("table", "spreadsheet", ""),
        ("pic", "image", ""), ("clip", "audio", ""), ("film", "video", ""),
        ("plain", "text", "")]
    for kind in ("pdf", "gallery", "audio_dialogue"):
        _, got, errors, _ = split_top({"instance_display": {"fields": [
            {"key": "k", "type": kind}, {"key": "t", "type": "text"}]}})
        assert len(errors) == 1 and "is %s (field 'k'): only image, audio and video" % kind in \
            errors[0] and errors[0].startswith("instance_display.fields[0].type")
        assert [f.key for f in got.display] == ["t"]
    _, got, errors, _ = split_top({"instance_display": {"fields": [{"key": "k", "type": "trace"},
                                                                   {"type": "text"}]}})
    assert got.display == [] and len(errors) == 2
    assert errors[0].startswith("instance_display.fields[0].type is 'trace' (field 'k'), which "
                                "is not implemented here")
    assert errors[1].startswith("instance_display.fields[1] has no key")
    _, got, errors, _ = split_top({"instance_display": {"fields": {"key": "k"}}})
    assert got.display == [] and errors == ["instance_display.fields must be a list of {key, "
                                            "type}."]
    _, got, errors, _ = split_top({"instance_display": {"layout": "grid"}})
    assert got.display == [] and errors == []


@pytest.mark.parametrize("display, key, says", [
    (["text"], "instance_display", "instance_display must be a mapping"),
    ({"fieldz": []}, "instance_display.fieldz", "is not a key instance_display accepts"),
    ({"fields": "text"}, "instance_display.fields", "must be a list of {key, type}"),
    ({"fields": ["text"]}, "instance_display.fields[0]", "fields[0] must be a mapping"),
    ({"fields": [{"key": "k", "colour": 1}]}, "instance_display.fields[0].colour",
     "is not a key an instance_display field accepts"),
    ({"fields": [{"key": ["k"]}]}, "instance_display.fields[0].key", "must be a string"),
    ({"fields": [{"key": "k", "type": ["text"]}]}, "instance_display.fields[0].type",
     "must be a string"),
    ({"fields": [{"key": "k", "label": ["a"]}]}, "instance_display.fields[0].label",
     "must be a string"),
    ({"fields": [{"key": "k", "type": "pdf"}]}, "instance_display.fields[0].type", "pdf"),
    ({"fields": [{"key": "k", "type": "eval_trace"}]}, "instance_display.fields[0].type",
     "eval_trace"),
    ({"fields": [{"type": "text"}, {"key": "t"}]}, "instance_display.fields[0]", "has no key"),
])
def test_a_bad_instance_display_is_an_error_at_its_place(display, key, says):
    r = Reader("c.yaml", {}, {})
    _, got = upstream.split(r, {"instance_display": display}, ())
    assert r.errors[0].key == key and says in r.errors[0].message, r.errors
    if "no key" in says:
        assert [f.key for f in got.display] == ["t"]  # the fields after it are read


def test_a_display_field_may_carry_upstreams_options():
    _, got, errors, _ = split_top({"instance_display": {"fields": [
        {"key": "k", "type": "text", "display_options": {"x": 1}, "span_target": True}]}})
    assert errors == [] and [f.key for f in got.display] == ["k"]


@pytest.mark.parametrize("kind", ["image", "audio"])
def test_an_image_or_audio_field_names_the_items_media_key(tmp_path, kind):
    cfg, errors, _ = scheme_config(tmp_path, "instance_display:\n  fields:\n"
                                             "    - {key: media, type: %s}\n" % kind)
    assert errors == [] and getattr(cfg.item_properties, kind + "_key") == "media"
    _, errors, _ = scheme_config(tmp_path, "item_properties: {%s_key: other}\n"
                                           "instance_display:\n  fields:\n"
                                           "    - {key: media, type: %s}\n" % (kind, kind))
    assert len(errors) == 1 and "an item has one %s here" % kind in errors[0].message


def test_data_files_as_paths_or_path_and_encoding():
    r = Reader("c.yaml", {}, {})
    assert upstream.data_files(r, None) == [] and upstream.data_files(r, "a.jsonl") == [
        ("a.jsonl", "utf-8")]
    assert upstream.data_files(r, ["a.jsonl", 7, {"path": "b.csv", "encoding": "latin-1"},
                                   {"path": "c.tsv"}]) == [
        ("a.jsonl", "utf-8"), ("7", "utf-8"), ("b.csv", "latin-1"), ("c.tsv", "utf-8")]
    assert upstream.data_files(r, {"path": "d.json", "encoding": "cp1252"}) == [
        ("d.json", "cp1252")]
    assert r.errors == []
    for raw, says in ((True, "data_files must be a list"), ([True], "data_files[0] must be a "
                                                                    "path or a mapping"),
                      ([None], "must be a path"), ([{"encoding": "utf-8"}], "has no path"),
                      ([{"path": "a", "encoding": "rot13"}], "not a text encoding"),
                      ([{"path": "a", "encoding": "base64"}], "not a text encoding"),
                      ([{"path": "a", "encoding": "klingon"}], "not a text encoding")):
        r = Reader("c.yaml", {}, {})
        got = upstream.data_files(r, raw)
        assert len(r.errors) == 1 and says in r.errors[0].message, (raw, r.errors)
        assert got in ([], [("a", "utf-8")])  # a bad encoding reads as utf-8


@pytest.mark.parametrize("raw, key, says", [
    ([{"path": "a", "encoding": "utf-8", "colour": 1}], "data_files[0].colour",
     "is not a key a data_files entry accepts"),
    ([{"path": ["a"]}], "data_files[0].path", "must be a string"),
    ([{"path": "a", "encoding": 8}], "data_files[0].encoding", "not a text encoding"),
    ([{"path": "a", "encoding": ["utf-8"]}], "data_files[0].encoding", "must be a string"),
    (["a", {"encoding": "utf-8"}, "b"], "data_files[1]", "has no path"),
])
def test_a_bad_data_files_entry_is_an_error_at_its_place(raw, key, says):
    r = Reader("c.yaml", {}, {})
    got = upstream.data_files(r, raw)
    assert r.errors[0].key == key and says in r.errors[0].message, r.errors
    if "no path" in says:
        assert got == [("a", "utf-8"), ("b", "utf-8")]  # the entries after it are read


def test_a_data_files_entry_may_say_its_format_and_type():
    r = Reader("c.yaml", {}, {})
    assert upstream.data_files(r, [{"path": "a.csv", "format": "csv", "type": "csv"}]) == [
        ("a.csv", "utf-8")]
    assert r.errors == []


def test_the_migration_report_counts_other_errors_and_names_unknown_keys():
    _, got, _, _ = split_top({"port": 1, "theme": "x", "mturk": 1, "colours": 1})
    assert upstream_report.migration_report(got, 1) == [
        "Upstream Potato keys in this config:", "  implemented (1): port",
        "  accepted but unused (1): theme", "  blocking (1): mturk",
        "  unknown to both (ignored): colours"]
    lines = upstream_report.migration_report(got, 3)
    assert lines[4] == "  and 2 other error(s) listed above block it too."
    assert upstream_report.migration_report(got, 2)[4] == \
        "  and 1 other error(s) listed above block it too."
    assert upstream_report.migration_report(upstream.Upstream(), 0) == [
        "Upstream Potato keys in this config:", "  implemented (0): -",
        "  accepted but unused (0): -", "  blocking (0): -"]


def scheme_config(tmp_path, extra):
    (tmp_path / "items.jsonl").write_text('{"id": "a", "text": "t"}\n')
    (tmp_path / "c.yaml").write_text(
        "data_files: [items.jsonl]\nannotation_schemes:\n  - annotation_type: radio\n"
        "    name: s\n    labels: [x, y]\n" + extra)
    return load(str(tmp_path / "c.yaml"))


def docs_looks_keys():
    """The upstream scheme keys docs/configuration.md says are accepted with no effect."""
    text = open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8").read()
    part = text.split("\n`annotation_id`")[1].split("are accepted and have no effect")[0]
    return ["annotation_id"] + re.findall(r"`([a-z_]+)`", part)


@pytest.mark.parametrize("key", docs_looks_keys())
def test_an_upstream_scheme_key_about_looks_is_accepted(tmp_path, key):
    _, errors, warnings = scheme_config(tmp_path, "    %s: 1\n" % key)
    assert errors == [] and not any(key in w.message for w in warnings)


@pytest.mark.parametrize("key", ["turn_level", "turn_binding", "bad_text_label"])
def test_an_upstream_scheme_key_that_would_lose_answers_is_refused_with_why(tmp_path, key):
    _, errors, _ = scheme_config(tmp_path, "    %s: true\n" % key)
    assert [e.message for e in errors if upstream_keys.SCHEME_HINTS[key] in e.message], errors
    assert "Remove it" in upstream_keys.SCHEME_HINTS[key]


def test_fixture_set_covers_the_policy():
    assert len(CASES) >= 30
    assert {c["expect"] for c in CASES} == {"ok", "error", "warning"}
    assert len([c for c in CASES if c["expect"] == "error"]) >= 15
    assert all(p.status in (IMPLEMENTED, ACCEPTED, REFUSED) and p.why for p in POLICY.values())


@pytest.mark.parametrize("case", CASES, ids=[c["config"] for c in CASES])
def test_each_config_validates_as_the_policy_says(case):
    _, report = check(os.path.join(UP, case["config"]))
    keys = [p.key for p in report.errors]
    if case["expect"] == "error":
        assert case["key"] in keys, report.errors
        [err] = [p for p in report.errors if p.key == case["key"]]
        assert case["key"].split(".")[-1].split("[")[0] in err.message  # names the key
        assert any(w in err.message for w in ("Remove", "Use", "Give", "List", "Did you mean"))
    else:
        assert report.errors == [], report.errors
    if case["expect"] == "warning":
        assert case["key"] in [p.key for p in report.warnings]


def test_accepted_keys_are_one_note_that_never_fails_strict(tmp_path):
    path = os.path.join(UP, "19-accepted-features.yaml")
    _, report = check(path)
    [note] = [n for n in report.notes if n.message.startswith("accepted, not used here")]
    for key in ("ai_support", "html_layout",
                "output_annotation_format", "alert_time_each_instance"):
        assert key in note.message
    # active_learning is implemented now: its block (enabled: false) is read, not just noted
    assert "active_learning" not in note.message
    assert not any("active_learning" in w.message for w in report.warnings)
    assert not any("ai_support" in w.message for w in report.warnings)
    # With an admin key the same config passes --strict.
    text = open(path).read() + "admin_api_key: %s\n" % KEY
    strict = tmp_path / "19.yaml"
    strict.write_text(text.replace("data/", os.path.join(UP, "data") + "/"))
    assert main(["validate", str(strict), "--strict"]) == 0


def test_port_and_implemented_values():
    cfg, errors, _ = load(os.path.join(UP, "01-sentiment-radio.yaml"))
    assert not errors and cfg.server.port == 8123
    assert cfg.upstream.codebook_url == "https://example.org/codebook.pdf"
    cfg, _, _ = load(os.path.join(UP, "21-fully-annotated.yaml"))
    assert all(s.required for s in cfg.schemes)
    cfg, _, _ = load(os.path.join(UP, "18-overlap-limits.yaml"))
    assert (cfg.upstream.per_item, cfg.upstream.per_user) == (2, 5)
    cfg, _, _ = load(os.path.join(UP, "22-max-per-item.yaml"))
    assert (cfg.upstream.per_item, cfg.upstream.per_user) == (3, None)


def test_migration_report_lists(capsys):
    assert main(["validate", "--upstream", os.path.join(UP, "28-prolific-crowdsourcing.yaml")]) == 1
    out = capsys.readouterr().out
    lines = {l.split("(")[0].strip(): l for l in out.splitlines() if l.startswith("  ")}
    assert "user_config" in lines["implemented"] and "annotation_codebook_url" in \
        lines["implemented"]
    assert "output_annotation_format" in lines["accepted but unused"]
    assert "crowdsourcing" in lines["blocking"] and "completion_code" in lines["implemented"]
    assert main(["validate", "--json", os.path.join(UP, "01-sentiment-radio.yaml")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "port" in data["upstream"]["implemented"] and data["upstream"]["blocking"] == []


# -- data files ----------------------------------------------------------------------------------

def test_every_data_format_reads_the_same_items():
    texts = None
    for name in ("11-data-jsonl", "12-data-json-lines-in-json", "13-data-csv", "14-data-tsv",
                 "01-sentiment-radio"):
        cfg, errors, _ = load(os.path.join(UP, name + ".yaml"))
        assert not errors
        got = [(i, t) for i, t, _ in load_items(cfg)]
        assert len(got) == 30
        assert texts is None or got == texts, name
        texts = got
    cfg, _, _ = load(os.path.join(UP, "15-data-path-mapping.yaml"))
    assert load_items(cfg)[0][1] == "Café crème number 0"


def _cfg(tmp_path, data_name, body, encoding=None):
    (tmp_path / data_name).write_bytes(body)
    entry = (f"{{path: {data_name}, encoding: {encoding}}}" if encoding else data_name)
    (tmp_path / "c.yaml").write_text(f"data_files: [{entry}]\nannotation_schemes:\n"
                                     f"  - {{annotation_type: radio, name: s, labels: [a, b]}}\n")
    cfg, errors, _ = load(str(tmp_path / "c.yaml"))
    assert not errors, errors
    return cfg


@pytest.mark.parametrize("name,body,encoding,says", [
    ("x.csv", b"ident,text\n1,a\n", None, "x.csv:1: the header row has no column 'id'"),
    ("x.tsv", b"id\ttext\n1\ta\n2\tb\textra\n", None, "x.tsv:3: this row has 3 cells"),
    ("x.csv", b'id,text\n1,"open quote\n', None, "not valid CSV"),
    ("x.csv", b"id,text\n1,caf\xe9\n", None, "not utf-8 text"),
    ("x.json", b'{"id": 1, "text": "a"}\n{"id": 2, \n', None, "x.json:2: not a JSON object"),
    # review 23.9: a traceback, a silent last-column-wins, a silent empty project
    ("x.csv", b"id,text,text\n1,a,b\n", None, "x.csv:1: the header row names the column "
                                              "'text' twice"),
    ("x.csv", b"", None, "x.csv: the file is empty: it has no header row and no items"),
])
def test_data_file_errors_name_file_and_line(tmp_path, name, body, encoding, says):
    cfg = _cfg(tmp_path, name, body, encoding)
    with pytest.raises(DataError) as e:
        load_items(cfg)
    assert says in str(e.value)


@pytest.mark.parametrize("encoding", ["klingon", "undefined", "rot13", "base64"])
def test_data_files_entry_with_unknown_encoding_is_an_error(tmp_path, encoding):
    # review 23.9: "undefined" (and codecs not for text) passed and gave a traceback later
    (tmp_path / "c.yaml").write_text(f"data_files: [{{path: x.csv, encoding: {encoding}}}]\n")
    _, errors, _ = load(str(tmp_path / "c.yaml"))
    assert any(encoding in e.message and e.key == "data_files[0].encoding" for e in errors)


SHAPES = [None, 0, -1.5, True, "", "a <b>", [], [None], [[]], [[1, [2, {"x": None}]]],
          [{"a": 1}, {"b": [2]}], [{"a": 1}, "x", [3]], {}, {"headers": 5, "rows": 7},
          {"headers": "h<i>", "rows": "r"}, {"headers": None, "rows": {"a": [1]}},
          {"headers": [[1], {"k": 2}], "rows": [5, None, [1, [2]], {"c": 3}]}, {"rows": 0},
          [{"speaker": {"x": 1}, "text": [1]}, {"role": None}, "ana: hi", 7], {"a": {"b": {}}}]


@pytest.mark.parametrize("kind", ["text", "dialogue", "spreadsheet", "code", "document"])
def test_every_display_type_renders_any_json_value(kind):
    # Review 23.3: a spreadsheet whose rows or headers was not a list made the page a 500.
    from potato.project import display
    for value in SHAPES:
        for options in ({}, {"language": "<i>", "show_line_numbers": False}):
            out = str(display.RENDERERS[kind](value, options))
            if kind == "document":  # its HTML is the point: b and i are kept, i closed
                assert out.count("<i>") == out.count("</i>"), (kind, value)
            else:
                assert "<b>" not in out and "<i>" not in out, (kind, value)


def test_a_code_field_numbers_its_lines_unless_told_not_to():
    from potato.project import display
    code = "def f(x):\n    return x < 1\n"
    assert str(display.RENDERERS["code"](code, {"language": "python"})) == (
        '<ol class="code-block" data-language="python"><li><code>def f(x):</code></li>'
        '<li><code>    return x &lt; 1</code></li><li><code></code></li></ol>')
    out = str(display.RENDERERS["code"](code, {"show_line_numbers": False, "language": 3}))
    assert out.startswith('<ol class="code-block plain"><li>')
    out = str(display.RENDERERS["code"]("\n".join(map(str, range(2500))), {}))
    assert out.count("<li>") == display.MAX_CODE_LINES
    assert out.endswith('<p class="hint">500 more lines not shown.</p>')


# -- the annotate page, training --------------------------------------------------------------

@pytest.mark.parametrize("case", OPEN, ids=[c["config"] for c in OPEN])
def test_schemes_render_on_the_annotate_page(up, serve, case):
    cfg, _, _ = load(str(up / case["config"]))
    _, url = serve(str(up / case["config"]), training=False)
    c = Client(url)
    if cfg.upstream.crowd is not None:  # a crowd worker arrives by their platform's link
        assert c.get("/?%s=ana" % cfg.upstream.crowd.id_param).status == 303
    else:
        c.login("ana")
    page = c.get("/annotate")
    assert page.status == 200, page.text
    for scheme in cfg.schemes:
        assert f'data-scheme="{scheme.name}" data-type="{scheme.annotation_type}"' in page.text
    assert 'href="https://example.org/codebook.pdf"' in page.text
    assert "<script>" not in page.text and "style=" not in page.text


def test_instructions_dialogue_and_spreadsheet_are_shown_escaped(up, serve):
    _, url = serve(str(up / "16-dialogue-display.yaml"), training=False)
    c = Client(url)
    c.login("ana")
    page = c.get("/annotate").text
    assert '<section class="display-field display-dialogue" data-key="conversation">' in page
    assert '<span class="speaker">Customer</span>' in page
    assert "My order 0 is &lt;late&gt;." in page and "<late>" not in page
    assert '<span class="speaker">Agent</span> <span class="turn-text">Sorry' in page
    assert 'id="item-text"' in page  # the text_key field is the item's text
    _, url = serve(str(up / "17-spreadsheet-display.yaml"), training=False)
    c = Client(url)
    c.login("ana")
    page = c.get("/annotate").text
    assert '<th scope="col">item</th><th scope="col">price</th>' in page
    assert "<td>apples</td><td>3</td>" in page
    _, url = serve(str(up / "06-free-text.yaml"), training=False)
    c = Client(url)
    c.login("ana")
    assert '<div class="instructions">Write one sentence.</div>' in c.get("/annotate").text


def _label_all(c, cfg):
    for item_id, gold in GOLD.items():
        labels = {}
        for s in cfg.schemes:
            if s.annotation_type == "radio":
                labels[s.name] = gold
            elif s.annotation_type == "multiselect":
                labels[s.name] = ["quality"] if gold == "positive" else ["price", "delivery"]
        status, out = c.json("POST", "/api/annotations", json_body={"item_id": item_id,
                                                                    "labels": labels})
        assert status == 200, out


@pytest.mark.parametrize("case", [c for c in CASES if c["train"]],
                         ids=[c["config"] for c in CASES if c["train"]])
def test_a_trainable_scheme_trains(up, serve, case):
    path = str(up / case["config"])
    cfg, _, _ = load(path)
    _, url = serve(path, admin_api_key=KEY)
    c = Client(url)
    c.login("ana")
    _label_all(c, cfg)
    run = wait_run(c, start_run(c, trainer="text-naive-bayes", schemas=[case["train"]]))
    assert run["status"] == "success", run


# -- assignment -------------------------------------------------------------------------------

def test_items_go_to_at_most_n_annotators_and_n_items_per_annotator(up, serve):
    path = str(up / "18-overlap-limits.yaml")  # 2 annotators per item, 5 items per annotator
    cfg, _, _ = load(path)
    store = Store(cfg.db_path)
    try:
        from potato.project.data import load_items as items_of

        store.sync_items(items_of(cfg))
        q = Limited(store, 2, 5)
        assert [q.item_at("a", n)["id"] for n in range(5)] == ["r0", "r1", "r2", "r3", "r4"]
        assert q.item_at("a", 5) is None and q.total("a") == 5
        assert [q.item_at("b", n)["id"] for n in range(2)] == ["r0", "r1"]
        assert q.item_at("c", 0)["id"] == "r2"  # r0 and r1 have their two annotators
        assert q.may_label("a", "r0") and not q.may_label("c", "r0")
    finally:
        store.close()
    _, url = serve(path, training=False)
    c = Client(url)
    c.login("d")
    page = c.get("/annotate").text
    assert "<code>r3</code>" in page  # r0, r1 (a, b) and r2 (a, c) are taken: d gets r3
    status, out = c.json("POST", "/api/annotations", json_body={"item_id": "r0", "labels": {
        "sentiment": "positive"}})
    assert status == 403 and "num_annotators_per_item" in out["error"]


def test_one_users_concurrent_requests_cannot_beat_the_per_user_cap(up, monkeypatch):
    # Review 23.5: item_at read the user's assignments outside its transaction, so a second
    # request that read them before the first one committed handed out one item too many.
    cfg, _, _ = load(str(up / "18-overlap-limits.yaml"))
    store = Store(cfg.db_path)
    try:
        store.sync_items(load_items(cfg))
        q = Limited(store, None, 1)
        assert q.item_at("a", 0)["id"] == "r0"
        real = Limited.assigned
        stale = [[]]  # what the racing request read before "r0" was committed
        monkeypatch.setattr(Limited, "assigned",
                            lambda self, user: stale.pop() if stale else real(self, user))
        assert q.item_at("a", 0)["id"] == "r0"
        assert real(q, "a") == ["r0"]
    finally:
        store.close()


# -- upstream's output layout ---------------------------------------------------------------------

def test_upstream_output_round_trip(up, tmp_path, capsys):
    path = str(up / "09-all-kinds.yaml")
    labels = tmp_path / "labels.jsonl"
    spans = [{"start": 23, "end": 28, "label": "praise", "text": "great"}]
    text0 = dict((i, t) for i, t, _ in load_items(load(path)[0]))["r0"]
    spans[0]["start"] = text0.index(text0.split("was ")[1].split(",")[0])
    spans[0]["end"] = spans[0]["start"] + len(text0.split("was ")[1].split(",")[0])
    spans[0]["text"] = text0[spans[0]["start"]:spans[0]["end"]]
    row = {"id": "r0", "sentiment": "positive", "aspects": ["price", "quality"],
           "helpfulness": 4, "confidence": 70, "stars": 5, "comment": "fine, \"really\"",
           "country": "UK", "opinion": spans}
    labels.write_text(json.dumps(row) + "\n" + json.dumps({"id": "r1", "sentiment":
                                                           "negative"}) + "\n")
    assert main(["annotations", "import", path, str(labels), "--annotator", "ana"]) == 0
    out_dir = tmp_path / "out"
    assert main(["annotations", "export", path, "--format", "upstream", "-o", str(out_dir)]) == 0
    lines = [json.loads(l) for l in open(out_dir / "ana" / "annotated_instances.jsonl")]
    first = lines[0]
    assert first["id"] == "r0" and first["displayed_text"] == text0
    assert first["label_annotations"]["sentiment"] == {"positive": "true"}
    assert first["label_annotations"]["helpfulness"] == {"scale_4": "4"}
    assert first["span_annotations"][0]["annotation"] == "praise"
    # Into a fresh project (another store): the same labels come back.
    fresh = open(path).read().replace("annotation_output/09-all-kinds/", "fresh_output/")
    (up / "fresh.yaml").write_text(fresh)
    capsys.readouterr()
    assert main(["annotations", "import", str(up / "fresh.yaml"), str(out_dir),
                 "--format", "upstream"]) == 0
    store = Store(load(str(up / "fresh.yaml"))[0].db_path)
    try:
        back = store.labels_of("ana", "r0")
        assert back == {k: v for k, v in row.items() if k != "id"}
        assert store.labels_of("ana", "r1") == {"sentiment": "negative"}
    finally:
        store.close()


ODD = "one\u2028two\x85three\x0cfour\x1efive"


def test_unicode_line_breaks_in_items_and_answers_round_trip(tmp_path, capsys):
    # Review 23.1: str.splitlines() broke lines at U+2028, U+0085, \x0c, \x1e... which
    # json.dumps(ensure_ascii=False) writes raw inside strings.
    (tmp_path / "d.jsonl").write_text(
        json.dumps({"id": "a", "text": "good " + ODD}, ensure_ascii=False) + "\n"
        + json.dumps({"id": "b", "text": "plain"}) + "\n", encoding="utf-8")
    conf = ("data_files: [d.jsonl]\nannotation_schemes:\n"
            "  - {annotation_type: text, name: note}\n"
            "  - {annotation_type: span, name: ent, labels: [x]}\n")
    (tmp_path / "c.yaml").write_text(conf)
    (tmp_path / "fresh.yaml").write_text(conf + "output_annotation_dir: fresh_output/\n")
    cfg = load(str(tmp_path / "c.yaml"))[0]
    assert [t for _, t, _ in load_items(cfg)] == ["good " + ODD, "plain"]
    answer = {"id": "a", "note": "see\u2028this", "ent": [
        {"start": 5, "end": 8, "label": "x", "text": "one"}]}
    (tmp_path / "l.jsonl").write_text(json.dumps(answer, ensure_ascii=False) + "\n"
                                      + json.dumps({"id": "b", "ent": []}) + "\n",
                                      encoding="utf-8")
    assert main(["annotations", "import", str(tmp_path / "c.yaml"), str(tmp_path / "l.jsonl"),
                 "--annotator", "ana"]) == 0
    out_dir = tmp_path / "out"
    assert main(["annotations", "export", str(tmp_path / "c.yaml"), "--format", "upstream",
                 "-o", str(out_dir)]) == 0
    capsys.readouterr()
    assert main(["annotations", "import", str(tmp_path / "fresh.yaml"), str(out_dir),
                 "--format", "upstream"]) == 0, capsys.readouterr().err
    store = Store(load(str(tmp_path / "fresh.yaml"))[0].db_path)
    try:
        assert store.labels_of("ana", "a") == {k: v for k, v in answer.items() if k != "id"}
        assert store.labels_of("ana", "b") == {"ent": []}  # review 23.2: marked nothing
    finally:
        store.close()


def test_upstream_import_is_all_or_nothing(up, tmp_path, capsys):
    path = str(up / "01-sentiment-radio.yaml")
    folder = tmp_path / "annotation_output" / "bob"
    folder.mkdir(parents=True)
    (folder / "annotated_instances.jsonl").write_text(
        json.dumps({"id": "r0", "label_annotations": {"sentiment": {"positive": "true"}}}) + "\n"
        + json.dumps({"id": "r1", "label_annotations": {"sentiment": {"meh": "true"}}}) + "\n")
    assert main(["annotations", "import", path, str(tmp_path / "annotation_output"),
                 "--format", "upstream"]) == 1
    err = capsys.readouterr().err
    assert "annotated_instances.jsonl:2" in err and "nothing imported" in err
    store = Store(load(path)[0].db_path)
    try:
        assert store.annotation_count() == 0
    finally:
        store.close()


@pytest.mark.parametrize("record,says", [
    ({"id": "r0", "label_annotations": ["x"]}, "label_annotations must be a mapping"),
    ({"id": "r0", "span_annotations": 5}, "span_annotations must be a list"),
    ({"id": "r0", "span_annotations": [{"schema": "sentiment", "annotation": "positive",
                                         "start": 0, "end": 1}]},
     "schema 'sentiment' is not a span scheme"),
    ({"id": "r0", "label_annotations": {"sentiment": {"positive": "true"}},
      "span_annotations": [{"schema": "sentiment", "start": 0, "end": 1}]},
     "schema 'sentiment' is not a span scheme"),
    ({"id": "r0", "span_annotations": [{"schema": ["opinion"], "start": 0, "end": 1}]},
     "is not a span scheme"),
    ({"id": "r0", "span_annotations": ["x"]}, "a span annotation must be a mapping"),
    ({"id": "r0", "label_annotations": {"opinion": {"praise": "true"}}},
     "its spans belong in span_annotations"),
    ({"id": "r0", "label_annotations": {"helpfulness": {"scale_1": [1]}}}, "helpfulness"),
    ({"id": "r0", "label_annotations": {"stars": {"number": {"a": 1}}}}, "stars"),
    ([1, 2], "no id of an item"),
])
def test_a_malformed_upstream_file_is_a_problem_per_line(up, tmp_path, capsys, record, says):
    # Review 23.4: these crashed with tracebacks (list.items, int not iterable, str.append).
    path = str(up / "09-all-kinds.yaml")
    folder = tmp_path / "annotation_output" / "bob"
    folder.mkdir(parents=True)
    (folder / "annotated_instances.jsonl").write_text(
        json.dumps({"id": "r1", "label_annotations": {"sentiment": {"positive": "true"}}})
        + "\n" + json.dumps(record) + "\n")
    assert main(["annotations", "import", path, str(tmp_path / "annotation_output"),
                 "--format", "upstream"]) == 1
    err = capsys.readouterr().err
    assert "annotated_instances.jsonl:2: " in err and says in err and "nothing imported" in err
    store = Store(load(path)[0].db_path)
    try:
        assert store.annotation_count() == 0
    finally:
        store.close()


def test_long_annotator_names_get_their_own_folders(up, tmp_path, capsys, monkeypatch):
    # Review 23.8: names were cut at 200 characters, so two long names shared one folder.
    from potato.labels import upstream_output

    path = str(up / "01-sentiment-radio.yaml")
    labels = tmp_path / "l.jsonl"
    labels.write_text(json.dumps({"id": "r0", "sentiment": "positive"}) + "\n")
    names = ["é" * 100 + "one", "é" * 100 + "two"]
    for name in names:
        assert main(["annotations", "import", path, str(labels), "--annotator", name]) == 0
    out = tmp_path / "out"
    assert main(["annotations", "export", path, "--format", "upstream", "-o", str(out)]) == 0
    folders = sorted(os.listdir(out))
    assert len(folders) == 2 and all(len(f) <= 200 for f in folders)
    monkeypatch.setattr(upstream_output, "folder_name", lambda name: "same")
    capsys.readouterr()
    assert main(["annotations", "export", path, "--format", "upstream", "-o",
                 str(tmp_path / "out2")]) == 1
    err = capsys.readouterr().err
    assert "would both be exported to the folder 'same'" in err and "Traceback" not in err
    assert not (tmp_path / "out2").exists()


def test_admin_downloads_the_upstream_layout_as_a_zip(up, serve):
    path = str(up / "01-sentiment-radio.yaml")
    _, url = serve(path, admin_api_key=KEY, training=False)
    c = Client(url)
    c.login("ana")
    assert c.json("POST", "/api/annotations", json_body={"item_id": "r3", "labels": {
        "sentiment": "negative"}})[0] == 200
    r = c.get("/admin/export-upstream.zip", headers={"X-API-Key": KEY})
    assert r.status == 200
    z = zipfile.ZipFile(io.BytesIO(r.body))
    assert z.namelist() == ["annotation_output/ana/annotated_instances.jsonl"]
    rec = json.loads(z.read(z.namelist()[0]))
    assert rec["id"] == "r3" and rec["label_annotations"] == {"sentiment": {"negative": "true"}}


# -- several questions in one upstream block: multirate, text with several labels ------------

def test_multirate_is_one_radio_scheme_per_option_and_text_one_box_per_label():
    cfg, errors, _ = load(os.path.join(UP, "43-multirate.yaml"))
    assert errors == []
    assert [(s.name, s.annotation_type, s.labels, s.required) for s in cfg.schemes] == [
        ("tone[Politeness]", "radio", ["positive", "negative"], True),
        ("tone[Clarity]", "radio", ["positive", "negative"], True)]
    assert cfg.schemes[0].description == "How does the review come across? Politeness"
    assert cfg.schemes[1].label_keys == ["1", "2"]
    cfg, errors, _ = load(os.path.join(UP, "44-text-boxes.yaml"))
    assert errors == []
    assert [(s.name, s.annotation_type, s.labels) for s in cfg.schemes] == [
        ("sentiment", "radio", ["positive", "negative"]),
        ("notes[likes]", "text", ["likes"]), ("notes[dislikes]", "text", ["dislikes"])]
    assert cfg.schemes[1].kind.multiline and cfg.schemes[1].kind.rows == 2


@pytest.mark.parametrize("block,says", [
    ("{annotation_type: multirate, name: tone, labels: [a, b]}",
     "annotation_schemes[0] (tone) is a multirate scheme: give options"),
    ("{annotation_type: multirate, name: tone, labels: [a, b], options: [x, x]}",
     "annotation_schemes[0] (tone) lists an option twice"),
    ("{annotation_type: multirate, name: tone, labels: [a, b], options: [x, 3]}",
     "give options, a non-empty list of the statements to rate"),
    ("{annotation_type: multirate, name: tone, options: [x, y]}",
     "needs a non-empty list of labels"),
    ("{annotation_type: multirate, name: tone, labels: [a], options: [x], colour: red}",
     "annotation_schemes[0].colour is not a key a multirate scheme accepts"),
    ("{annotation_type: multirate, name: t, labels: [a], options: [x]}\n"
     "  - {annotation_type: radio, name: 't[x]', labels: [a]}",
     "the scheme name 't[x]' is used twice"),
])
def test_a_bad_multirate_block_is_an_error_that_says_what_to_give(tmp_path, block, says):
    (tmp_path / "items.jsonl").write_text('{"id": "a", "text": "x"}\n')
    path = tmp_path / "config.yaml"
    path.write_text("annotation_task_name: t\ndata_files: [items.jsonl]\nannotation_schemes:\n"
                    "  - " + block + "\n")
    _, errors, _ = load(str(path))
    text = "\n".join(p.message for p in errors)
    assert says in text, text


def test_multirate_and_text_boxes_are_saved_from_the_annotate_form(up, serve):
    hostile = (up / "43-multirate.yaml").read_text().replace("Clarity]", '"Clarity <b>"]')
    (up / "43-multirate.yaml").write_text(hostile)
    _, url = serve(str(up / "43-multirate.yaml"), training=False)
    c = Client(url)
    c.login("ana")
    page = c.get("/annotate").text
    assert 'name="label:tone[Clarity &lt;b&gt;]" value="negative"' in page
    assert "Clarity <b>" not in page
    r = c.post("/annotate", form={"item_id": "r0", "position": "0", "action": "next",
                                  "label:tone[Politeness]": "positive",
                                  "label:tone[Clarity <b>]": "negative",
                                  "present:tone[Politeness]": "1",
                                  "present:tone[Clarity <b>]": "1"})
    assert r.status == 303, r.text
    status, out = c.json("POST", "/api/annotations", json_body={
        "item_id": "r1", "labels": {"tone[Politeness]": "maybe"}})
    assert status == 400 and "tone[Politeness]" in out["error"], out
    _, url = serve(str(up / "44-text-boxes.yaml"), training=False)
    c = Client(url)
    c.login("ana")
    page = c.get("/annotate").text
    assert page.count("<textarea") == 2 and 'name="label:notes[dislikes]"' in page
    r = c.post("/annotate", form={"item_id": "r0", "position": "0", "action": "next",
                                  "label:sentiment": "positive",
                                  "label:notes[likes]": "the price",
                                  "label:notes[dislikes]": "the box"})
    assert r.status == 303, r.text
    store = Store(str(up / "annotation_output" / "44-text-boxes" / "potato.db"))
    try:
        assert store.labels_of("ana", "r0") == {"sentiment": "positive",
                                                "notes[likes]": "the price",
                                                "notes[dislikes]": "the box"}
    finally:
        store.close()
    store = Store(str(up / "annotation_output" / "43-multirate" / "potato.db"))
    try:
        assert store.labels_of("ana", "r0") == {"tone[Politeness]": "positive",
                                                "tone[Clarity <b>]": "negative"}
    finally:
        store.close()


# -- display_logic ----------------------------------------------------------------------------

def test_display_logic_decides_which_schemes_show():
    from potato.schemes.logic import shown

    cfg, errors, _ = load(os.path.join(UP, "45-display-logic.yaml"))
    assert errors == []
    s = {x.name: x for x in cfg.schemes}
    assert shown(s["sentiment"], {})  # no logic: always
    assert not shown(s["complaints"], {}) and not shown(s["complaints"], {"sentiment": "positive"})
    assert shown(s["complaints"], {"sentiment": "mixed"})
    assert shown(s["other_complaint"], {"complaints": ["price", "other"]})
    assert not shown(s["other_complaint"], {"complaints": ["price"]})
    assert shown(s["other_complaint"], {"complaints": "other-ish"})  # a text answer: substring
    assert shown(s["certainty"], {"sentiment": "positive"})  # logic: any
    assert shown(s["certainty"], {"sentiment": "negative", "complaints": ["price"]})
    assert not shown(s["certainty"], {"sentiment": "negative", "complaints": []})
    assert shown(s["why_unsure"], {"certainty": 3}) and not shown(s["why_unsure"], {"certainty": 4})
    assert not shown(s["why_unsure"], {"certainty": "2"}) and not shown(s["why_unsure"], {})


@pytest.mark.parametrize("logic,says", [
    ("{show_when: [{schema: a, operator: is, value: x}]}",
     "operator is 'is'; display_logic operators here are equals, not_equals"),
    ("{show_when: [{schema: nope, operator: equals, value: x}]}",
     "b's display_logic names the scheme 'nope', which is not a scheme of this config"),
    ("{show_when: [{schema: b, operator: equals, value: x}]}", "which is itself"),
    ("{show_when: [{schema: a, operator: in_range, value: [5, 1]}]}",
     "in_range takes [low, high], two numbers with low <= high"),
    ("{show_when: [{schema: a, operator: equals, value: {x: 1}}]}",
     "must be a label or number, or a list of them"),
    ("{show_when: []}", "needs show_when, a list of conditions"),
    ("{show_when: [{schema: a, value: x}], logic: most}", "give all (every condition holds)"),
    ("{show_when: [{schema: a, operator: equals, value: x, when: 1}]}",
     "show_when[0].when is not a key a display_logic condition accepts"),
])
def test_bad_display_logic_is_an_error_that_says_what_to_give(tmp_path, logic, says):
    (tmp_path / "items.jsonl").write_text('{"id": "a", "text": "x"}\n')
    path = tmp_path / "config.yaml"
    path.write_text("annotation_task_name: t\ndata_files: [items.jsonl]\nannotation_schemes:\n"
                    "  - {annotation_type: radio, name: a, labels: [x, y]}\n"
                    "  - {annotation_type: radio, name: b, labels: [x, y], display_logic: "
                    + logic + "}\n")
    _, errors, _ = load(str(path))
    text = "\n".join(p.message for p in errors)
    assert says in text, text


def test_a_hidden_required_scheme_does_not_block_and_a_shown_one_does(up, serve):
    _, url = serve(str(up / "45-display-logic.yaml"), training=False)
    c = Client(url)
    c.login("ana")
    page = c.get("/annotate").text
    assert 'data-scheme="complaints" data-type="multiselect" data-required="1" data-show-when="' \
        in page
    form = {"item_id": "r0", "position": "0", "action": "next", "label:sentiment": "positive",
            "present:complaints": "1"}
    assert c.post("/annotate", form=form).status == 303  # complaints hidden: not required
    r = c.post("/annotate", form=dict(form, item_id="r1", position="1",
                                      **{"label:sentiment": "negative"}))
    assert r.status == 400 and "complaints" in r.text and "needs an answer" in r.text
    r = c.post("/annotate", form=dict(form, item_id="r1", position="1",
                                      **{"label:sentiment": "negative",
                                         "label:complaints": "price"}))
    assert r.status == 303, r.text


def test_upstream_scheme_keys_text_box_single_line_layout_and_free_response(tmp_path):
    (tmp_path / "items.jsonl").write_text('{"id": "a", "text": "x"}\n')
    path = tmp_path / "config.yaml"
    path.write_text(
        "annotation_task_name: t\ndata_files: [items.jsonl]\nannotation_schemes:\n"
        "  - {annotation_type: text, name: a, text_box_single_line: false, layout: {columns: 2}}\n"
        "  - {annotation_type: text, name: b, text_box_single_line: true}\n"
        "  - {annotation_type: radio, name: c, labels: [x, y], layout: {columns: 1}}\n")
    cfg, errors, _ = load(str(path))
    assert errors == []
    assert [s.kind.multiline for s in cfg.schemes[:2]] == [True, False]
    path.write_text(
        "annotation_task_name: t\ndata_files: [items.jsonl]\nannotation_schemes:\n"
        "  - {annotation_type: multiselect, name: c, labels: [x, Other], "
        "has_free_response: {instruction: ''}}\n"
        "  - {annotation_type: radio, name: d, labels: [x, y], has_free_response: "
        "{instruction: 'Which one?'}}\n"
        "  - {annotation_type: radio, name: e, labels: [x, y], has_free_response: false}\n"
        "  - {annotation_type: likert, name: f, size: 3, has_free_response: true}\n")
    cfg, errors, _ = load(str(path))
    # the free-response box beside a choice is a text scheme of its own (NAME[free_response])
    assert [(s.name, s.annotation_type, s.description) for s in cfg.schemes] == [
        ("c", "multiselect", ""), ("c[free_response]", "text", "Other (please specify)"),
        ("d", "radio", ""), ("d[free_response]", "text", "Which one?"), ("e", "radio", ""),
        ("f", "likert", "")]
    [err] = errors  # upstream has it on radio and multiselect only
    assert err.key == "annotation_schemes[3].has_free_response"
    assert "would be lost. Remove it and add a text scheme for the free response" in err.message


def test_html_in_upstream_instructions_is_shown_as_text_and_validate_says_so(write_config,
                                                                              serve):
    # issue 34, item 12: safe already, now said (upstream renders it; a config may come from
    # elsewhere, so a page never runs markup from it)
    path = write_config("""\
annotation_task_name: html
data_files: [items.jsonl]
annotation_instructions: "Read <b>carefully</b>.<script>alert(1)</script>"
annotation_schemes:
  - {annotation_type: radio, name: s, labels: [a, b]}
""")
    cfg, report = check(path)
    [w] = [w for w in report.warnings if w.key == "annotation_instructions"]
    assert w.message == ("annotation_instructions holds HTML (<b>): upstream Potato renders it, "
                         "this Potato shows it as text, the tags as written (a page never runs "
                         "markup from a config). Write the instructions as plain text.")
    assert w.line == 3
    _, url = serve(path, training=False)
    c = Client(url)
    c.login("ana")
    page = c.get("/annotate").text
    assert ('<div class="instructions">Read &lt;b&gt;carefully&lt;/b&gt;.&lt;script&gt;alert(1)'
            '&lt;/script&gt;</div>') in page


def test_a_type_not_here_is_one_error_naming_it_and_its_keys_are_not_judged(tmp_path):
    (tmp_path / "items.jsonl").write_text('{"id": "a", "text": "t"}\n')
    (tmp_path / "c.yaml").write_text(
        "data_files: [items.jsonl]\nannotation_schemes:\n"
        "  - {annotation_type: video_annotation, name: boxes, tools: [bbox], "
        "zoom_enabled: true, labels: [{name: car}]}\n")
    from potato.project.validation import check
    _, report = check(str(tmp_path / "c.yaml"))
    assert [e.key for e in report.errors] == ["annotation_schemes[0].annotation_type"]
    [err] = report.errors
    assert err.message.startswith("annotation_schemes[0].annotation_type is 'video_annotation', "
                                  "which this Potato does not have (its other keys were not "
                                  "checked); Potato supports radio,")
    # a known type's did-you-mean stays within its own keys (step is a slider's)
    (tmp_path / "c.yaml").write_text(
        "data_files: [items.jsonl]\nannotation_schemes:\n"
        "  - {annotation_type: radio, name: s, labels: [x, y], steps_key: steps}\n")
    _, report = check(str(tmp_path / "c.yaml"))
    [err] = report.errors
    assert "steps_key" in err.message and "Did you mean step" not in err.message
    assert ", step," not in err.message and "min_value" not in err.message


def test_the_migration_report_lists_scheme_and_display_types_not_here(tmp_path, capsys):
    (tmp_path / "items.jsonl").write_text('{"id": "a", "text": "t"}\n')
    (tmp_path / "c.yaml").write_text(
        "data_files: [items.jsonl]\nport: 8000\n"
        "instance_display:\n  fields:\n    - {key: text, type: text}\n"
        "    - {key: v, type: pdf}\n    - {key: w, type: pdf}\n    - {key: t, type: trace}\n"
        "annotation_schemes:\n"
        "  - {annotation_type: video_annotation, name: a, tools: [bbox]}\n"
        "  - {annotation_type: video_annotation, name: b}\n"
        "  - {annotation_type: card_sort, name: c}\n"
        "  - {annotation_type: radio, name: d, labels: [x, y]}\n")
    assert main(["validate", str(tmp_path / "c.yaml")]) == 1
    out = capsys.readouterr().out
    assert ("  blocking (4): instance_display type pdf (2 fields), instance_display type "
            "trace (1 field), annotation_type video_annotation (2 schemes), annotation_type "
            "card_sort (1 scheme)\n") in out, out
    assert "other error(s)" not in out  # each error is one of those blockers
    assert "What each upstream key does here" not in out
    assert main(["validate", "--upstream", str(tmp_path / "c.yaml")]) == 1
    out = capsys.readouterr().out
    assert "What each upstream key does here:\n  port (implemented): the port, as server.port\n" \
        in out, out
    assert "  instance_display type pdf: not here; its error above says what to do" in out


def test_per_turn_ratings_and_a_span_target_elsewhere_are_refused_not_dropped(tmp_path):
    (tmp_path / "items.jsonl").write_text('{"id": "a", "text": "t", "answer": "u"}\n')
    (tmp_path / "c.yaml").write_text(
        "data_files: [items.jsonl]\n"
        "instance_display:\n  fields:\n"
        "    - {key: text, type: dialogue, display_options: {show_turn_numbers: true, "
        "per_turn_ratings: {speakers: [Agent], schema_name: q, scheme: {type: likert}}}}\n"
        "    - {key: answer, type: text, span_target: true}\n"
        "annotation_schemes:\n  - {annotation_type: span, name: s, labels: [x]}\n")
    cfg, errors, _ = load(str(tmp_path / "c.yaml"))
    assert [e.key for e in errors] == [
        "instance_display.fields[0].display_options.per_turn_ratings",
        "instance_display.fields[1].span_target", "instance_display.fields[0].type"], errors
    assert "its scheme would not be shown, nor its answers kept" in errors[0].message
    assert errors[1].message == (
        "instance_display.fields[1].span_target: spans here mark the item's text, the field "
        "item_properties.text_key names ('text'), not 'answer'. Set item_properties.text_key: "
        "answer (spans then mark it), or remove span_target.")
    assert upstream_report.report_lists(cfg.upstream)["blocking"] == [
        "display_options.per_turn_ratings (1 field)",
        "spans on a field they cannot mark (2 fields)"]
    # the span target that is the text: fine, and other display options are looks
    (tmp_path / "c.yaml").write_text(
        "data_files: [items.jsonl]\nitem_properties: {text_key: answer}\n"
        "instance_display:\n  fields:\n"
        "    - {key: text, type: dialogue, display_options: {show_turn_numbers: true}}\n"
        "    - {key: answer, type: text, span_target: true}\n"
        "annotation_schemes:\n  - {annotation_type: span, name: s, labels: [x]}\n")
    _, errors, _ = load(str(tmp_path / "c.yaml"))
    assert errors == []


def span_target_config(tmp_path, fields, schemes):
    (tmp_path / "items.jsonl").write_text('{"id": "a", "text": "t", "code": "x = 1"}\n')
    (tmp_path / "c.yaml").write_text(
        "data_files: [items.jsonl]\ninstance_display:\n  fields:\n" + fields
        + "annotation_schemes:\n" + schemes)
    _, errors, warnings = load(str(tmp_path / "c.yaml"))
    return [e.message for e in errors], [w.message for w in warnings]


def test_a_span_target_without_a_span_scheme_changes_nothing_and_says_so(tmp_path):
    radio = "  - {annotation_type: radio, name: r, labels: [a, b]}\n"
    errors, warnings = span_target_config(
        tmp_path, "    - {key: code, type: code, span_target: true}\n"
                  "    - {key: text, type: text, span_target: true}\n", radio)
    assert errors == []
    assert ("instance_display.fields[0].span_target: no scheme of this project marks spans, so "
            "span_target (on 'code', 'text') changes nothing. Remove it, or add a span "
            "scheme.") in warnings
    span = "  - {annotation_type: span, name: s, labels: [x]}\n"
    errors, _ = span_target_config(
        tmp_path, "    - {key: code, type: code, span_target: true}\n", span)
    assert [e.split(":")[0] for e in errors] == ["instance_display.fields[0].span_target"]
    assert "not 'code'. Set item_properties.text_key: code" in errors[0]


def test_spans_mark_plain_text_a_code_field_but_not_a_document(tmp_path):
    span = "  - {annotation_type: span, name: s, labels: [x]}\n"
    errors, _ = span_target_config(
        tmp_path, "    - {key: text, type: code, span_target: true}\n", span)
    assert errors == []
    errors, _ = span_target_config(
        tmp_path, "    - {key: text, type: document, span_target: true}\n", span)
    assert errors == ["instance_display.fields[0].span_target: spans here mark plain text, and "
                      "field 'text' is shown as document. Show it as text (type: text), or mark "
                      "spans on another field."]
    # Review 36.6: without span_target too: the page would have no text to mark
    for kind in ("document", "agent_trace", "dialogue"):
        errors, _ = span_target_config(
            tmp_path, "    - {key: code, type: text}\n    - {key: text, type: %s}\n" % kind,
            span)
        assert errors == ["instance_display.fields[1].type: field 'text' is the text spans "
                          "mark (item_properties.text_key), and it is shown as %s, where "
                          "nothing can be marked. Show it as text (type: text), or set "
                          "item_properties.text_key to the field spans should mark." % kind]
    errors, _ = span_target_config(
        tmp_path, "    - {key: text, type: document}\n",
        "  - {annotation_type: radio, name: r, labels: [a, b]}\n")
    assert errors == []  # nothing marks spans: a document is fine


def test_names_that_differ_in_case_only_clash_in_upstreams_folders(up, tmp_path, capsys):
    # Review 39.12: Alice/ and alice/ are one folder on macOS and Windows
    path = str(up / "01-sentiment-radio.yaml")
    labels = tmp_path / "l.jsonl"
    labels.write_text(json.dumps({"id": "r0", "sentiment": "positive"}) + "\n")
    for name in ("Alice", "alice"):
        assert main(["annotations", "import", path, str(labels), "--annotator", name]) == 0
    capsys.readouterr()
    assert main(["annotations", "export", path, "--format", "upstream", "-o",
                 str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "the annotators 'Alice' and 'alice' would both be exported to the folder" in err
