"""A fifth kind of backend, defined in this test module alone (as its own module would be), with
its own config keys, rules and "ran on" words, validates, checks, runs a training through the
real queue and API and reports: proof that a new backend is one module and one registry line
(``potato.training.backends.TYPES``), not the config parser, the queue, the claim, the pages or
the API (docs/backends/writing-a-backend.md)."""

import json
import os
import sys
from dataclasses import dataclass
from typing import ClassVar, Dict, Optional

import pytest

from potato.config.backends import key, number, text
from potato.training import backends
from potato.training.backends import Outcome, RunContext, TrainingBackend
from potato.training.backends.ship import SOURCE_ROOT
from potato.training.remote import protocol, supervise
from tests.helpers import Client
from tests.helpers import KEY, main, make_project, start_run, wait_run


# -- the toy kind's module ------------------------------------------------------------------------

@dataclass
class ToyOptions:
    """The toy's own keys: the burrow it sleeps in (required) and the naps it takes first."""

    burrow: Optional[str] = key(text)
    naps: int = key(number(minimum=0, maximum=9, integer=True), 2)

    hints: ClassVar[Dict[str, str]] = {
        "host": "A toy has no host: it sleeps in a burrow (set burrow instead)."}

    def rules(self, b, bpath, where, err, warn):
        if not self.burrow:
            err(bpath, "%s is a toy backend without burrow. Set burrow to where the toy "
                       "sleeps." % where, b.name)
        elif self.naps == 0:
            warn(bpath + ("naps",), "%s.naps is 0: a toy that never naps is cranky" % where,
                 b.name)


class ToyBackend(TrainingBackend):
    """Runs the worker as a child of the server, like local, but as a remote host would see
    it: the held-out labels stay on the server, and it names itself in the runs table."""

    type = "toy"
    Options = ToyOptions

    def refusal(self):
        if os.environ.get("TOY_ASLEEP"):
            return "the toy backend %s is asleep; wake it first" % self.name
        return None

    def queued_step(self, busy):
        return "waiting for the toy %s to wake up" % self.name

    @property
    def label(self):
        return "%s (a toy)" % self.name

    def ran_on(self, where):
        return "%s, in the burrow %s after %d naps" % (self.name, self.options.burrow,
                                                       self.options.naps)

    def execute(self, ctx: RunContext) -> Outcome:
        ctx.set_step("the toy starts the worker")
        env = protocol.worker_env(os.environ, SOURCE_ROOT, 1)
        argv = [sys.executable, "-m", "potato.training.worker", "--spec", ctx.paths.spec]
        how = supervise.Supervision(should_cancel=ctx.cancel.is_set, max_wall_seconds=60,
                                    grace_seconds=2)
        result = supervise.run_worker(argv, env, ctx.paths.stderr, ctx.on_event, how,
                                      cwd=ctx.paths.root)
        status, error = supervise.explain(result, how)
        return Outcome(status, error, ran_on=self.name)

    def check(self):
        return self.report(ok=True, lines=["the toy in the burrow %s is always ready"
                                           % self.options.burrow])


# -- its one registry line ----------------------------------------------------------------------

@pytest.fixture
def toy_kind(monkeypatch):
    monkeypatch.setitem(backends.TYPES, "toy", ToyBackend)


def toy_project(tmp_path, keys="burrow: under-the-oak", labels=False):
    return make_project(tmp_path, model_training="  backends:\n    toy-box: {type: toy, %s}\n"
                                                 % keys, labels=labels)


def validate(path, capsys):
    code = main(["validate", path])
    return code, capsys.readouterr().out


def test_potato_validate_reads_the_toys_own_keys(tmp_path, toy_kind, capsys):
    code, out = validate(toy_project(tmp_path), capsys)
    assert code == 0, out

    code, out = validate(toy_project(tmp_path, "burow: under-the-oak, naps: 12"), capsys)
    assert code == 1
    assert ("model_training.backends.toy-box.burow is not a key a toy backend accepts. Did you "
            "mean burrow? Valid keys: type, description, burrow, naps.") in out
    assert "model_training.backends.toy-box.naps must be between 0 and 9, not 12." in out
    assert ("model_training.backends.toy-box is a toy backend without burrow. Set burrow to "
            "where the toy sleeps.") in out

    code, out = validate(toy_project(tmp_path, "burrow: b, host: gpu1, naps: 0"), capsys)
    assert code == 1
    assert ("model_training.backends.toy-box.host is not a key a toy backend accepts. A toy has "
            "no host: it sleeps in a burrow (set burrow instead).") in out
    assert "warning:" in out and "naps is 0: a toy that never naps is cranky" in out


def test_other_kinds_do_not_take_the_toys_keys(tmp_path, toy_kind, capsys):
    code, out = validate(make_project(tmp_path, model_training=(
        "  backends:\n    gpu: {type: ssh, host: gpu1, burrow: b}\n"), labels=False), capsys)
    assert code == 1
    assert "model_training.backends.gpu.burrow is not a key an ssh backend accepts." in out


def test_without_its_registry_line_the_kind_is_unknown(tmp_path, capsys):
    code, out = validate(toy_project(tmp_path), capsys)
    assert code == 1
    assert "model_training.backends.toy-box.type is 'toy', which is not a backend type." in out


def test_potato_training_check_asks_the_toy(tmp_path, toy_kind, capsys):
    path = toy_project(tmp_path, "burrow: under-the-oak")
    capsys.readouterr()
    assert main(["training", "check", path, "toy-box", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["label"] == "toy-box (a toy)"
    assert "the toy in the burrow under-the-oak is always ready" in report["lines"]


def test_a_fifth_backend_trains_through_the_real_queue_and_api(tmp_path, serve, toy_kind,
                                                               monkeypatch):
    cfg = toy_project(tmp_path, labels=True)
    service, url = serve(cfg)
    c = Client(url)
    status, listed = c.json("GET", "/admin/training/api/backends", headers={"X-API-Key": KEY})
    assert status == 200
    toy = next(b for b in listed["backends"] if b["name"] == "toy-box")
    assert toy["type"] == "toy" and toy["label"] == "toy-box (a toy)"
    status, report = c.json("POST", "/admin/training/api/backends/toy-box/check",
                            headers={"X-API-Key": KEY})
    assert status == 200 and report["ok"]
    assert report["lines"] == ["the toy in the burrow under-the-oak is always ready"]

    monkeypatch.setenv("TOY_ASLEEP", "1")  # the backend's own refusal reaches the API
    status, out = c.json("POST", "/admin/training/api/runs", headers={"X-API-Key": KEY},
                         json_body={"trainer": "text-naive-bayes", "schemas": ["sentiment"],
                                    "backend": "toy-box"})
    assert status == 409 and out["error"] == "the toy backend toy-box is asleep; wake it first"
    monkeypatch.delenv("TOY_ASLEEP")

    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="toy-box")
    run = wait_run(c, run_id, timeout=120)
    assert run["status"] == "success", run
    assert run["ran_on"] == "toy-box, in the burrow under-the-oak after 2 naps"  # naps' default
    assert run["holdout"]["n"] > 0  # scored on the server's held-out labels
    paths = service.manager.paths(run_id)
    assert os.path.getsize(paths.heldout) > 0  # which never went into the bundle
    log = open(paths.log).read()
    assert "waiting for the toy toy-box to wake up" in log
    assert "the toy starts the worker" in log
