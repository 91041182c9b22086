"""Pure pieces of the training engine: splits, votes, bundles, params, events, scoring."""

import io
import json
import os
import tarfile

import pytest

from potato.training.remote import bundle
from potato.training.remote import protocol as events
from potato.training.remote import trainers
from potato.training.remote import worker
from potato.training.reports.report import holdout_report
from potato.training.remote.trainers.calibrate import fit_platt, threshold_for
from potato.training.remote.trainers.naive_bayes import Model


def test_splits_are_stable_and_follow_the_fractions():
    ids = ["item-%d" % n for n in range(20000)]
    first = [bundle.split_of(i, 7, (0.7, 0.15, 0.15)) for i in ids]
    assert first == [bundle.split_of(i, 7, (0.7, 0.15, 0.15)) for i in ids]
    share = {s: first.count(s) / len(ids) for s in ("train", "val", "test")}
    assert abs(share["train"] - 0.7) < 0.02 and abs(share["test"] - 0.15) < 0.02
    other = [bundle.split_of(i, 8, (0.7, 0.15, 0.15)) for i in ids]
    assert other != first


@pytest.mark.parametrize("votes,expected", [
    (["a"], "a"), (["a", "b", "a"], "a"), (["a", "b"], None), ([], None),
    ([["x", "y"], ["x", "y"], ["x"]], ["x", "y"]), ([["x"], ["y"]], None),
])
def test_majority_vote(votes, expected):
    assert bundle.majority(votes) == expected


def test_bundle_counts_ties_unlabeled_and_digest(tmp_path):
    items = [("a", "one"), ("b", "two"), ("c", "three"), ("d", "four")]
    labels = {"a": {"s": ["x"]}, "b": {"s": ["x", "y"]}, "c": {"s": ["y", "y", "x"]}}
    schemas = {"s": {"type": "radio", "labels": ["x", "y"]}}
    m = bundle.build(str(tmp_path / "b"), items, labels, schemas, include_unlabeled=True)
    assert m["ties_skipped"] == {"s": 1}
    assert m["counts"]["unlabeled"] == 1
    assert sum(m["counts"].values()) == 3  # b tied: neither training data nor unlabeled
    b = bundle.read(str(tmp_path / "b"))
    assert {it["id"]: it["labels"] for it in b.items}["c"] == {"s": "y"}
    with open(tmp_path / "b" / "items.jsonl", "a") as f:
        f.write('{"id": "z", "text": "smuggled", "split": "train", "labels": {"s": "x"}}\n')
    with pytest.raises(bundle.BundleError, match="does not match its manifest's digest"):
        bundle.read(str(tmp_path / "b"))


def test_pack_and_safe_extract(tmp_path):
    bundle.build(str(tmp_path / "b"), [("a", "t")], {"a": {"s": ["x"]}},
                 {"s": {"type": "radio", "labels": ["x"]}})
    digest = bundle.pack(str(tmp_path / "b"), str(tmp_path / "b.tar.gz"))
    assert digest == bundle.file_sha256(str(tmp_path / "b.tar.gz"))
    bundle.safe_extract(str(tmp_path / "b.tar.gz"), str(tmp_path / "out"))
    assert bundle.read(str(tmp_path / "out")).items[0]["id"] == "a"


@pytest.mark.parametrize("name,kind", [("../evil", "file"), ("/etc/evil", "file"),
                                       ("link", "symlink")])
def test_safe_extract_refuses_escapes(tmp_path, name, kind):
    archive = tmp_path / "bad.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo(name)
        if kind == "symlink":
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tar.addfile(info)
        else:
            data = b"x"
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(bundle.BundleError, match="refusing"):
        bundle.safe_extract(str(archive), str(tmp_path / "out"))
    assert not (tmp_path / "evil").exists()


def test_params_are_resolved_and_checked():
    info = trainers.get("text-naive-bayes")
    assert trainers.resolve_params(info, {"ngrams": "3", "calibrate": "false"}) == {
        "alpha": 1.0, "ngrams": 3, "min_count": 1, "calibrate": False}
    with pytest.raises(trainers.ParamError, match="unknown param foo"):
        trainers.resolve_params(info, {"foo": 1})
    with pytest.raises(trainers.ParamError, match="calibrate must be true or false"):
        trainers.resolve_params(info, {"calibrate": "maybe"})


def test_listing_trainers_imports_no_trainer_module():
    import subprocess
    import sys

    code = ("import sys; from potato.training.remote import trainers; "
            "[t.missing_packages() for t in trainers.all_trainers().values()]; "
            "mods = {t.module for t in trainers.all_trainers().values()}; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'transformers', 'peft') or m in mods))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert r.stdout.strip() == "[]", r.stderr


def test_event_parsing():
    assert events.parse('{"type": "log", "message": "x"}')["message"] == "x"
    assert events.parse("Some warning printed by a library") is None
    assert events.parse('{"type": "nonsense"}') is None
    assert events.parse('{"type": "log"') is None
    assert events.describe_exit(-9) == "the training process was killed (probably out of memory)"
    assert events.describe_exit(65) == "a package the trainer needs is missing"


def test_worker_bad_spec_exit_code(tmp_path):
    out = io.StringIO()
    code = worker.run(str(tmp_path / "missing.json"), events.Emitter(out))
    assert code == events.EXIT_BAD_SPEC
    err = json.loads(out.getvalue().splitlines()[-1])
    assert err["type"] == "error" and err["kind"] == "bad_spec"
    assert "cannot be read" in err["message"]


def test_score_accuracy_and_macro_f1():
    preds = [{"id": i, "scheme": "s", "split": "test", "label": lab}
             for i, lab in [("1", "x"), ("2", "x"), ("3", "y"), ("4", "y")]]
    gold = {"1": {"s": "x"}, "2": {"s": "y"}, "3": {"s": "y"}, "4": {"s": "y"}}
    items = [{"id": i, "split": "test", "labels": labels} for i, labels in gold.items()]
    out = holdout_report(preds, items, {"s": {"type": "radio", "labels": ["x", "y"]}})
    # x: tp1 fp1 fn0 -> f1 2/3; y: tp2 fp0 fn1 -> f1 0.8
    assert (out["n"], out["accuracy"], out["macro_f1"]) == (4, 0.75,
                                                             round((2 / 3 + 0.8) / 2, 4))


def test_naive_bayes_learns_and_calibrates():
    train = [("good great fun", "pos"), ("great film", "pos"), ("bad awful", "neg"),
             ("awful boring", "neg")] * 10
    m = Model(["pos", "neg"], 1.0, 2).fit(train, 1)
    assert m.proba("good fun")[0] > 0.5 and m.proba("boring bad")[1] > 0.5
    m.calibrate([("good", "pos"), ("bad", "neg"), ("great", "neg"), ("awful", "pos")])
    assert m.temperature > 1  # half the held-out labels contradict the model: soften it


def test_platt_and_threshold():
    import math

    pairs = [(2.0, 1)] * 30 + [(2.0, 0)] * 10 + [(-1.0, 0)] * 30 + [(-1.0, 1)] * 10
    a, b = fit_platt(pairs)
    p_hi = 1 / (1 + math.exp(-(a * 2 + b)))
    assert abs(p_hi - 0.75) < 0.01
    scored = [(0.9, 1)] * 9 + [(0.9, 0)] + [(0.6, 1)] * 5 + [(0.6, 0)] * 5
    assert threshold_for(scored, 0.9) == (0.9, 0.9, 0.5)
    assert threshold_for(scored, 0.95) is None


def test_four_bit_line_needs_the_packages_and_a_cuda_gpu():
    from potato.training.core.devices import four_bit_line

    assert "load_in_4bit can run" in four_bit_line("h", [], True)
    assert "but no CUDA GPU: load_in_4bit cannot run there" in four_bit_line("h", [], False)
    assert four_bit_line("h", ["bitsandbytes"], True).startswith(
        "bitsandbytes missing on h: hf-llm-classification's load_in_4bit cannot run")


ODD_BREAKS = "a\u2028b\u2029c\x85d\x0be\x0cf\x1cg\x1dh\x1ei"


def test_bundle_items_with_unicode_line_breaks_read_back(tmp_path):
    # Review 23.1: splitlines() broke an item holding U+2028 or U+0085 into two lines.
    items = [("a", ODD_BREAKS), ("b", "plain")]
    labels = {"a": {"s": ["x"]}, "b": {"s": ["y"]}}
    schemas = {"s": {"type": "radio", "labels": ["x", "y"]}}
    bundle.build(str(tmp_path / "b"), items, labels, schemas, fractions=(1.0, 0.0, 0.0))
    assert [it["text"] for it in bundle.read(str(tmp_path / "b")).items] == [ODD_BREAKS, "plain"]
    # A bundle written by an older server (raw, not escaped) reads too.
    raw = "".join(json.dumps({"id": i, "text": t, "split": "train", "labels": {"s": "x"}},
                             ensure_ascii=False) + "\n" for i, t in items).encode("utf-8")
    (tmp_path / "b" / "items.jsonl").write_bytes(raw)
    assert [it["text"] for it in bundle.read(str(tmp_path / "b"), verify=False).items] == [
        ODD_BREAKS, "plain"]


def test_a_trainer_plugin_that_cannot_load_leaves_the_built_in_trainers_and_is_named(monkeypatch):
    from potato.training.remote import trainers
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", "no_such_potato_plugin, ")
    assert set(trainers.all_trainers()) == set(trainers.REGISTRY)
    said = trainers.unknown_trainer("plugin-trainer")
    assert said.startswith("Unknown trainer 'plugin-trainer'.")
    assert "no_such_potato_plugin" in said and "could not be imported" in said
    assert "$POTATO_TRAINER_PLUGINS" in said


def test_an_unknown_trainer_name_is_quoted_short():
    from potato.training.remote import trainers
    said = trainers.unknown_trainer("x" * 200_000)
    assert len(said) < 2000 and "x" * 80 + "..." in said
