"""Fast unit tests for what the server and the shipped code agree on
(potato/training/remote/protocol.py): exit codes and their sentences, the run settings an agent
reads, the worker's environment and command line, and the event lines. Also the tests
tools/mutation.py runs against protocol.py (docs/testing.md, "Mutation testing")."""

import io
import json
import os
import re
from pathlib import Path

import pytest

from potato.training.remote import protocol as p
from potato.training.remote.slurm_job import SlurmSettings


DOCS = Path(__file__).resolve().parents[3] / "docs"


def _table(text, heading):
    """The first column -> second column of the markdown table under ``heading`` (its rows
    below the header)."""
    rows = {}
    section = text.split(heading, 1)[1].split("|---", 1)[1]
    for line in section.splitlines()[1:]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1]
        elif rows and not line.startswith("|"):
            break
    return rows


def test_version_is_a_release_number():
    assert re.fullmatch(r"\d+\.\d+\.\d+", p.VERSION)


def test_the_worker_exit_codes_are_the_documented_ones():
    # docs/agent-protocol.md, "Exit codes": the numbers are the protocol between layers
    table = _table((DOCS / "agent-protocol.md").read_text(), "## Exit codes")
    documented = {int(k): v for k, v in table.items() if k.isdigit()}
    assert sorted(documented) == [0, 1, 64, 65, 66, 67]
    for code, meaning in documented.items():
        assert meaning.startswith(p.exit_sentence(code)), code


def test_the_codes_the_agent_and_the_host_scripts_reserve_have_sentences():
    # docs/agent-protocol.md: the agent exits 2, 3, 4; the ssh and slurm scripts 95 to 98
    text = (DOCS / "agent-protocol.md").read_text()
    for code in (2, 3, 4, 95, 96, 97, 98):
        assert "exit %d" % code in text or " %d (" % code in text, code
        assert p.exit_sentence(code) != "it stopped with exit status %d" % code
    # the numbers nobody reserved read as a plain exit status
    for code in (5, 63, 68, 94, 99):
        assert p.exit_sentence(code) == "it stopped with exit status %d" % code


def test_an_agent_waits_out_the_documented_outage():
    # docs/training.md and docs/agent-protocol.md tell users an agent waits 300 s for the server
    assert "could not reach the server for %d s" % p.LOST_CONTACT_S in \
        (DOCS / "training.md").read_text().replace("\n  ", " ")
    assert "up to %d seconds" % p.LOST_CONTACT_S in \
        (DOCS / "agent-protocol.md").read_text().replace("\n", " ")


def test_exit_sentence():
    assert p.exit_sentence(None) == "it did not exit"
    assert p.exit_sentence(-9) == "it was killed by signal 9"
    assert p.exit_sentence(-15) == "it was killed by signal 15"
    assert p.exit_sentence(0) == "finished"
    assert p.exit_sentence(1) == "the training process failed"
    assert p.exit_sentence(64) == "the run's spec or bundle could not be read"
    assert p.exit_sentence(65) == "a package the trainer needs is missing"
    assert p.exit_sentence(66) == "the run was cancelled"
    assert p.exit_sentence(67) == "the training process ran out of memory"
    assert p.exit_sentence(4) == p.AGENT_MEANINGS[4]
    assert p.exit_sentence(96) == p.AGENT_MEANINGS[96]
    assert p.exit_sentence(7) == "it stopped with exit status 7"
    # a caller's own table replaces the agent's, the worker's stays
    own = {4: "four", 9: "nine"}
    assert p.exit_sentence(9, own) == "nine"
    assert p.exit_sentence(4, own) == "four"
    assert p.exit_sentence(96, own) == "it stopped with exit status 96"
    assert p.exit_sentence(64, own) == p.EXIT_MEANINGS[64]
    assert p.exit_sentence(0, {}) == "finished"


def test_describe_exit():
    assert p.describe_exit(None) == "the training process did not report how it ended"
    assert p.describe_exit(-9) == "the training process was killed (probably out of memory)"
    assert p.describe_exit(-15) == "the training process was stopped by signal 15"
    assert p.describe_exit(-1) == "the training process was stopped by signal 1"
    assert p.describe_exit(0) == "finished"
    assert p.describe_exit(66) == "the run was cancelled"
    assert p.describe_exit(3) == "the training process exited with status 3"
    assert p.describe_exit(77) == "the training process exited with status 77"
    assert p.describe_exit(67) == "the training process ran out of memory"


DEFAULTS = {
    "host": "the agent's machine", "remote_dir": None, "gpus": "auto",
    "min_free_gpu_mb": 2000.0, "env": {}, "num_threads": None, "fetch_artifacts": True,
    "keep_remote": False, "max_artifact_mb": 2048.0, "max_media_cache_mb": 10240.0,
    "scheduler": None,  # the agent runs the worker itself
}
SLURM_DEFAULTS = {
    "name": "slurm", "job_python": "python", "prelude": [], "poll_interval_s": 10.0,
    "lost_after_s": 60.0, "partition": None, "gres": None, "time": None, "account": None,
    "qos": None, "mem": None, "cpus_per_task": None, "constraint": None,
    "requeue": False,  # SLURM jobs are submitted with --no-requeue unless allowed (issue 38)
    "nodes": None, "ntasks_per_node": None, "gpus_per_node": None,  # issue 39
}
SCHEDULERS = {"slurm": SlurmSettings}


def test_run_settings_defaults_and_round_trip():
    assert p.RunSettings().to_dict() == DEFAULTS
    assert p.RunSettings.from_dict(None).to_dict() == DEFAULTS
    assert p.RunSettings.from_dict({}).to_dict() == DEFAULTS
    assert SlurmSettings().to_dict() == SLURM_DEFAULTS
    assert SlurmSettings.from_dict({}).to_dict() == SLURM_DEFAULTS
    a, b = p.RunSettings(), p.RunSettings()
    a.env["X"] = "1"
    assert b.env == {}  # no shared mutable defaults
    c, d = SlurmSettings(), SlurmSettings()
    c.prelude.append("module load x")
    assert d.prelude == []
    s = p.RunSettings(host="h", gpus="0,1", env={"A": "b"}, num_threads=4,
                      scheduler=SlurmSettings(partition="gpu"))
    assert s.to_dict()["scheduler"] == dict(SLURM_DEFAULTS, partition="gpu")
    assert p.RunSettings.from_dict(s.to_dict(), SCHEDULERS) == s
    # an agent that knows no such scheduler runs the worker itself
    assert p.RunSettings.from_dict(s.to_dict()).scheduler is None
    assert p.RunSettings.from_dict(dict(s.to_dict(), scheduler={"name": "k8s"}),
                                   SCHEDULERS).scheduler is None


def test_run_settings_from_dict_types():
    s = p.RunSettings.from_dict({
        "host": 7, "remote_dir": "/r", "min_free_gpu_mb": "300", "env": {"A": 1, 2: "b"},
        "num_threads": "3", "fetch_artifacts": 0, "keep_remote": "yes", "unknown": "x",
        "scheduler": {"name": "slurm", "prelude": ("a", 5), "poll_interval_s": 2,
                      "partition": "gpu", "gres": None, "cpus_per_task": 8, "requeue": 1},
    }, SCHEDULERS)
    assert s.host == "7"
    assert s.remote_dir == "/r"
    assert s.min_free_gpu_mb == 300.0 and isinstance(s.min_free_gpu_mb, float)
    assert s.env == {"A": "1", "2": "b"}
    assert s.num_threads == 3 and isinstance(s.num_threads, int)
    assert s.fetch_artifacts is False and s.keep_remote is True
    assert not hasattr(s, "unknown")
    slurm = s.scheduler
    assert slurm.prelude == ["a", "5"] and slurm.requeue is True
    assert slurm.poll_interval_s == 2.0 and isinstance(slurm.poll_interval_s, float)
    assert slurm.partition == "gpu" and slurm.gres is None and slurm.cpus_per_task == "8"
    # a None or a wrong type keeps the default, and the keys after it are still read
    s = p.RunSettings.from_dict({"host": None, "min_free_gpu_mb": "lots", "env": 5,
                                 "num_threads": "many", "scheduler": 3}, SCHEDULERS)
    assert s.host == "the agent's machine" and s.min_free_gpu_mb == 2000.0
    assert s.env == {} and s.num_threads is None and s.scheduler is None
    slurm = SlurmSettings.from_dict({"prelude": 3, "qos": "high", "constraint": "a100"})
    assert slurm.prelude == [] and slurm.qos == "high" and slurm.constraint == "a100"
    # env values are str() of the value, keys too
    assert p.RunSettings.from_dict({"env": [("K", 2)]}).env == {"K": "2"}
    assert p.RunSettings.from_dict({"num_threads": 2.7}).num_threads == 2


def test_sbatch_options():
    assert SlurmSettings().sbatch_options() == {}
    every = dict(partition="p", gres="gpu:1", time="1:00:00", account="a", qos="q", mem="4G",
                 cpus_per_task="2", constraint="a100")
    assert SlurmSettings(**every).sbatch_options() == every
    s = SlurmSettings(partition="gpu", gres="", time="1:00:00", account=None, qos="q",
                      mem="4G", cpus_per_task="2", constraint="a100")
    assert s.sbatch_options() == {"partition": "gpu", "time": "1:00:00", "qos": "q",
                                  "mem": "4G", "cpus_per_task": "2", "constraint": "a100"}


def test_worker_env():
    base = {"PATH": "/bin", "POTATO_TRAINING_TOKEN": "secret", "OMP_NUM_THREADS": "1"}
    out = p.worker_env(base, "/code")
    assert out == {"PATH": "/bin", "OMP_NUM_THREADS": "1", "PYTHONPATH": "/code",
                   "PYTHONUNBUFFERED": "1"}
    assert base["POTATO_TRAINING_TOKEN"] == "secret"  # the caller's dict is not changed
    out = p.worker_env({"PYTHONPATH": "/old"}, "/code", num_threads=3,
                       env={"A": "b", "POTATO_TRAINING_TOKEN": "x"})
    assert out == {"PYTHONPATH": "/code" + os.pathsep + "/old", "A": "b",
                   "OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3",
                   "OPENBLAS_NUM_THREADS": "3", "PYTHONUNBUFFERED": "1"}
    assert p.worker_env({"PYTHONPATH": ""}, "/c", env=None)["PYTHONPATH"] == "/c"
    assert p.worker_env({}, "/c", env={"PYTHONPATH": "/e"})["PYTHONPATH"] == \
        "/c" + os.pathsep + "/e"
    assert p.worker_env({}, "/c", num_threads=0) == {"PYTHONPATH": "/c",
                                                     "PYTHONUNBUFFERED": "1"}


def test_worker_argv():
    assert p.worker_argv("py3", "/s/spec.json") == \
        ["py3", "-m", "potato.training.worker", "--spec", "/s/spec.json"]


def test_here(monkeypatch):
    import socket

    monkeypatch.setattr(socket, "gethostname", lambda: "box")
    assert p.here({}) == {"host": "box"}
    env = {"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_JOB_ID": "12", "SLURMD_NODENAME": "n1",
           "OTHER": "x"}
    assert p.here(env) == {"host": "box", "gpus": "0,1", "slurm_job": "12",
                           "slurm_node": "n1"}
    assert p.here({"CUDA_VISIBLE_DEVICES": "", "SLURM_JOB_ID": "3"}) == \
        {"host": "box", "slurm_job": "3"}
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    assert p.here() == {"host": "box", "slurm_job": "77"}


def test_the_event_types_are_the_documented_ones():
    # docs/agent-protocol.md, "Events": make and parse take exactly the types of its table
    table = _table((DOCS / "agent-protocol.md").read_text(), "## Events")
    documented = [k.strip("`") for k in table]
    assert sorted(documented) == sorted(["status", "progress", "metric", "log", "artifact",
                                         "result", "error", "where"])
    for t in documented:
        assert p.make(t)["type"] == t
        assert p.parse(json.dumps({"type": t})) == {"type": t}
    for t in ("Status", "event", "", "warning"):
        with pytest.raises(ValueError):
            p.make(t)
        assert p.parse(json.dumps({"type": t})) is None


def test_make_and_dumps(monkeypatch):
    monkeypatch.setattr(p.time, "time", lambda: 1000.123456)
    assert p.make("status", message="m") == {"type": "status", "t": 1000.123, "message": "m"}
    with pytest.raises(ValueError) as e:
        p.make("bogus")
    assert str(e.value) == "unknown event type 'bogus'"
    assert p.dumps({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'


def test_parse():
    assert p.parse('  {"type":"status","t":1,"message":"x"}\n') == \
        {"type": "status", "t": 1, "message": "x"}
    assert p.parse("stray output") is None
    assert p.parse('x{"type":"status"}') is None
    assert p.parse("{not json") is None
    assert p.parse('{"type":"nope"}') is None
    assert p.parse('{"message":"no type"}') is None
    assert p.parse("[1]") is None
    assert p.parse("{" + "[" * 100000 + "]" * 100000 + "}") is None
    # the line cap (a worker that prints a whole tensor): a line of 1 MiB is still an event,
    # one character more is not
    pad = 1048576 - len('{"type":"log","m":""}')
    line = '{"type":"log","m":"%s"}' % ("a" * pad)
    assert len(line) == 1048576 and p.parse(line)["type"] == "log"
    line = '{"type":"log","m":"%s"}' % ("a" * (pad + 1))
    assert p.parse(line) is None


def test_emitter(monkeypatch):
    monkeypatch.setattr(p.time, "time", lambda: 5.0)
    out = io.StringIO()
    flushed = []
    out.flush = lambda: flushed.append(out.getvalue())
    e = p.Emitter(out)
    assert e.stream is out
    assert e.status("loading") == {"type": "status", "t": 5.0, "message": "loading"}
    assert flushed == ['{"message":"loading","t":5.0,"type":"status"}\n']
    e.log("hello")
    e.log("bad", level="error")
    e.progress(3, 10)
    e.progress(4, 10, unit="batch", eta_s=12.345, epoch=2)
    e.progress(0, 10, eta_s=0, epoch=0)
    e.metric("f1", 0.5, epoch=1, split="dev")
    lines = out.getvalue().splitlines()
    assert [json.loads(x) for x in lines] == [
        {"type": "status", "t": 5.0, "message": "loading"},
        {"type": "log", "t": 5.0, "level": "info", "message": "hello"},
        {"type": "log", "t": 5.0, "level": "error", "message": "bad"},
        {"type": "progress", "t": 5.0, "current": 3, "total": 10, "unit": "step"},
        {"type": "progress", "t": 5.0, "current": 4, "total": 10, "unit": "batch",
         "eta_s": 12.3, "epoch": 2},
        {"type": "progress", "t": 5.0, "current": 0, "total": 10, "unit": "step",
         "eta_s": 0, "epoch": 0},
        {"type": "metric", "t": 5.0, "name": "f1", "value": 0.5, "epoch": 1, "split": "dev"},
    ]
    assert len(flushed) == 7


def test_emitter_defaults_to_stdout(capsys):
    e = p.Emitter()
    e.emit("where", host="h")
    got = json.loads(capsys.readouterr().out)
    assert got["type"] == "where" and got["host"] == "h"
    assert p.Emitter(None).stream is not None
