"""The ssh backend end to end, with the ssh and nvidia-smi stand-ins from tests/fakes on PATH."""

import socket
import json
import os
import subprocess
import time

import pytest

from tests import leaks
from tests.helpers import (
    KEY, Client, fake_ssh_for_agent_session, job_dirs, make_project, start_run,
    stuck_run_frees_the_queue, wait_progress, wait_run, wall_limited)
from tests.helpers import ssh_backend as backend

H = {"X-API-Key": KEY}


def ssh_calls(tmp_path):
    path = tmp_path / "ssh-calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def remote_root(home):
    return home / "pt dir" / "it's; $(touch HACKED)"


def run_on_ssh(c, **body):
    return wait_run(c, start_run(c, backend="gpu-server", schemas=["sentiment"], **body),
                    timeout=120)


def test_naive_bayes_on_ssh_end_to_end(tmp_path, serve, fake_host):
    _, url = serve(make_project(tmp_path, backend()))
    c = Client(url)
    run = run_on_ssh(c, trainer="text-naive-bayes")
    assert run["status"] == "success", run["error"]
    assert run["ran_on"] == "gpu-server (ssh): host %s" % socket.gethostname()
    assert run["holdout"]["n"] > 50
    assert run["writeback"]["written"] > 1000
    log = c.get(f"/admin/training/api/runs/{run['run_id']}/log", headers=H).text
    assert "copying Potato's code to gpu.example.org" in log
    assert "waiting for the agent on gpu.example.org" in log
    assert "gpu.example.org: Python 3." in log and "this host has no GPU" in log
    # Model files came back; the remote job directory is gone; the code stays for next time.
    local = tmp_path / "annotation_output" / "training" / "runs" / run["run_id"]
    assert (local / "artifacts" / "sentiment.naive-bayes.json").is_file()
    assert run["artifact_uri"] == str(local / "artifacts")
    root = remote_root(fake_host)
    assert job_dirs(root, run["run_id"]) == []
    assert (root / "jobs").is_dir()
    assert len(list((root / "code").iterdir())) == 1
    assert not list(fake_host.rglob("HACKED")) and not (tmp_path / "HACKED").exists()
    # Predictions on an unlabeled item, written back from the remote run.
    _, item = c.json("GET", "/admin/api/items/sst-test-0001", headers=H)
    assert item["predictions"]["sentiment"]["run_id"] == run["run_id"]
    # Every ssh call ran in batch mode; the second (warm) run copies no code: 2 ssh processes.
    first_calls = len(ssh_calls(tmp_path))
    assert all("BatchMode=yes" in call["argv"] for call in ssh_calls(tmp_path))
    second = run_on_ssh(c, trainer="text-naive-bayes")
    assert second["status"] == "success"
    log2 = c.get(f"/admin/training/api/runs/{second['run_id']}/log", headers=H).text
    assert "copying Potato's code" not in log2 and "is already on gpu.example.org" in log2
    assert len(ssh_calls(tmp_path)) - first_calls == 2


def test_permission_denied(tmp_path, serve, fake_host, monkeypatch):
    monkeypatch.setenv("FAKE_SSH_MODE", "denied")
    _, url = serve(make_project(tmp_path, backend()))
    run = run_on_ssh(Client(url), trainer="text-naive-bayes")
    assert run["status"] == "error"
    assert run["error"].startswith("ssh to gpu.example.org failed: Permission denied. ")


def test_python_not_found(tmp_path, serve, fake_host):
    _, url = serve(make_project(tmp_path, backend(python="python3.99")))
    run = run_on_ssh(Client(url), trainer="text-naive-bayes")
    assert run["error"].startswith("python3.99 was not found on gpu.example.org. ")


def test_hung_ssh_fails_on_heartbeat(tmp_path, serve, fake_host, monkeypatch):
    _, url = serve(make_project(tmp_path, backend(heartbeat_timeout_s=2)))
    c = Client(url)
    # The probe answers; then the agent's session hangs before the agent says anything.
    fake_ssh_for_agent_session(monkeypatch, FAKE_SSH_MODE="hang")
    run = run_on_ssh(c, trainer="text-naive-bayes")
    assert run["status"] == "error"
    assert run["error"].startswith("No word from the agent on gpu-server for 2 seconds. ")
    assert (tmp_path / "annotation_output" / "training" / "runs" / run["run_id"] /
            "agent.log").exists()


def _run_processes(run_id):
    """The run's agent and worker among this test's own processes (the fake ssh's children)."""
    return [line for line in leaks.processes("potato.training.")
            if ("potato.training.worker" in line or "potato.training.agent" in line)
            and ("jobs/%s" % run_id in line or "--run %s" % run_id in line)]


def _wait_gone(run_id, timeout=30):
    deadline = time.time() + timeout
    while _run_processes(run_id) and time.time() < deadline:
        time.sleep(0.2)
    return _run_processes(run_id)


def test_cancel_reaches_the_remote_worker(tmp_path, serve, fake_host):
    _, url = serve(make_project(tmp_path, backend()))
    c = Client(url)
    run_id = start_run(c, backend="gpu-server", schemas=["sentiment"], trainer="test-steps",
                       params={"seconds": 120})
    wait_progress(c, run_id, timeout=60)
    c.json("POST", f"/admin/training/api/runs/{run_id}/cancel", headers=H)
    run = wait_run(c, run_id, timeout=60)
    assert run["status"] == "cancelled"
    assert _wait_gone(run_id) == []


def test_token_never_on_a_command_line(tmp_path, serve, fake_host, monkeypatch):
    from potato.training.backends import ssh as ssh_mod

    token = "tok-" + "x" * 40
    monkeypatch.setattr(ssh_mod.secrets, "token_urlsafe", lambda n=32: token)
    _, url = serve(make_project(tmp_path, backend()))
    c = Client(url)
    run_id = start_run(c, backend="gpu-server", schemas=["sentiment"], trainer="test-steps",
                       params={"seconds": 60})
    wait_progress(c, run_id, timeout=60)
    ps = subprocess.run(["ps", "-ewwo", "args"], capture_output=True, text=True).stdout
    assert "potato.training.agent" in ps
    assert token not in ps
    environ = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                environ.append(open(f"/proc/{pid}/environ", "rb").read())
            except OSError:
                pass
    assert not any(token.encode() in e for e in environ)
    assert not any(token in " ".join(call["argv"]) for call in ssh_calls(tmp_path))
    c.json("POST", f"/admin/training/api/runs/{run_id}/cancel", headers=H)
    wait_run(c, run_id, timeout=60)


def test_dropped_session_leaves_no_process(tmp_path, serve, fake_host, monkeypatch):
    _, url = serve(make_project(tmp_path, backend(heartbeat_timeout_s=5)))
    c = Client(url)
    fake_ssh_for_agent_session(monkeypatch, FAKE_SSH_MODE="drop", FAKE_SSH_DROP_AFTER="4")
    run_id = start_run(c, backend="gpu-server", schemas=["sentiment"], trainer="test-steps",
                       params={"seconds": 120})
    run = wait_run(c, run_id, timeout=60)
    assert run["status"] == "error"
    assert run["error"].startswith("ssh to gpu.example.org failed") or \
        run["error"].startswith("No word from the agent"), run["error"]
    assert _wait_gone(run_id) == []
    # nothing that did not fail reads as a failure (issue 38, item 8): the socket that sshd
    # removed with the session is not "could not remove"
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    assert "could not remove" not in log and "killed by signal" not in log, log[-2000:]


def test_pinned_gpu_reaches_the_worker(tmp_path, serve, fake_host, monkeypatch):
    monkeypatch.setenv("FAKE_GPUS", "0,NVIDIA A100,40960,30000,10960,5,8.0;"
                                    "1,NVIDIA A100,40960,1000,39960,90,8.0")
    _, url = serve(make_project(tmp_path, backend(gpus="1")))
    c = Client(url)
    run = run_on_ssh(c, trainer="text-naive-bayes")
    assert run["status"] == "success", run["error"]
    log = c.get(f"/admin/training/api/runs/{run['run_id']}/log", headers=H).text
    assert "GPU 1 NVIDIA A100 39960/40960 MB free" in log
    assert "taking GPU 1 (NVIDIA A100, 39960 MB free) (pinned by gpus: 1)" in log


def test_gpus_none_hides_the_gpus_from_the_worker(tmp_path, serve, fake_host, monkeypatch):
    """gpus: none trains on the CPU even on a GPU host (a remote run's device is auto)."""
    monkeypatch.setenv("FAKE_GPUS", "0,NVIDIA A100,40960,1000,39960,5,8.0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # as a host's login environment might
    _, url = serve(make_project(tmp_path, backend(gpus="none")))
    run = run_on_ssh(Client(url), trainer="test-env")
    assert run["status"] == "success", run["error"]
    assert run["metrics"]["cuda_visible"] == ""


def test_cancel_ends_within_grace_when_the_agent_cannot_answer(tmp_path, serve, fake_host):
    """The agent is stopped (SIGSTOP), so it can confirm nothing: the run still ends cancelled
    grace_seconds (2) after Cancel, and the session is closed."""
    import signal

    _, url = serve(make_project(tmp_path, backend()))
    c = Client(url)
    run_id = start_run(c, backend="gpu-server", schemas=["sentiment"], trainer="test-steps",
                       params={"seconds": 60})
    wait_progress(c, run_id, timeout=60)
    [agent] = [int(p.split()[0]) for p in _run_processes(run_id)
               if "-m potato.training.agent" in p and "sh -c" not in p]
    os.kill(agent, signal.SIGSTOP)
    try:
        asked = time.time()
        c.json("POST", f"/admin/training/api/runs/{run_id}/cancel", headers=H)
        run = wait_run(c, run_id, timeout=60)
        assert run["status"] == "cancelled"
        assert run["finished_at"] - asked <= 2 + 2, run["finished_at"] - asked
    finally:
        os.kill(agent, signal.SIGCONT)
    assert _wait_gone(run_id) == []
    # said as what happens, not as a failure (issue 38, item 8)
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    assert "cancelled: grace_seconds (2 s) have passed, so the run ends here; the agent on " \
           "gpu.example.org stops what is left of the worker (SIGKILL)" in log, log[-2000:]
    assert "did not confirm" not in log


def test_auto_gpu_without_kernels_fails_clearly(tmp_path, serve, fake_host, monkeypatch):
    pytest.importorskip("torch")
    import torch

    if torch.version.cuda:
        pytest.skip("this torch has CUDA kernels")
    monkeypatch.setenv("FAKE_GPUS", "0,NVIDIA A100,40960,1000,39960,5,8.0")
    _, url = serve(make_project(tmp_path, backend()))
    run = run_on_ssh(Client(url), trainer="text-naive-bayes")
    assert run["status"] == "error"
    assert run["error"].startswith("This host's torch has no kernels for any of its GPUs.")


def test_artifact_limits_and_keep_remote(tmp_path, serve, fake_host):
    _, url = serve(make_project(tmp_path, backend(max_artifact_mb=0.0001)))
    c = Client(url)
    run = run_on_ssh(c, trainer="text-naive-bayes")
    assert run["status"] == "success"
    log = c.get(f"/admin/training/api/runs/{run['run_id']}/log", headers=H).text
    assert "sentiment.naive-bayes.json" in log and "is over max_artifact_mb; it stays on" in log
    assert run["artifact_uri"].startswith("ssh://gpu.example.org/")
    [job] = job_dirs(remote_root(fake_host), run["run_id"])
    assert os.path.isfile(os.path.join(job, "artifacts", "sentiment.naive-bayes.json"))


def test_fetch_artifacts_false(tmp_path, serve, fake_host):
    _, url = serve(make_project(tmp_path, backend(fetch_artifacts=False)))
    run = run_on_ssh(Client(url), trainer="text-naive-bayes")
    assert run["status"] == "success"
    local = tmp_path / "annotation_output" / "training" / "runs" / run["run_id"] / "artifacts"
    assert list(local.iterdir()) == []
    [job] = job_dirs(remote_root(fake_host), run["run_id"])
    assert run["artifact_uri"] == "ssh://gpu.example.org%s/artifacts" % job


def test_keep_remote(tmp_path, serve, fake_host):
    _, url = serve(make_project(tmp_path, backend(keep_remote=True)))
    run = run_on_ssh(Client(url), trainer="text-naive-bayes")
    assert run["status"] == "success"
    [job] = job_dirs(remote_root(fake_host), run["run_id"])
    assert os.path.exists(os.path.join(job, "stderr.log"))
    # the host never saw the answers it is scored against: no test label left the server
    with open(os.path.join(job, "bundle", "items.jsonl")) as f:
        shipped = [json.loads(line) for line in f]
    test_items = [it for it in shipped if it["split"] == "test"]
    assert len(test_items) > 50 and all(it["labels"] == {} for it in test_items)
    assert any(it["labels"] for it in shipped if it["split"] == "train")
    assert run["holdout"]["n"] == len(test_items)  # scored on the server's own copy
    local = tmp_path / "annotation_output" / "training" / "runs" / run["run_id"] / "artifacts"
    assert (local / "sentiment.naive-bayes.json").is_file()


def test_check_reports_python_gpus_and_packages(tmp_path, serve, fake_host, monkeypatch):
    monkeypatch.setenv("FAKE_GPUS", "0,NVIDIA A100,40960,1000,39960,5,8.0")
    _, url = serve(make_project(tmp_path, backend(gpus="0"), labels=False))
    status, report = Client(url).json("POST", "/admin/training/api/backends/gpu-server/check",
                                      headers=H)
    assert status == 200 and report["ok"] is True, report
    text = "\n".join(report["lines"])
    assert "gpu.example.org: Python 3." in text
    assert "GPU 0: NVIDIA A100, 39960 of 40960 MB free, 5% busy, compute capability 8.0" in text
    # hf-llm-classification's load_in_4bit: what the host's python can import (the fake host
    # runs this interpreter)
    import importlib.util

    missing = [m for m in ("bitsandbytes", "accelerate") if importlib.util.find_spec(m) is None]
    assert report["missing_4bit"] == missing
    assert (("%s missing on gpu.example.org: hf-llm-classification's load_in_4bit cannot run"
             % ", ".join(missing)) if missing else "load_in_4bit can run") in text
    assert "A run would start taking GPU 0" in text
    monkeypatch.setenv("FAKE_SSH_MODE", "denied")
    status, report = Client(url).json("POST", "/admin/training/api/backends/gpu-server/check",
                                      headers=H)
    assert report["ok"] is False
    assert report["lines"][0].startswith("ssh to gpu.example.org failed: Permission denied.")


def test_check_on_a_host_without_gpus_reads_as_a_sentence(tmp_path, serve, fake_host,
                                                         monkeypatch):
    """Issue 20.4: no GPU is a sentence, not 'A run would start this host has no GPU: ...'."""
    monkeypatch.setenv("FAKE_GPUS", "")
    _, url = serve(make_project(tmp_path, backend(), labels=False))
    status, report = Client(url).json("POST", "/admin/training/api/backends/gpu-server/check",
                                      headers=H)
    assert status == 200 and report["ok"] is True, report
    assert "A run would train on the CPU: this host has no GPU" in report["lines"]
    assert not any(line.startswith("A run would start") for line in report["lines"])


def _wheel(tmp_path):
    import zipfile

    path = tmp_path / "potato_testpkg-0.1-py3-none-any.whl"
    files = {"potato_testpkg/__init__.py": "VALUE = 42\n",
             "potato_testpkg-0.1.dist-info/METADATA":
                 "Metadata-Version: 2.1\nName: potato-testpkg\nVersion: 0.1\n",
             "potato_testpkg-0.1.dist-info/WHEEL":
                 "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files["potato_testpkg-0.1.dist-info/RECORD"] = "".join(f"{n},,\n" for n in files) + \
        "potato_testpkg-0.1.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return str(path)


def test_packages_go_into_a_venv_made_once(tmp_path, serve, fake_host):
    _, url = serve(make_project(tmp_path, backend(packages=[_wheel(tmp_path)], gpus="none")))
    c = Client(url)
    first = run_on_ssh(c, trainer="test-env")
    assert first["status"] == "success", first
    venv_python = str(remote_root(fake_host) / "venv" / "bin" / "python")
    assert first["metrics"]["python"] == venv_python
    # gpus: none hides every GPU from the worker (the tutorial: it trains on the CPU)
    assert first["metrics"]["testpkg"] is True and first["metrics"]["cuda_visible"] == ""
    log = c.get(f"/admin/training/api/runs/{first['run_id']}/log", headers=H).text
    assert "installing " in log and " on gpu.example.org" in log
    second = run_on_ssh(c, trainer="test-env")
    assert second["metrics"]["python"] == venv_python
    log2 = c.get(f"/admin/training/api/runs/{second['run_id']}/log", headers=H).text
    assert "installing " not in log2


def test_cli_check_leaves_nothing_in_tmp(tmp_path, fake_host, capsys):
    """potato training check opens the shared connection's private directory only when it
    connects, and removes it (the autouse leak check makes TMPDIR this test's own)."""
    import tempfile

    from potato.commands.cli import main

    cfg = make_project(tmp_path, backend() + "    cluster: {type: slurm, host: login.example.org, "
                                             "remote_dir: /shared/x}\n", labels=False)
    assert main(["training", "check", "gpu-server", cfg]) == 0
    assert "gpu.example.org: Python 3." in capsys.readouterr().out
    assert os.listdir(tempfile.gettempdir()) == []


def _bare_python(tmp_path):
    """A Python without the training packages (a venv that does not see this one's)."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True, timeout=120)
    return str(tmp_path / "bare" / "bin" / "python")


def test_check_judges_the_trainers_the_projects_schemes_can_use(tmp_path, serve, fake_host,
                                                               capsys):
    # issue 38, item 4: a host without torch was "can start a run" unless --trainer was given
    bare = _bare_python(tmp_path)
    cfg = make_project(tmp_path, backend(python=bare, gpus="none"), labels=False)
    _, url = serve(cfg)
    status, report = Client(url).json("POST", "/admin/training/api/backends/gpu-server/check",
                                      headers=H)
    assert status == 200 and report["ok"] is False, report
    assert ("trainer hf-text-classification cannot run there: it needs torch, transformers, peft "
            "(install torch, transformers and peft into that Python (pip install torch "
            "transformers peft), or point the backend's python at one that has them, or list "
            "them under the backend's packages)") in report["lines"]
    # image and audio trainers need items with images or audio: not this project's
    assert not any("hf-image" in line or "hf-audio" in line for line in report["lines"])
    ready = report["trainers_ready"]  # (the test plugins' trainers, which need nothing, too)
    assert "text-naive-bayes" in ready and not any(n.startswith("hf-") for n in ready)
    assert report["lines"][-1] == ("Trainers for this project's schemes that can run there: "
                                   "%s (check one of them alone with --trainer)." %
                                   ", ".join(ready))
    from potato.commands.cli import main

    capsys.readouterr()
    assert main(["training", "check", "gpu-server", cfg]) == 1
    assert capsys.readouterr().out.rstrip().endswith("cannot start a run")
    assert main(["training", "check", "gpu-server", cfg, "--trainer", "text-naive-bayes"]) == 0
    # with packages, the venv made at the first run brings them: not judged here
    (tmp_path / "p2").mkdir()
    cfg2 = make_project(tmp_path / "p2", backend(python=bare, gpus="none",
                                                packages=["torch"]), labels=False)
    assert main(["training", "check", "gpu-server", cfg2]) == 0, capsys.readouterr().out


def test_a_worker_that_ignores_term_does_not_hold_the_queue_past_max_wall_seconds(
        tmp_path, serve, fake_host):
    """Issue 38.3: the run ends with the max_wall_seconds sentence and the next queued run
    starts soon after the limit, although the worker ignores SIGTERM and grace_seconds (10)
    is longer; the agent on the host still stops the worker itself, leaving nothing."""
    limit, grace = 6, 10
    _, url = serve(wall_limited(make_project(tmp_path, backend()), limit, grace))
    stuck = stuck_run_frees_the_queue(Client(url), limit, grace)
    assert job_dirs(remote_root(fake_host), stuck) == []
