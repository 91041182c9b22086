"""Per-step rewards of a trace (potato/schemes/steps.py): upstream's process_reward block
loads with its keys, bad configs and items are named, a value is checked with hostile input
(wrong rewards, a correct step after a wrong one in first_error, neutral where it is not
allowed, bools, NaN, too many steps, wrong shapes) and against the item's steps, the form's
fields are read, the page's controls (escaped), export cells in our format and upstream's,
aggregation (the majority of each step), and training's refusal."""

import json

import pytest

from potato.config.settings import load
from potato.labels import aggregate
from potato.labels.annotations import LabelError, check_label
from potato.schemes import kind_class
from potato.schemes.steps import MAX_STEPS, step_text
from potato.training.remote import trainers

PRM = """\
data_files: [items.jsonl]
annotation_schemes:
  - annotation_type: process_reward
    name: step_rewards
    description: Mark the first incorrect step
    steps_key: structured_turns
    mode: first_error
    inline_with_trace: true
"""
STEPS = [{"role": "user", "content": "Fix <b>login</b>"},
         {"role": "assistant", "action": "Read login.py", "content": "ignored"},
         "run the tests", {"tool": "Edit"}]
ITEM = {"id": "r1", "text": "task", "structured_turns": STEPS}


def load_with(tmp_path, config, items=(ITEM,)):
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    (tmp_path / "c.yaml").write_text(config)
    return load(str(tmp_path / "c.yaml"))


def scheme_of(tmp_path, config=PRM):
    cfg, errors, warnings = load_with(tmp_path, config)
    assert errors == [], [e.message for e in errors]
    return cfg.schemes[0]


def errors_of(tmp_path, config):
    return " | ".join(e.message for e in load_with(tmp_path, config)[1])


PER_STEP = PRM.replace("mode: first_error", "mode: per_step\n    allow_neutral: true\n"
                       "    reward_labels: {correct: Valid, incorrect: '<i>Flawed</i>'}")


def test_upstreams_blocks_load(tmp_path):
    s = scheme_of(tmp_path)
    assert s.annotation_type == "process_reward" and s.labels == [] and s.kind.mode == \
        "first_error"
    assert s.kind.item_fields() == ("structured_turns",) and s.kind.script == "steps.js"
    p = scheme_of(tmp_path, PER_STEP)
    assert p.kind.allow_neutral and p.kind.words["correct"] == "Valid"
    assert "Valid, <i>Flawed</i>, Neutral" in p.kind.summary()
    for key in ("ai_prelabel", "require_verification"):
        assert scheme_of(tmp_path, PRM + "    %s: false\n" % key).kind.mode == "first_error"


@pytest.mark.parametrize("change,message", [
    (("mode: first_error", "mode: best_of"), "mode is 'best_of'; give first_error"),
    (("mode: first_error", "allow_neutral: true"), "a neutral step is a per_step judgment"),
    (("inline_with_trace: true", "ai_prelabel: true"),
     "ai_prelabel: true asks an external model"),
    (("inline_with_trace: true", "require_verification: true"),
     "remove require_verification (or set it to false)"),
    (("inline_with_trace: true", "reward_labels: {good: Fine}"), "good"),
    (("inline_with_trace: true", "labels: [a, b]"), "takes no labels"),
    (("inline_with_trace: true", "inline_with_trace: sometimes"), "inline_with_trace"),
])
def test_bad_blocks_are_named(tmp_path, change, message):
    assert message in errors_of(tmp_path, PRM.replace(*change))


@pytest.mark.parametrize("turns,message", [
    (None, "has no 'structured_turns' (steps_key of process_reward scheme 'step_rewards')"),
    ("one step", "as a str, not a list of the trace's steps"),
    ({"0": "a"}, "as a dict, not a list"),
    ([], "has no steps in"),
    (["s"] * (MAX_STEPS + 1), "more than the 500 a scheme lists"),
])
def test_an_item_without_a_list_of_steps_is_named_at_load(tmp_path, turns, message):
    item = {"id": "r1", "text": "task"}
    if turns is not None:
        item["structured_turns"] = turns
    (tmp_path / "items.jsonl").write_text(json.dumps(item) + "\n")
    (tmp_path / "c.yaml").write_text(PRM)
    from potato.project.data import DataError, load_items
    cfg, errors, _ = load(str(tmp_path / "c.yaml"))
    text = " | ".join(e.message for e in errors)
    if not text:
        with pytest.raises(DataError) as e:
            load_items(cfg)
        text = str(e.value)
    assert message in text


def test_values_are_lists_of_rewards(tmp_path):
    s, p = scheme_of(tmp_path), scheme_of(tmp_path, PER_STEP)
    assert check_label(s, [1, 1, -1, -1]) == [1, 1, -1, -1]
    assert check_label(s, [1, 1, 1, 1]) == [1, 1, 1, 1]  # no step is wrong
    assert check_label(p, [1, 0, None, -1]) == [1, 0, None, -1]
    for empty in (None, "", [], [None, None]):
        assert check_label(p, empty) is None


@pytest.mark.parametrize("per_step,value,message", [
    (False, [1, -1, 1], "has a correct step after a wrong one"),
    (False, [1, None], "step 2's reward is None; each is one of 1, -1"),
    (False, [0, 1], "step 1's reward is 0"),
    (True, [1, 2], "step 2's reward is 2; each is one of 1, 0, -1, None"),
    (True, [True], "step 1's reward is True"),
    (True, [1.0], "step 1's reward is 1.0"),
    (True, [float("nan")], "reward is nan"),
    (True, ["1"], "reward is '1'"),
    (True, [[1]], "reward is [1]"),
    (True, "<b>1,1</b>", "takes a list of at most 500 step rewards"),
    (True, {"steps": [1]}, "takes a list"),
    (True, 3, "not 3"),
    (True, [1] * (MAX_STEPS + 1), "takes a list of at most 500"),
])
def test_hostile_values_are_refused_naming_the_scheme(tmp_path, per_step, value, message):
    s = scheme_of(tmp_path, PER_STEP if per_step else PRM)
    with pytest.raises(LabelError) as e:
        check_label(s, value)
    assert "scheme 'step_rewards' (process_reward)" in str(e.value) and message in str(e.value)


def test_neutral_needs_allow_neutral(tmp_path):
    s = scheme_of(tmp_path, PRM.replace("first_error", "per_step"))
    with pytest.raises(LabelError, match="reward is 0; each is one of 1, -1, None"):
        check_label(s, [1, 0])


def test_a_value_must_have_one_reward_per_step_of_the_item(tmp_path):
    s = scheme_of(tmp_path)
    assert s.kind.fits([1, -1, -1, -1], ITEM) == [1, -1, -1, -1]
    assert s.kind.fits(None, ITEM) is None
    for wrong in ([1, -1], [1] * 5):
        with pytest.raises(LabelError, match="the item has 4 steps in 'structured_turns'"):
            s.kind.fits(wrong, ITEM)


def test_the_form_holds_the_choice_or_the_hidden_list(tmp_path):
    s, p = scheme_of(tmp_path), scheme_of(tmp_path, PER_STEP)
    assert s.kind.from_form([]) is None and s.kind.from_form([""]) is None
    assert s.kind.from_form(["2/4"]) == [1, 1, -1, -1]
    assert s.kind.from_form(["4/4"]) == [1, 1, 1, 1]
    for bad in ("5/4", "-1/4", "x", "2/4/4", "99999999999/9"):
        with pytest.raises(LabelError):
            check_label(s, s.kind.from_form([bad]))
    assert p.kind.from_form(["[1, null, 0, -1]"]) == [1, None, 0, -1]
    assert p.kind.from_form([""]) is None
    for bad in ("[1, 2]", "{", "[" * 100000):
        with pytest.raises(LabelError):
            check_label(p, p.kind.from_form([bad]))


def test_the_page_lists_each_step_with_its_controls_escaped(tmp_path):
    s = scheme_of(tmp_path)
    page = s.kind.fieldset(None, 1, ITEM)
    assert page.count('type="radio" name="label:step_rewards"') == 5
    assert 'value="0/4"' in page and 'value="4/4" aria-label="No step is wrong"' in page
    assert "Fix &lt;b&gt;login&lt;/b&gt;" in page and "<b>" not in page
    assert "Read login.py" in page and "run the tests" in page and "style=" not in page
    assert "<script" not in page
    shown = s.kind.fieldset([1, -1, -1, -1], 1, ITEM)
    assert 'value="1/4" aria-label="Step 2 is the first wrong step" checked' in shown
    p = scheme_of(tmp_path, PER_STEP)
    page = p.kind.fieldset([1, None, 0, -1], 1, ITEM)
    assert page.count('name="step:step_rewards:0"') == 3  # correct, wrong, neutral
    assert "&lt;i&gt;Flawed&lt;/i&gt;" in page
    assert '<input type="hidden" name="label:step_rewards" value="[1, null, 0, -1]">' in page
    assert 'name="step:step_rewards:2" value="0" aria-label="Step 3: Neutral" checked' in page
    assert "has no steps" in p.kind.fieldset(None, 1, {})


def test_a_steps_text_is_short():
    assert step_text({"action": "go", "content": "x"}, "action") == "go"
    assert step_text({"content": " a\n b "}, "action") == "a b"
    assert step_text({"tool": "Edit"}, "action") == '{"tool": "Edit"}'
    assert step_text(7, "action") == "7"
    assert len(step_text("x" * 10000, "action")) == 200


def test_cells_and_upstreams_entries_round_trip(tmp_path):
    s, p = scheme_of(tmp_path), scheme_of(tmp_path, PER_STEP)
    assert s.kind.cell([1, -1]) == "[1, -1]" and s.kind.cell(None) == ""
    entry = s.kind.upstream_cell([1, -1])
    assert json.loads(entry["step_rewards"]) == {
        "steps": [{"index": 0, "reward": 1}, {"index": 1, "reward": -1}], "mode": "first_error"}
    assert check_label(s, s.kind.from_upstream_cell(entry)) == [1, -1]
    entry = p.kind.upstream_cell([1, None, 0])
    assert json.loads(entry["step_rewards"])["steps"][1] == {"index": 1, "reward": None}
    assert check_label(p, p.kind.from_upstream_cell(entry)) == [1, None, 0]
    plain = scheme_of(tmp_path, PRM.replace("first_error", "per_step"))
    assert json.loads(plain.kind.upstream_cell([1, None])["step_rewards"])["steps"][1][
        "reward"] == 0  # upstream's unmarked step without neutral
    assert plain.kind.from_upstream_cell(plain.kind.upstream_cell([1, None])) == [1, None]
    for bad in ({"step_rewards": "{"}, {"step_rewards": '{"steps": 3}'},
                {"step_rewards": '{"steps": [{"reward": 5}]}'}):
        with pytest.raises(LabelError):
            check_label(p, p.kind.from_upstream_cell(bad))


def test_annotators_rewards_aggregate_step_by_step():
    votes = {"r1": {"a": [1, -1, -1], "b": [1, 1, -1], "c": [1, 1, 1]},
             "r2": {"a": [1, None], "b": [-1, None]}, "r3": {},
             "r4": {"a": [1, 1], "b": [1, 1], "c": [1, 1, 1]}}
    result = aggregate.aggregate("process_reward", votes)
    assert result.method == "majority_each"
    assert result.labels == {"r1": [1, 1, -1], "r2": None, "r3": None, "r4": [1, 1]}
    assert aggregate.aggregate("process_reward", votes, "consensus").note
    assert not kind_class("process_reward").one_label


def test_no_trainer_trains_step_rewards():
    assert trainers.annotate_only("process_reward").startswith(
        "no trainer trains process_reward schemes")
    assert kind_class("process_reward").ranks_by is None
