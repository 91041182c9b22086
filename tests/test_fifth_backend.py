"""A fifth kind of backend, defined in this test module alone, runs a training through the real
queue and API: proof that a new backend touches its own class and two registry lines (the
config's keys and the backend class), not the queue, the claim, the pages or the API
(docs/backends/writing-a-backend.md)."""

import os
import sys

import pytest

from potato import config_backends
from potato.training import backends
from potato.training.backends import Outcome, RunContext, TrainingBackend
from potato.training.backends.ship import SOURCE_ROOT
from potato.training.remote import protocol, supervise
from tests.helpers import Client
from tests.helpers import KEY, make_project, start_run, wait_run


class ToyBackend(TrainingBackend):
    """Runs the worker as a child of the server, like local, but as a remote host would see
    it: the held-out labels stay on the server, and it names itself in the runs table."""

    type = "toy"

    def refusal(self):
        if os.environ.get("TOY_ASLEEP"):
            return "the toy backend %s is asleep; wake it first" % self.name
        return None

    def queued_step(self, busy):
        return "waiting for the toy %s to wake up" % self.name

    @property
    def label(self):
        return "%s (a toy)" % self.name

    def execute(self, ctx: RunContext) -> Outcome:
        ctx.set_step("the toy starts the worker")
        env = protocol.worker_env(os.environ, SOURCE_ROOT, 1)
        argv = [sys.executable, "-m", "potato.training.worker", "--spec", ctx.paths.spec]
        result = supervise.run_worker(argv, env, ctx.paths.stderr, ctx.on_event,
                                      should_cancel=ctx.cancel.is_set, max_wall_seconds=60,
                                      grace_seconds=2, cwd=ctx.paths.root)
        status, error = supervise.explain(result, 60, 2, None)
        return Outcome(status, error, ran_on=self.name)

    def check(self):
        return self.report(ok=True, lines=["the toy is always ready"])


@pytest.fixture
def toy_kind(monkeypatch):
    monkeypatch.setitem(config_backends.BACKEND_KEYS, "toy", ("type", "description"))
    monkeypatch.setitem(backends.TYPES, "toy", ToyBackend)


def test_a_fifth_backend_trains_through_the_real_queue_and_api(tmp_path, serve, toy_kind,
                                                               monkeypatch):
    cfg = make_project(tmp_path, model_training="  backends:\n    toy-box: {type: toy}\n")
    service, url = serve(cfg)
    c = Client(url)
    status, listed = c.json("GET", "/admin/training/api/backends", headers={"X-API-Key": KEY})
    assert status == 200
    toy = next(b for b in listed["backends"] if b["name"] == "toy-box")
    assert toy["type"] == "toy" and toy["label"] == "toy-box (a toy)"
    status, report = c.json("POST", "/admin/training/api/backends/toy-box/check",
                            headers={"X-API-Key": KEY})
    assert status == 200 and report["ok"] and report["lines"] == ["the toy is always ready"]

    monkeypatch.setenv("TOY_ASLEEP", "1")  # the backend's own refusal reaches the API
    status, out = c.json("POST", "/admin/training/api/runs", headers={"X-API-Key": KEY},
                         json_body={"trainer": "text-naive-bayes", "schemas": ["sentiment"],
                                    "backend": "toy-box"})
    assert status == 409 and out["error"] == "the toy backend toy-box is asleep; wake it first"
    monkeypatch.delenv("TOY_ASLEEP")

    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], backend="toy-box")
    run = wait_run(c, run_id, timeout=120)
    assert run["status"] == "success", run
    assert run["ran_on"].startswith("toy-box (toy)")
    assert run["holdout"]["n"] > 0  # scored on the server's held-out labels
    paths = service.manager.paths(run_id)
    assert os.path.getsize(paths.heldout) > 0  # which never went into the bundle
    log = open(paths.log).read()
    assert "waiting for the toy toy-box to wake up" in log
    assert "the toy starts the worker" in log
