"""Shared helpers for training tests: a project made from the bundled example, and waiting."""

import json
import os
import shutil
import time

from potato.cli import main
from tests.conftest import EXAMPLE

KEY = "test-admin-key-0123456789"
PLUGINS = "tests.plugins.fake_trainers"


def make_project(tmp_path, model_training="", top="", labels=True):
    """The example's 2,000 items (and, with labels, its 600 labels) in a fresh project."""
    shutil.copy(os.path.join(EXAMPLE, "data", "reviews.jsonl"), tmp_path / "reviews.jsonl")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"""\
annotation_task_name: Training test
data_files: [reviews.jsonl]
admin_api_key: {KEY}
annotation_schemes:
  - annotation_type: radio
    name: sentiment
    labels: [positive, negative]
{top}
model_training:
  grace_seconds: 2
  writeback:
    schemas: [sentiment]
    include_unlabeled: true
{model_training}
""")
    if labels:
        assert main(["annotations", "import", str(cfg), os.path.join(EXAMPLE, "labels.jsonl"),
                     "--annotator", "gold"]) == 0
    return str(cfg)


def wait_run(client, run_id, timeout=60, until=("success", "error", "cancelled")):
    deadline = time.time() + timeout
    while True:
        status, run = client.json("GET", f"/admin/training/api/runs/{run_id}",
                                  headers={"X-API-Key": KEY})
        assert status == 200, run
        if run["status"] in until:
            return run
        assert time.time() < deadline, f"run {run_id} still {run['status']}: {run}"
        time.sleep(0.1)


def start_run(client, **body):
    status, out = client.json("POST", "/admin/training/api/runs", json_body=body,
                              headers={"X-API-Key": KEY})
    assert status == 202, out
    return out["run_id"]


def gold_labels():
    with open(os.path.join(EXAMPLE, "data", "gold.jsonl")) as f:
        return {d["id"]: d["sentiment"] for d in map(json.loads, f)}


def job_dirs(root, run_id):
    """The run's job directories under ``root/jobs`` (named <run_id>-<unique>)."""
    import glob

    return glob.glob(os.path.join(str(root), "jobs", glob.escape(run_id) + "-*"))


def wait_progress(client, run_id, timeout=60):
    """Wait until the run is running and its worker has reported progress; fail fast if not."""
    deadline = time.time() + timeout
    while True:
        run = wait_run(client, run_id, until=("running", "success", "error", "cancelled"))
        assert run["status"] == "running", run
        if (run.get("progress") or {}).get("current"):
            return run
        assert time.time() < deadline, f"run {run_id} never reported progress"
        time.sleep(0.2)


def fake_ssh_for_agent_session(monkeypatch, **env):
    """Let the probe and code copy run normally, then give the agent's ssh session the fake
    ssh settings ``env`` (e.g. FAKE_SSH_MODE="drop"): the session misbehaves, not the set-up."""
    from potato.training.backends import ssh as ssh_mod

    real = ssh_mod.SshBackend._run_agent

    def run_agent(self, ctx, python):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        return real(self, ctx, python)

    monkeypatch.setattr(ssh_mod.SshBackend, "_run_agent", run_agent)

