"""Fast unit tests for the SLURM job follower (potato/training/remote/slurm_job.py): job.sh's
exact text, the sbatch/squeue/scontrol/scancel command lines and parsers, and JobFollower's
decisions driven by a scripted ``call`` and a fake clock (no scheduler, no waiting). Written
so that tools/mutation.py's mutants of slurm_job.py fail (docs/testing.md)."""

import os
import stat
import sys

import pytest

from potato.training.remote import protocol
from potato.training.remote import slurm_job as slurm
from potato.training.remote.protocol import RunSettings


def slurm_settings(**keys):
    """A run's settings for a SLURM job: RunSettings's own keys, the rest the scheduler's."""
    own = {k: keys.pop(k) for k in ("host", "env", "num_threads") if k in keys}
    return RunSettings(scheduler=slurm.SlurmSettings.from_dict(keys), **own)


def test_constants():
    assert slurm.SQUEUE_FORMAT == "%i|%T|%R|%N"
    assert slurm.LOST_AFTER_S == 60 == slurm.SlurmSettings().lost_after_s
    assert slurm.SQUEUE_FAILING_S == 300
    assert slurm.NEEDED == ("sbatch", "squeue", "scancel")
    assert issubclass(slurm.SlurmParseError, slurm.SlurmError)


def test_job_script_text():
    s = slurm_settings(job_python="py3", prelude=["module load cuda", "echo hi"],
                    env={"B": "x y", "PYTHONPATH": "/e"}, num_threads=2)
    text = slurm.job_script(s, "/j d", "/code", grace_seconds=2.5)
    assert text == "\n".join([
        "#!/bin/sh",
        "# Written by Potato: runs the training worker of this job.",
        "# prelude (from the backend's config)",
        "module load cuda",
        "echo hi",
        "export B='x y'",
        "export MKL_NUM_THREADS=2",
        "export OMP_NUM_THREADS=2",
        "export OPENBLAS_NUM_THREADS=2",
        "export PYTHONPATH=/code:/e\"${PYTHONPATH:+:$PYTHONPATH}\"",
        "export PYTHONUNBUFFERED=1",
        "cd '/j d' || exit 96",
        "rm -f '/j d/exit_code'",
        "pid=",
        "trap '[ -n \"$pid\" ] && kill -TERM \"$pid\" 2>/dev/null' TERM INT HUP",
        "py3 -m potato.training.remote.supervise --grace 2.5 -- py3 -m potato.training.worker "
        "--spec '/j d/spec.json' >> '/j d/events.jsonl' 2> '/j d/stderr.log' &",
        "pid=$!",
        "wait \"$pid\"; code=$?",
        "while kill -0 \"$pid\" 2>/dev/null; do wait \"$pid\"; code=$?; done",
        "echo \"$code\" > '/j d/exit_code.tmp' && mv '/j d/exit_code.tmp' '/j d/exit_code'",
        "exit \"$code\"", ""])


def test_job_script_defaults():
    text = slurm.job_script(slurm_settings(job_python=""), "/j", "/c")
    assert "\npython -m potato.training.remote.supervise --grace 20 -- python -m " in text
    assert "export PYTHONPATH=/c\"${PYTHONPATH:+:$PYTHONPATH}\"\n" in text


def test_command_lines():
    s = slurm_settings(partition="gpu", gres="", qos="q", cpus_per_task="4")
    assert slurm.sbatch_argv(s, "/j", "r7") == [
        "sbatch", "--parsable", "--job-name=potato-r7", "--output=/j/slurm.out", "--chdir=/j",
        "--no-requeue", "--partition=gpu", "--qos=q", "--cpus-per-task=4", "/j/job.sh"]
    assert slurm.squeue_argv(42) == ["squeue", "-h", "-j", "42", "-o", "%i|%T|%R|%N"]
    assert slurm.scontrol_argv(42) == ["scontrol", "show", "job", "42"]
    assert slurm.scancel_argv(42) == ["scancel", "42"]
    assert slurm.scancel_argv(42, signal_term=True) == \
        ["scancel", "--full", "--signal=TERM", "42"]


def test_parse_sbatch():
    assert slurm.parse_sbatch("  \n 17;c \n") == "17"
    assert slurm.parse_sbatch("x;1\n18\n") == "18"
    with pytest.raises(slurm.SlurmParseError) as e:
        slurm.parse_sbatch("z" * 400)
    assert str(e.value) == "sbatch printed no job id: %r" % ("z" * 300)
    with pytest.raises(slurm.SlurmParseError):
        slurm.parse_sbatch("")


def test_parse_squeue():
    out = "41|RUNNING|None|n1\n 42_3|PENDING| (Priority) |\n"
    assert slurm.parse_squeue(out, 42) == ("PENDING", "Priority", "")
    assert slurm.parse_squeue(out, "41") == ("RUNNING", "None", "n1")
    assert slurm.parse_squeue("5|PENDING|(x|\n", "5") == ("PENDING", "(x", "")
    assert slurm.parse_squeue("5|PENDING|x)|\n", "5") == ("PENDING", "x)", "")
    assert slurm.parse_squeue("5|R|()|\n", "5") == ("R", "", "")
    assert slurm.parse_squeue(out, "4") is None
    with pytest.raises(slurm.SlurmParseError) as e:
        slurm.parse_squeue("1|2|3|4|5\n", "1")
    assert str(e.value) == "unexpected squeue line (want %i|%T|%R|%N): '1|2|3|4|5'"
    with pytest.raises(slurm.SlurmParseError):
        slurm.parse_squeue("1|2|3\n", "1")


def test_parse_scontrol():
    f = slurm.parse_scontrol("JobState=FAILED Reason=x JobState=RUNNING AllocNode:Sid=vm:1 "
                             "Std/Out=/a b=c Empty=")
    assert f == {"JobState": "FAILED", "Reason": "x", "AllocNode:Sid": "vm:1", "Std/Out": "/a",
                 "b": "c", "Empty": ""}
    with pytest.raises(slurm.SlurmParseError) as e:
        slurm.parse_scontrol("y" * 400)
    assert str(e.value) == "no JobState in scontrol output: %r" % ("y" * 300)


def test_reasons():
    assert slurm.reason_from_scontrol({}) is None
    assert slurm.reason_from_scontrol({"JobState": "DEADLINE"}) == "time limit"
    assert slurm.reason_from_scontrol({"JobState": "CANCELLED+"}) == "cancelled"
    assert slurm.reason_from_scontrol({"JobState": "TIMEOUT+X"}) == "time limit"
    assert slurm.reason_from_slurm_out("... Out Of Memory ...") == "out of memory"
    assert slurm.reason_from_slurm_out("task OOM-KILL seen") == "out of memory"
    assert slurm.reason_from_slurm_out("state OUT_OF_MEMORY") == "out of memory"
    assert slurm.reason_from_slurm_out("oom kill") == "out of memory"
    assert slurm.reason_from_slurm_out("") is None
    assert slurm.reason_from_slurm_out("*** JOB 3 ON n1 CANCELLED AT 2026-11-30T09:11:28 ***") \
        == "cancelled"
    # the first pattern that matches wins
    assert slurm.reason_from_slurm_out("*** JOB 3 ON n CANCELLED AT t DUE TO TIME LIMIT ***") \
        == "time limit"


def test_ended_messages():
    for reason, sentence in slurm.SENTENCES.items():
        assert slurm.ended_message("9", reason) == \
            "SLURM job 9 ended before the worker finished: %s. %s" % (
                sentence, slurm.WHAT_TO_DO[reason])
    assert set(slurm.SENTENCES) == set(slurm.WHAT_TO_DO) == set(slurm.STATE_REASONS.values())
    assert slurm.STATE_REASONS == {
        "TIMEOUT": "time limit", "DEADLINE": "time limit", "NODE_FAIL": "node failure",
        "PREEMPTED": "preemption", "OUT_OF_MEMORY": "out of memory", "CANCELLED": "cancelled"}


def test_event_tail(tmp_path):
    path = tmp_path / "events.jsonl"
    t = slurm.EventTail(str(path))
    assert (t.path, t.offset, t.partial) == (str(path), 0, b"")
    assert t.read() == []
    path.write_bytes(b'stray\n{"type":"log","message":"\xff"}\n{"type":"st')
    assert t.read() == [{"type": "log", "message": "\ufffd"}]
    assert t.offset == len(path.read_bytes()) and t.partial == b'{"type":"st'
    assert t.read() == []
    with open(path, "ab") as f:
        f.write(b'atus","message":"m"}\n{"type":"log","message":"n"}\n')
    assert [e["message"] for e in t.read()] == ["m", "n"]
    assert t.partial == b""


def test_job_exit():
    j = slurm.JobExit()
    assert (j.reason_message, j.job_id, j.returncode, j.stopped, j.stderr_tail) == \
        (None, None, None, None, "")


def _bin(tmp_path, names=("sbatch", "squeue", "scancel")):
    d = tmp_path / "bin"
    d.mkdir(parents=True, exist_ok=True)
    for n in names:
        (d / n).write_text("#!/bin/sh\n")
        (d / n).chmod(0o755)
    return str(d)


def test_missing_commands(tmp_path, monkeypatch):
    assert slurm.missing_commands({"PATH": _bin(tmp_path, ["squeue"])}) == ["sbatch", "scancel"]
    assert slurm.missing_commands({"PATH": _bin(tmp_path, ["sbatch", "scancel"])}) == []
    monkeypatch.setattr(slurm.os, "defpath", _bin(tmp_path))
    assert slurm.missing_commands({}) == []


def test_no_command_message():
    assert slurm.no_command_message("login1", "squeue") == (
        "login1 has no squeue on PATH, so it cannot follow its jobs. Set PATH under the "
        "backend's env (for example env: {PATH: \"/opt/slurm/bin:/usr/bin:/bin\"}).")
    assert "cannot submit jobs." in slurm.no_command_message("h", "sbatch")
    assert "cannot cancel its jobs." in slurm.no_command_message("h", "scancel")


def test_call():
    env = dict(os.environ)
    assert slurm.call([sys.executable, "-c", "import sys; print('o'); "
                        "sys.stderr.write('e'); sys.exit(3)"], env) == (3, "o\n", "e")
    rc, out, err = slurm.call([sys.executable, "-c", "import time; time.sleep(30)"], env,
                               timeout=0.3)
    assert (rc, out) == (None, "")
    assert err == "%s did not answer within 0 s" % sys.executable
    assert slurm.call([sys.executable, "-c", "import os; print(os.environ['PM_Z'])"],
                       dict(env, PM_Z="z")) == (0, "z\n", "")


class Cluster:
    """A scripted ``call``: answers by command name, records every call."""

    def __init__(self, squeue=(), sbatch=(0, "77\n", ""), scontrol=(1, "", "")):
        self.calls = []
        self.squeue = list(squeue)
        self.sbatch = sbatch
        self.scontrol = scontrol

    def __call__(self, argv, env, timeout=60):
        # every SLURM command runs with the follower's env (its PATH finds them)
        assert env is not None and env.get("PATH"), (argv, env)
        self.calls.append((list(argv), timeout))
        if argv[0] == "sbatch":
            return self.sbatch
        if argv[0] == "squeue":
            return self.squeue.pop(0) if len(self.squeue) > 1 else self.squeue[0]
        if argv[0] == "scontrol":
            return self.scontrol
        return 0, "", ""

    def names(self):
        return [c[0] for c, _ in self.calls]


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _follower(tmp_path, monkeypatch, cluster, cancel=lambda: False, grace=5.0, step=1.0,
              settings=None, **kw):
    clock = Clock()
    monkeypatch.setattr(slurm, "call", cluster)
    slept = []

    def sleep(s):
        slept.append(s)
        clock.now += step

    monkeypatch.setattr(slurm.time, "sleep", sleep)
    jobdir = tmp_path / "job"
    jobdir.mkdir(exist_ok=True)
    seen, logs = [], []
    f = slurm.JobFollower(slurm.Job(
        settings or slurm_settings(host="login1", poll_interval_s=3), str(jobdir), "/code",
        "r1", {"PATH": _bin(tmp_path)}, seen.append, logs.append, cancel, grace_seconds=grace,
        tick=0.5, clock=clock, **kw))
    f.slept, f.seen, f.logs, f.fake_clock = slept, seen, logs, clock
    return f


RUNNING = (0, "77|RUNNING|None|n1\n", "")
GONE = (0, "", "")


def test_follower_initial_state(tmp_path, monkeypatch):
    f = _follower(tmp_path, monkeypatch, Cluster())
    assert (f.job_id, f.last_state, f.gone_since, f.failing_since, f.term_at, f.killed,
            f.has_scontrol) == (None, None, None, None, None, False, False)
    assert f.tailer.path == f.paths.events == str(tmp_path / "job" / "events.jsonl")
    assert f.grace == 5.0 and f.tick == 0.5


def test_submit(tmp_path, monkeypatch):
    cluster = Cluster()
    f = _follower(tmp_path, monkeypatch, cluster)
    (tmp_path / "bin" / "scontrol").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "scontrol").chmod(0o755)
    monkeypatch.setattr(slurm.protocol.time, "time", lambda: 1.0)
    f.submit()
    assert f.job_id == f.out.job_id == "77"
    assert cluster.calls == [(slurm.sbatch_argv(f.settings, f.jobdir, "r1"), 120)]
    assert f.seen == [
        {"type": "log", "t": 1.0, "level": "info", "message":
         "Submitted SLURM job 77 with --parsable --job-name=potato-r1 --output=%s "
         "--chdir=%s --no-requeue" % (f.paths.slurm_out, f.jobdir)},
        {"type": "status", "t": 1.0, "message": "SLURM job 77 submitted"}]
    with open(f.paths.job_script) as fh:
        assert fh.read() == slurm.job_script(f.settings, f.jobdir, "/code", 5.0)
    assert stat.S_IMODE(os.stat(f.paths.job_script).st_mode) == 0o755
    assert f.has_scontrol is True
    (tmp_path / "bin" / "scontrol").unlink()
    f.submit()
    assert f.has_scontrol is False


def test_submit_refused(tmp_path, monkeypatch):
    f = _follower(tmp_path, monkeypatch, Cluster(sbatch=(1, "out", " sbatch: error: bad\n")))
    with pytest.raises(slurm.SlurmError) as e:
        f.submit()
    assert str(e.value).startswith("sbatch refused the job (exit 1): sbatch: error: bad. "
                                   "The command was: sbatch --parsable")
    f = _follower(tmp_path, monkeypatch, Cluster(sbatch=(2, " only stdout ", "  ")))
    with pytest.raises(slurm.SlurmError, match=r"\(exit 2\): only stdout\. The command"):
        f.submit()
    f = _follower(tmp_path, monkeypatch, Cluster(sbatch=(0, "no id", "")))
    with pytest.raises(slurm.SlurmParseError):
        f.submit()


def test_submit_without_the_commands(tmp_path, monkeypatch):
    f = _follower(tmp_path, monkeypatch, Cluster())
    f.env = {"PATH": str(tmp_path / "empty")}
    with pytest.raises(slurm.SlurmError) as e:
        f.submit()
    assert str(e.value) == slurm.no_command_message("login1", "sbatch")
    assert not os.path.exists(f.paths.job_script)
    f.settings.host = ""
    with pytest.raises(slurm.SlurmError) as e:
        f.submit()
    assert str(e.value) == slurm.no_command_message(slurm.platform.node(), "sbatch")


def _write(path, text):
    with open(path, "a") as fh:
        fh.write(text)


def test_follow_to_a_result(tmp_path, monkeypatch):
    cluster = Cluster(squeue=[(0, "77|PENDING|(Priority)|\n", ""),
                              (0, "77|PENDING|(Priority)|\n", ""), RUNNING, RUNNING, GONE])
    ticks = []
    f = _follower(tmp_path, monkeypatch, cluster, on_tick=lambda: ticks.append(1))
    f.job_id = "77"
    _write(f.paths.events, '{"type":"status","message":"up"}\n')
    _write(f.paths.events, '{"type":"result","metrics":{}}\n')
    _write(f.paths.exit_code, "0\n")
    _write(f.paths.stderr, "warn\n")
    out = f.follow()
    assert out is f.out and out.returncode == 0 and out.result is not None and out.ok
    assert out.stderr_tail == "warn"
    msgs = [e["message"] for e in f.seen if e["type"] == "status"]
    assert msgs == ["up", "SLURM job 77: PENDING (Priority)", "SLURM job 77: RUNNING on n1"]
    assert cluster.names() == ["squeue"] * 5  # once per poll_interval_s, no scancel
    assert all(call == (["squeue", "-h", "-j", "77", "-o", "%i|%T|%R|%N"], 60)
               for call in cluster.calls)
    # polls at 100, 103, 106, ... with sleeps of at most a tick
    assert all(0.05 <= s <= 0.5 for s in f.slept)
    assert ticks and len(ticks) == len(f.slept)
    assert f.fake_clock.now >= 112


def test_follow_poll_interval_default(tmp_path, monkeypatch):
    cluster = Cluster(squeue=[RUNNING, RUNNING, GONE])
    f = _follower(tmp_path, monkeypatch, cluster, settings=slurm_settings(poll_interval_s=0),
                  step=2.0)
    f.job_id = "77"
    _write(f.paths.exit_code, "1")
    f.follow()
    assert f.fake_clock.now == 120  # polls at 100, 110, 120 (10 s by default)


def test_follow_sleeps_until_the_next_poll(tmp_path, monkeypatch):
    cluster = Cluster(squeue=[RUNNING, GONE])
    f = _follower(tmp_path, monkeypatch, cluster, step=0.0)
    f.job_id = "77"
    _write(f.paths.exit_code, "1")
    calls = []
    monkeypatch.setattr(slurm.time, "sleep", lambda s: (calls.append(s),
                                                        setattr(f.fake_clock, "now",
                                                                f.fake_clock.now + 0.25)))
    f.follow()
    assert calls[0] == 0.5 and min(calls) >= 0.05
    for step, second in ((2.8, 0.2), (2.99, 0.05)):
        f = _follower(tmp_path, monkeypatch, Cluster(squeue=[RUNNING, GONE]))
        f.job_id = "77"
        calls = []
        monkeypatch.setattr(slurm.time, "sleep",
                            lambda s, step=step, f=f: (calls.append(s), setattr(
                                f.fake_clock, "now", f.fake_clock.now + step)))
        f.follow()
        assert calls[0] == 0.5
        assert calls[1] == pytest.approx(second)  # the time left to the next poll, at least 0.05


def test_follow_cancels_the_job_when_the_loop_fails(tmp_path, monkeypatch):
    cluster = Cluster(squeue=[RUNNING])
    f = _follower(tmp_path, monkeypatch, cluster,
                  on_tick=lambda: (_ for _ in ()).throw(BrokenPipeError()))
    f.job_id = "77"
    with pytest.raises(BrokenPipeError):
        f.follow()
    assert cluster.calls[-1] == (["scancel", "77"], 60)


def test_cancel_then_kill_after_the_grace(tmp_path, monkeypatch):
    asked = []
    cluster = Cluster(squeue=[RUNNING])
    f = _follower(tmp_path, monkeypatch, cluster, cancel=lambda: bool(asked), grace=5.0)
    f.job_id = "77"
    f.cancel_step(100.0)
    assert cluster.calls == [] and f.term_at is None
    asked.append(1)
    f.cancel_step(101.0)
    assert f.out.stopped == "cancelled" and f.term_at == 101.0
    assert cluster.calls == [(["scancel", "--full", "--signal=TERM", "77"], 60)]
    assert f.logs == ["sent SIGTERM to SLURM job 77 (scancel --full --signal=TERM)"]
    f.cancel_step(106.0)  # exactly the grace: not yet
    assert len(cluster.calls) == 1 and not f.killed
    f.cancel_step(106.5)
    assert cluster.calls[1] == (["scancel", "77"], 60) and f.killed
    assert f.logs[1] == "the worker did not stop within 5 s; scancel 77"
    f.cancel_step(200.0)
    assert len(cluster.calls) == 2 and f.term_at == 101.0


def test_poll_queue_states(tmp_path, monkeypatch):
    cluster = Cluster(squeue=[(0, "77|PENDING|(Resources)|\n", ""),
                              (0, "77|PENDING|(Resources)|\n", ""), RUNNING,
                              (0, "77|COMPLETING|None|n1\n", "")])
    f = _follower(tmp_path, monkeypatch, cluster)
    f.job_id = "77"
    f.gone_since = 1.0
    for now in (1, 2, 3, 4):
        assert f.poll_queue(now) is False
    assert f.gone_since is None
    assert [e["message"] for e in f.seen] == [
        "SLURM job 77: PENDING (Resources)", "SLURM job 77: RUNNING on n1",
        "SLURM job 77: COMPLETING (None)"]
    assert f.last_state == "SLURM job 77: COMPLETING (None)"


def test_poll_queue_invalid_job_id_means_gone(tmp_path, monkeypatch):
    cluster = Cluster(squeue=[(1, "77|RUNNING|None|n1\n",
                               "slurm_load_jobs error: Invalid job id specified")])
    f = _follower(tmp_path, monkeypatch, cluster)
    f.job_id = "77"
    f.failing_since = 5.0
    _write(f.paths.exit_code, "3")
    assert f.poll_queue(10.0) is True
    assert f.failing_since is None and f.out.returncode == 3 and f.logs == []


def test_poll_queue_failing(tmp_path, monkeypatch):
    cluster = Cluster(squeue=[(1, "", " down \n")])
    f = _follower(tmp_path, monkeypatch, cluster)
    f.job_id = "77"
    assert f.poll_queue(100.0) is False
    assert f.failing_since == 100.0 and f.logs == ["squeue failed (exit 1): down"]
    assert f.poll_queue(400.0) is False  # exactly SQUEUE_FAILING_S: not yet
    assert f.failing_since == 100.0
    assert f.poll_queue(400.5) is True
    assert f.out.reason_message == (
        "squeue kept failing for 300 s (down), so SLURM job 77 could not be followed; it was "
        "cancelled. Check the cluster's controller.")
    assert cluster.calls[-1] == (["scancel", "77"], 60)
    # no stderr at all; and after a cancel the limit is the grace plus 30 s
    f = _follower(tmp_path, monkeypatch, Cluster(squeue=[(None, "", "")]), grace=5.0)
    f.job_id, f.term_at = "77", 0.0
    assert f.poll_queue(10.0) is False
    assert f.poll_queue(45.0) is False
    assert f.poll_queue(45.5) is True
    assert "failing for 35 s (no output)" in f.out.reason_message


def test_on_gone_reads_the_exit_code(tmp_path, monkeypatch):
    f = _follower(tmp_path, monkeypatch, Cluster())
    f.job_id = "77"
    _write(f.paths.exit_code, " 5 \n")
    assert f.on_gone(1.0) is True and f.out.returncode == 5
    assert f.out.reason_message is None
    os.unlink(f.paths.exit_code)
    _write(f.paths.exit_code, "\n")
    assert f.on_gone(1.0) is True and f.out.returncode == 1
    os.unlink(f.paths.exit_code)
    _write(f.paths.exit_code, "x")
    assert f.on_gone(1.0) is True and f.out.returncode == 1


def test_on_gone_result_comes_first(tmp_path, monkeypatch):
    f = _follower(tmp_path, monkeypatch, Cluster())
    f.job_id = "77"
    _write(f.paths.events, '{"type":"result","metrics":{}}\n')
    _write(f.paths.exit_code, "0")
    _write(f.paths.slurm_out, "*** JOB 77 ON n1 CANCELLED AT t DUE TO TIME LIMIT ***\n")
    assert f.on_gone(1.0) is True
    assert f.out.reason_message is None and f.out.result is not None
    assert f.seen[0]["type"] == "result"


def test_on_gone_the_schedulers_reason(tmp_path, monkeypatch):
    f = _follower(tmp_path, monkeypatch, Cluster())
    f.job_id = "77"
    _write(f.paths.exit_code, "143")
    _write(f.paths.slurm_out, "*** JOB 77 ON n1 CANCELLED AT t DUE TO TIME LIMIT ***\n")
    assert f.on_gone(1.0) is True
    assert f.out.reason_message == slurm.ended_message("77", "time limit")
    # a result without an exit code is not the end: the scheduler's reason decides
    (tmp_path / "b").mkdir()
    f = _follower(tmp_path / "b", monkeypatch, Cluster())
    f.job_id = "77"
    _write(f.paths.events, '{"type":"result","metrics":{}}\n')
    _write(f.paths.slurm_out, "DUE TO NODE FAIL\n")
    assert f.on_gone(1.0) is True
    assert f.out.reason_message == slurm.ended_message("77", "node failure")


def test_on_gone_after_our_cancel(tmp_path, monkeypatch):
    f = _follower(tmp_path, monkeypatch, Cluster())
    f.job_id = "77"
    f.out.stopped = "cancelled"
    _write(f.paths.slurm_out, "DUE TO TIME LIMIT\n")
    assert f.on_gone(1.0) is True and f.out.reason_message is None


def test_on_gone_lost(tmp_path, monkeypatch):
    f = _follower(tmp_path, monkeypatch, Cluster(),
                  settings=slurm_settings(lost_after_s=30.0, poll_interval_s=3))
    f.job_id = "77"
    assert f.on_gone(100.0) is False and f.gone_since == 100.0
    assert f.on_gone(130.0) is False and f.gone_since == 100.0
    assert f.on_gone(130.5) is True
    assert f.out.reason_message.startswith("SLURM job 77 left the queue without an exit code")


def test_scheduler_reason(tmp_path, monkeypatch):
    timeout = (0, "JobId=77 JobState=TIMEOUT Reason=TimeLimit\n", "")
    cluster = Cluster(scontrol=timeout)
    f = _follower(tmp_path, monkeypatch, cluster)
    f.job_id = "77"
    _write(f.paths.slurm_out, "DUE TO NODE FAIL\n")
    assert f.scheduler_reason() == "node failure"  # no scontrol: slurm.out
    assert cluster.calls == []
    f.has_scontrol = True
    assert f.scheduler_reason() == "time limit"
    assert cluster.calls == [(["scontrol", "show", "job", "77"], 60)]
    cluster.scontrol = (0, "JobState=COMPLETED\n", "")
    assert f.scheduler_reason() == "node failure"  # scontrol knows no reason: slurm.out
    cluster.scontrol = (1, "JobState=TIMEOUT\n", "")
    assert f.scheduler_reason() == "node failure"  # scontrol failed: slurm.out
    cluster.scontrol = (0, "garbage", "")
    assert f.scheduler_reason() == "node failure"
    assert f.logs == ["no JobState in scontrol output: 'garbage'"]
    # slurm.out is read to its last 50 lines
    with open(f.paths.slurm_out, "w") as fh:
        fh.write("DUE TO PREEMPTION\n" + "x\n" * 49)
    cluster.scontrol = (1, "", "")
    assert f.scheduler_reason() == "preemption"
    with open(f.paths.slurm_out, "a") as fh:
        fh.write("x\n")
    assert f.scheduler_reason() is None


def test_run_job(tmp_path, monkeypatch):
    cluster = Cluster(squeue=[RUNNING, GONE])
    f = _follower(tmp_path, monkeypatch, cluster)
    _write(f.paths.exit_code, "0")
    _write(f.paths.events, '{"type":"result","metrics":{"a":1}}\n')
    seen = []
    out = slurm.run_job(slurm.Job(slurm_settings(poll_interval_s=1), f.jobdir, "/code", "r9",
                        {"PATH": _bin(tmp_path)}, seen.append, lambda m: None, lambda: False,
                        grace_seconds=3.0, tick=0.2, clock=f.fake_clock))
    assert out.ok and out.job_id == "77"
    assert cluster.calls[0][0][:3] == ["sbatch", "--parsable", "--job-name=potato-r9"]
    with open(f.paths.job_script) as fh:
        assert "--grace 3 --" in fh.read()
    assert [e["type"] for e in seen] == ["log", "status", "result", "status"]


def test_missing_commands_without_path_uses_the_default_path(tmp_path, monkeypatch):
    """An env without PATH means the system's default path, not this process's PATH."""
    monkeypatch.setenv("PATH", _bin(tmp_path / "ours"))  # all three here: must not count
    monkeypatch.setattr(slurm.os, "defpath", _bin(tmp_path / "default", ["squeue"]))
    assert slurm.missing_commands({}) == ["sbatch", "scancel"]


def test_submit_refused_quotes_the_last_400_characters(tmp_path, monkeypatch):
    f = _follower(tmp_path, monkeypatch, Cluster(sbatch=(1, "", "B" + "e" * 400)))
    with pytest.raises(slurm.SlurmError) as e:
        f.submit()
    assert "(exit 1): %s. The command" % ("e" * 400) in str(e.value)
    f = _follower(tmp_path, monkeypatch, Cluster(sbatch=(1, "B" + "o" * 400, "")))
    with pytest.raises(slurm.SlurmError) as e:
        f.submit()
    assert "(exit 1): %s. The command" % ("o" * 400) in str(e.value)


def test_poll_queue_failing_quotes_the_last_200_characters(tmp_path, monkeypatch):
    f = _follower(tmp_path, monkeypatch, Cluster(squeue=[(1, "", "B" + "d" * 200)]))
    f.job_id = "77"
    assert f.poll_queue(100.0) is False
    assert f.logs == ["squeue failed (exit 1): " + "d" * 200]
    assert f.poll_queue(401.0) is True
    assert "failing for 301 s (%s), so" % ("d" * 200) in f.out.reason_message


def test_follow_cancel_then_scancel_after_the_grace(tmp_path, monkeypatch):
    cluster = Cluster(squeue=[RUNNING] * 6 + [GONE])
    f = _follower(tmp_path, monkeypatch, cluster, cancel=lambda: True, grace=2.0,
                  settings=slurm_settings(poll_interval_s=1))
    f.job_id = "77"
    out = f.follow()
    assert out.stopped == "cancelled"
    scancels = [argv for argv, _ in cluster.calls if argv[0] == "scancel"]
    assert scancels == [["scancel", "--full", "--signal=TERM", "77"], ["scancel", "77"]]


def test_follow_a_job_that_is_lost(tmp_path, monkeypatch):
    cluster = Cluster(squeue=[GONE])
    f = _follower(tmp_path, monkeypatch, cluster,
                  settings=slurm_settings(poll_interval_s=1, lost_after_s=5))
    f.job_id = "77"
    out = f.follow()
    assert out.reason_message.startswith("SLURM job 77 left the queue without an exit code")
    assert 105 < f.fake_clock.now < 110


def test_every_sbatch_flag():
    s = slurm_settings(partition="p", gres="gpu:1", time="1:00", account="a", qos="q", mem="4G",
                    cpus_per_task="2", constraint="c")
    assert slurm.sbatch_argv(s, "/j", "r")[6:-1] == [
        "--partition=p", "--gres=gpu:1", "--time=1:00", "--account=a", "--qos=q", "--mem=4G",
        "--cpus-per-task=2", "--constraint=c"]


def test_what_to_do_sentences():
    assert slurm.ended_message("9", "out of memory") == (
        "SLURM job 9 ended before the worker finished: it ran out of memory. Ask for more "
        "memory (mem in the backend) or lower batch_size or max_length.")
    assert slurm.ended_message("9", "time limit") == (
        "SLURM job 9 ended before the worker finished: it reached its time limit. Raise time in "
        "the backend (or train on fewer items or epochs); keep_remote: true keeps slurm.out for "
        "a look.")


def test_run_job_passes_everything_on(tmp_path, monkeypatch):
    cluster = Cluster(squeue=[RUNNING] * 8 + [GONE])
    f = _follower(tmp_path, monkeypatch, cluster)
    logs, ticks = [], []
    out = slurm.run_job(slurm.Job(slurm_settings(poll_interval_s=1), f.jobdir, "/code", "r9",
                        {"PATH": _bin(tmp_path)}, lambda e: None, logs.append, lambda: True,
                        grace_seconds=2.0, tick=0.2, clock=f.fake_clock,
                        on_tick=lambda: ticks.append(1)))
    assert out.stopped == "cancelled"
    assert logs == ["sent SIGTERM to SLURM job 77 (scancel --full --signal=TERM)",
                    "the worker did not stop within 2 s; scancel 77"]
    assert ticks and all(s == 0.2 for s in f.slept[:1])


def test_defaults():
    import inspect
    assert inspect.signature(slurm.call).parameters["timeout"].default == 60
    job = slurm.Job(slurm_settings(), "/j", "/c", "r1", {}, print, print, lambda: False)
    assert (job.grace_seconds, job.tick) == (20.0, 0.5)
    follower = slurm.JobFollower(job)
    assert (follower.grace, follower.tick) == (20.0, 0.5)


# -- the scheduler's part of the settings, and requeues (issue 38) --------------------------------

def test_slurm_settings_travel_as_a_dict_and_run_the_job(monkeypatch):
    s = slurm.SlurmSettings.from_dict({"job_python": "/opt/py", "prelude": ["module load x"],
                                       "poll_interval_s": 2.5, "requeue": True,
                                       "partition": "gpu", "gres": "gpu:1"})
    d = s.to_dict()
    assert d["name"] == "slurm" and d["job_python"] == "/opt/py" and d["requeue"] is True
    assert d["partition"] == "gpu" and d["prelude"] == ["module load x"]
    assert slurm.SlurmSettings.from_dict(d) == s  # the agent reads back what the server sent
    assert s.sbatch_options() == {"partition": "gpu", "gres": "gpu:1"}
    ran = []
    monkeypatch.setattr(slurm, "run_job", lambda job: ran.append(job) or "the exit")
    assert s.run("the job") == "the exit" and ran == ["the job"]


def test_sbatch_asks_for_a_requeue_only_when_the_backend_allows_it():
    argv = slurm.sbatch_argv(slurm_settings(requeue=True), "/j", "r1")
    assert "--requeue" in argv and "--no-requeue" not in argv
    argv = slurm.sbatch_argv(slurm_settings(), "/j", "r1")
    assert "--no-requeue" in argv and "--requeue" not in argv


def test_a_cancel_potato_did_not_send_is_the_schedulers_not_the_users(tmp_path, monkeypatch):
    f = _follower(tmp_path, monkeypatch, Cluster())
    f.job_id = "77"
    _write(f.paths.events, '{"type":"error","kind":"cancelled","message":"stopped"}\n')
    f.relay()
    said = slurm.unasked_stop_message("77")
    assert f.out.error == {"type": "error", "kind": "other", "message": said,
                           "t": f.out.error["t"]}
    assert [(e["type"], e.get("level"), e["message"]) for e in f.seen] == [
        ("log", "warning", said)]
    # Once Potato has sent its TERM, the worker's "cancelled" is the cancel it asked for.
    f.term_at = 1.0
    _write(f.paths.events, '{"type":"error","kind":"cancelled","message":"stopped"}\n')
    f.relay()
    assert f.out.error["kind"] == "cancelled" and f.seen[-1]["kind"] == "cancelled"


REQUEUED = (0, "77|PENDING|(BeginTime)|\n", "")


def _requeued_follower(tmp_path, monkeypatch, requeue, slurm_out="", **kw):
    cluster = Cluster(squeue=[RUNNING, REQUEUED, REQUEUED, RUNNING])
    f = _follower(tmp_path, monkeypatch, cluster, settings=slurm_settings(
        host="login1", poll_interval_s=3, requeue=requeue), **kw)
    f.job_id = "77"
    if slurm_out:
        _write(f.paths.slurm_out, slurm_out)
    return f, cluster


def test_a_requeue_against_no_requeue_cancels_the_job_and_says_why(tmp_path, monkeypatch):
    f, cluster = _requeued_follower(
        tmp_path, monkeypatch, False,
        "slurmstepd: error: *** JOB 77 ON n1 CANCELLED AT 2026-12-07 DUE TO NODE FAILURE ***\n")
    assert f.poll_queue(1.0) is False  # RUNNING
    assert f.poll_queue(2.0) is True   # back to PENDING: requeued
    assert cluster.calls[-1] == (["scancel", "77"], 60)
    assert f.out.reason_message == slurm.requeued_message("77", "node failure")
    assert "its node failed" in f.out.reason_message
    assert f.logs == ["SLURM job 77 was requeued after node failure although it was submitted "
                      "with --no-requeue; scancel 77"]


def test_a_requeue_with_no_reason_in_slurm_out(tmp_path, monkeypatch):
    f, cluster = _requeued_follower(tmp_path, monkeypatch, False)
    f.poll_queue(1.0)
    assert f.poll_queue(2.0) is True
    assert f.out.reason_message == slurm.requeued_message("77", None)
    assert "requeued by the scheduler" in f.logs[0]
    assert len(f.slept) == slurm.REASON_WAITS  # it looked for the reason, half a second apart
    assert set(f.slept) == {0.5}


def test_a_requeue_the_backend_allows_is_followed_to_the_next_attempt(tmp_path, monkeypatch):
    f, cluster = _requeued_follower(
        tmp_path, monkeypatch, True,
        "slurmstepd: error: *** JOB 77 ON n1 CANCELLED AT 2026-12-07 DUE TO PREEMPTION ***\n")
    f.out.note({"type": "result", "metrics": {}})  # the first attempt's last word is not final
    assert f.poll_queue(1.0) is False
    assert f.poll_queue(2.0) is False
    assert "scancel" not in cluster.names()
    assert f.out.result is None and f.out.error is None and f.out.reason_message is None
    logs = [e for e in f.seen if e["type"] == "log"]
    assert [(e["level"], e["message"]) for e in logs] == [(
        "info", "SLURM job 77 was requeued after preemption (requeue: true in the backend): its "
                "worker starts again from the beginning when the job runs again")]
    statuses = [e["message"] for e in f.seen if e["type"] == "status"]
    assert statuses[-1] == "SLURM job 77: requeued after preemption, PENDING (BeginTime)"
    assert f.poll_queue(3.0) is False  # still pending: no second requeue, same status
    assert len([e for e in f.seen if e["type"] == "log"]) == 1
    assert f.poll_queue(4.0) is False  # running again: the note goes
    assert f.seen[-1]["message"] == "SLURM job 77: RUNNING on n1"


def test_a_requeue_while_potato_cancels_is_left_to_the_cancel(tmp_path, monkeypatch):
    f, cluster = _requeued_follower(tmp_path, monkeypatch, False)
    f.poll_queue(1.0)
    f.term_at = 1.5
    assert f.poll_queue(2.0) is False
    assert "scancel" not in cluster.names() and f.out.reason_message is None


def test_requeue_states_count_even_when_never_seen_running(tmp_path, monkeypatch):
    cluster = Cluster(squeue=[(0, "77|REQUEUED|(None)|\n", "")])
    f = _follower(tmp_path, monkeypatch, cluster)
    f.job_id = "77"
    assert f.poll_queue(1.0) is True and cluster.names()[-1] == "scancel"
    # A job that was never running and is pending is just waiting.
    f = _follower(tmp_path, monkeypatch, Cluster(squeue=[REQUEUED]))
    f.job_id = "77"
    assert f.poll_queue(1.0) is False and f.out.reason_message is None


def test_the_defaults_a_slurm_backend_starts_from():
    # docs/backends/slurm.md: job_python python, poll_interval_s 10, no requeue, no sbatch flag
    s = slurm.SlurmSettings()
    assert (s.job_python, s.prelude, s.poll_interval_s, s.requeue) == ("python", [], 10.0, False)
    assert s.sbatch_options() == {}
    assert slurm.sbatch_argv(RunSettings(scheduler=s), "/j", "r1")[-2] == "--no-requeue"
    assert all(s.to_dict()[k] is None for k in s.SBATCH_KEYS)


def test_an_agents_slurm_config_takes_the_schedulers_keys(tmp_path):
    from potato.training.remote import poll
    conf = tmp_path / "slurm.json"
    conf.write_text('{"job_python": "/opt/py", "prelude": ["module load cuda"], '
                    '"poll_interval_s": 5, "requeue": true, "partition": "gpu", '
                    '"num_threads": 4}')
    got = poll.slurm_overrides(str(conf))
    assert got["num_threads"] == 4 and got["scheduler"]["name"] == "slurm"
    s = slurm.SlurmSettings.from_dict(got["scheduler"])
    assert (s.job_python, s.prelude, s.poll_interval_s, s.requeue, s.partition) == (
        "/opt/py", ["module load cuda"], 5, True, "gpu")
    conf.write_text('{"job_pyton": "x"}')
    with pytest.raises(SystemExit, match="job_pyton.*valid keys: .*job_python, prelude, "
                                         "poll_interval_s, requeue"):
        poll.slurm_overrides(str(conf))


def test_a_job_keeps_the_monotonic_clock_by_default(tmp_path):
    job = slurm.Job(slurm_settings(), str(tmp_path), "/c", "r1", {}, print, print,
                    lambda: False)
    import time as _time
    before = _time.monotonic()
    assert before <= job.clock() <= _time.monotonic()


def test_events_after_an_unasked_cancel_are_relayed_too(tmp_path, monkeypatch):
    f = _follower(tmp_path, monkeypatch, Cluster())
    f.job_id = "77"
    _write(f.paths.events, '{"type":"error","kind":"cancelled","message":"stopped"}\n'
                           '{"type":"status","message":"after"}\n')
    f.relay()
    assert [e["type"] for e in f.seen] == ["log", "status"]


def test_the_requeue_reason_is_found_among_slurmstepds_last_lines(tmp_path, monkeypatch):
    f, cluster = _requeued_follower(
        tmp_path, monkeypatch, False,
        "slurmstepd: error: *** JOB 77 ON n1 CANCELLED AT 2026-12-07 DUE TO NODE FAILURE ***\n"
        + "".join("srun: line %d after it\n" % i for i in range(45)))
    f.poll_queue(1.0)
    assert f.poll_queue(2.0) is True
    assert "its node failed" in f.out.reason_message
    assert f.slept == []  # found at the first look


def test_a_requeue_reason_is_waited_for_about_three_seconds(tmp_path, monkeypatch):
    f, cluster = _requeued_follower(tmp_path, monkeypatch, False)
    f.poll_queue(1.0)
    f.poll_queue(2.0)
    assert sum(f.slept) == 3.0
