"""The tutorial (shared/spec/tutorial.ko.txt, v2.14) followed to the letter: its configs, its
commands, and its eleven common failures as the run log says them (issue 11)."""

import json
import os
import re
import shlex
import subprocess
import sys
import time

import pytest

import potato
from potato.commands.cli import main
from tests.helpers import ROOT, Client
from tests.helpers import slurm_backend
from tests.helpers import ssh_backend
from tests.helpers import (
    KEY, PLUGINS, fake_ssh_for_agent_session, make_project, start_run, wait_run)

H = {"X-API-Key": KEY}
CONFIGS = os.path.join(ROOT, "tests", "data", "tutorial")
EXPECTED = json.load(open(os.path.join(CONFIGS, "expected.json")))


# -- 1. every config of the tutorial validates as the tutorial says ------------------------------

@pytest.mark.parametrize("case", EXPECTED, ids=[c["config"] for c in EXPECTED])
@pytest.mark.parametrize("strict", [False, True])
def test_tutorial_configs(case, strict, capsys, monkeypatch):
    monkeypatch.chdir(CONFIGS)
    code = main(["validate", case["config"]] + (["--strict"] if strict else []))
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == (case["strict_exit"] if strict else case["exit"]), text
    for fragment in case["must_contain"]:
        assert fragment in text
    assert "Traceback" not in text


def test_tutorial_project_starts(tmp_path):
    """potato start on the tutorial's full config gets as far as serving (then we stop it)."""
    import shutil

    for name in ("01-project.yaml", "data"):
        src = os.path.join(CONFIGS, name)
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, tmp_path / name)
    cfg = str(tmp_path / "01-project.yaml")
    with open(cfg, "a") as f:
        f.write("server:\n  port: 0\n")
    p = subprocess.Popen([sys.executable, "-m", "potato", "start", cfg], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
    finally:
        p.terminate()  # right after the line: SIGTERM must already stop it cleanly
        out, err = p.communicate(timeout=30)
    assert line.startswith("Potato is serving 'Review Sentiment' at http://"), line + err
    assert p.returncode == 0, err
    assert out.strip() == "Potato stopped."


def disabled_project(tmp_path, extra=""):
    cfg = make_project(tmp_path, "  auto_retrain: {enabled: true, update_frequency: 1, "
                                 "min_interval_s: 0, schemas: [sentiment]}\n" + extra)
    text = open(cfg).read().replace("model_training:\n", "model_training:\n  enabled: false\n")
    open(cfg, "w").write(text)
    return cfg


def test_training_disabled(tmp_path, serve):
    cfg = disabled_project(tmp_path)
    server, url = serve(cfg)
    c = Client(url)
    status, body = c.json("POST", "/admin/training/api/runs", headers=H,
                          json_body={"trainer": "text-naive-bayes", "schemas": ["sentiment"]})
    assert (status, body["error"]) == (409, "training is disabled (model_training.enabled: "
                                            "false)")
    page = c.get("/admin/training", headers=H)
    assert page.status == 200
    assert "Training is disabled (model_training.enabled: false)" in page.text
    assert re.search(r'<form id="run-form"[^>]* hidden>', page.text)
    # annotation is served as usual
    c.login("ann")
    assert c.get("/annotate").status == 200
    time.sleep(1.5)  # three turns of the queue loop: auto-retrain would have queued a run
    assert server.manager.runs.list() == []
    _, auto = c.json("GET", "/admin/training/api/auto_retrain", headers=H)
    assert auto == {"enabled": False, "reason": "training is disabled (model_training.enabled: "
                                                "false)"}


def test_disabled_training_starts_no_queued_run(tmp_path, serve, capsys):
    """A run queued before training was turned off stays queued: no backend starts it and no
    agent can claim it."""
    cfg = agent_project(tmp_path)
    server, url = serve(cfg, training=False)  # the queue is not running: both runs wait
    main(["training", "register", "lab-workstation", cfg])
    token = re.search(r"POTATO_TRAINING_TOKEN=(\S+)", capsys.readouterr().out).group(1)
    c = Client(url)
    queued = [start_run(c, backend=b, schemas=["sentiment"], trainer="text-naive-bayes")
              for b in ("lab-workstation", "local")]
    text = open(cfg).read().replace("model_training:\n", "model_training:\n  enabled: false\n")
    open(cfg, "w").write(text)
    server, url = serve(cfg)
    c = Client(url)
    status, reply = c.json("POST", "/agent/v1/backends/lab-workstation/claim", json_body={},
                           headers={"Authorization": "Bearer " + token})
    assert status == 200 and reply == {"run_id": None}
    time.sleep(1.5)
    for run_id in queued:
        assert wait_run(c, run_id, until=("queued",))["status"] == "queued"


def test_training_run_cli_when_disabled(tmp_path):
    cfg = disabled_project(tmp_path)
    r = subprocess.run([sys.executable, "-m", "potato", "training", "run", cfg, "--trainer",
                        "text-naive-bayes", "--schemas", "sentiment"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.startswith("error: training is disabled (model_training.enabled: false).")


# -- 2. check on an agent backend shows the token record, as the Check button does -------------

def agent_project(tmp_path, top="", labels=True, **lab):
    keys = {"type": "agent", "description": "the lab's workstation under the desk"}
    keys.update(lab)
    inner = ", ".join(f"{k}: {json.dumps(v)}" for k, v in keys.items())
    return make_project(tmp_path, f"  backends:\n    lab-workstation: {{{inner}}}\n", top=top,
                        labels=labels)


def check_cli(cfg, capsys, *flags):
    capsys.readouterr()
    code = main(["training", "check", "lab-workstation", cfg, *flags])
    return code, capsys.readouterr().out


def test_check_agent_backend_shows_the_token_record(tmp_path, serve, capsys):
    cfg = agent_project(tmp_path)
    code, out = check_cli(cfg, capsys)
    assert code == 1 and "no token issued yet: run potato training register lab-workstation" in out
    assert main(["training", "register", "lab-workstation", cfg]) == 0
    token = re.search(r"POTATO_TRAINING_TOKEN=(\S+)", capsys.readouterr().out).group(1)
    code, out = check_cli(cfg, capsys)
    # a token, but no agent yet: a run would wait, so Check says it cannot start one
    assert code == 1 and "token issued " in out and "no agent has connected" in out
    assert "no agent has polled yet: a run will wait until one does" in out
    assert out.rstrip().endswith("cannot start a run")
    _, url = serve(cfg)
    c = Client(url)
    status, reply = c.json("POST", "/agent/v1/backends/lab-workstation/claim",
                           json_body={"host": "ws-under-desk", "version": potato.__version__,
                                      "python": "3.11.7"},
                           headers={"Authorization": "Bearer " + token})
    assert status == 200 and reply == {"run_id": None}
    code, out = check_cli(cfg, capsys, "--json")
    cli = json.loads(out)
    _, button = c.json("POST", "/admin/training/api/backends/lab-workstation/check", headers=H)
    assert cli == button
    assert cli["ok"] and cli["token"]["agent_host"] == "ws-under-desk"
    assert cli["token"]["agent_version"] == potato.__version__
    assert any(line.startswith("last seen ") and "from ws-under-desk (potato 2.14.0)" in line
               for line in cli["lines"])


def test_check_before_registering_names_the_config(tmp_path, capsys):
    """Issue 20.4: the register command to run, with this project's config path, not CONFIG."""
    cfg = agent_project(tmp_path, labels=False)
    code, out = check_cli(cfg, capsys)
    assert code == 1
    assert "no token issued yet: run potato training register lab-workstation %s on the " \
           "server" % shlex.quote(cfg) in out
    assert "CONFIG" not in out


def test_check_says_training_is_off(tmp_path, serve, capsys):
    """Issue 20.4: with model_training.enabled: false no run can start, and check says so (the
    CLI exits 1, the Check button's report is not ok) instead of "can start a run"."""
    cfg = disabled_project(tmp_path)
    capsys.readouterr()
    code = main(["training", "check", "local", cfg])
    out = capsys.readouterr().out
    assert code == 1, out
    assert ("Training is off (model_training.enabled: false in %s), so no run can start; set it "
            "to true to train." % cfg) in out
    assert "can start a run" not in out.replace("cannot start a run", "")
    _, url = serve(cfg)
    _, report = Client(url).json("POST", "/admin/training/api/backends/local/check", headers=H)
    assert report["ok"] is False and report["disabled"] is True


def test_agent_version_mismatch_is_a_warning(tmp_path, serve, capsys):
    cfg = agent_project(tmp_path)
    main(["training", "register", "lab-workstation", cfg])
    token = re.search(r"POTATO_TRAINING_TOKEN=(\S+)", capsys.readouterr().out).group(1)
    _, url = serve(cfg)
    Client(url).json("POST", "/agent/v1/backends/lab-workstation/claim",
                     json_body={"host": "old-box", "version": "2.13.1"},
                     headers={"Authorization": "Bearer " + token})
    code, out = check_cli(cfg, capsys)
    assert code == 0
    assert ("warning: the agent runs potato 2.13.1 and this server 2.14.0; install the server's "
            "version on the training machine") in out


# -- 3. local-only settings stay local -------------------------------------------------------

def test_local_settings_do_not_reach_remote_runs(tmp_path, serve, fake_host):  # noqa: F811
    top_keys = "  device: \"cuda:1\"\n  num_threads: 3\n  max_ram_mb: 50\n"
    cfg = make_project(tmp_path, top_keys + ssh_backend(num_threads=5, gpus="auto"))
    _, url = serve(cfg)
    c = Client(url)
    run = wait_run(c, start_run(c, backend="gpu-server", schemas=["sentiment"],
                                trainer="test-env"), timeout=120)
    assert run["status"] == "success", run
    assert run["metrics"]["omp"] == "5" and run["metrics"]["openblas"] == "5"
    spec = json.load(open(tmp_path / "annotation_output" / "training" / "runs" /
                          run["run_id"] / "spec.json"))
    assert spec["device"] == "auto" and spec["num_threads"] is None
    assert spec["extra"] == {}  # the server's paths never leave it
    # ... and the same settings still apply to local runs
    run = wait_run(c, start_run(c, backend="local", schemas=["sentiment"], trainer="test-env"))
    assert run["metrics"]["omp"] == "3"
    spec = json.load(open(tmp_path / "annotation_output" / "training" / "runs" /
                          run["run_id"] / "spec.json"))
    assert spec["device"] == "cuda:1"


# -- 5. server_url ----------------------------------------------------------------------------

def test_register_prints_server_url(tmp_path, capsys):
    cfg = agent_project(tmp_path, top="server_url: https://annotate.example.org/")
    capsys.readouterr()
    assert main(["training", "register", "lab-workstation", cfg]) == 0
    out = capsys.readouterr().out
    assert ("potato training agent --server https://annotate.example.org --backend "
            "lab-workstation") in out
    assert ('pip install "potato-annotation[train-text] @ https://annotate.example.org/agent/v1/'
            'potato_annotation-2.14.0-py3-none-any.whl"') in out
    assert "is a guess" not in out


def test_register_without_server_url_says_it_guessed(tmp_path, capsys):
    cfg = agent_project(tmp_path)
    capsys.readouterr()
    assert main(["training", "register", "lab-workstation", cfg]) == 0
    out = capsys.readouterr().out
    url = re.search(r"--server (\S+) --backend", out).group(1)
    assert f"{url} is a guess (server_url is not set in {cfg})" in out
    assert "set server_url to it and register again" in out


def test_validate_server_url(tmp_path, capsys):
    cfg = agent_project(tmp_path, top="server_url: http://localhost:8000")
    assert main(["validate", cfg, "--strict"]) == 1
    assert "server_url is http://localhost:8000, a loopback address" in capsys.readouterr().out
    cfg = agent_project(tmp_path)
    assert main(["validate", cfg, "--strict"]) == 0  # a note, so the tutorial's configs pass
    assert "note: " in capsys.readouterr().out
    for bad, why in (("annotate.example.org", "it must start with http:// or https://"),
                     ("https://annotate.example.org:abc", "Port could not be cast"),
                     ("http://[::1", "Invalid IPv6 URL"),
                     ("https://ann:secret@annotate.example.org", "holds a user name or password"),
                     ("http://", "it has no host name")):
        cfg = agent_project(tmp_path, top="server_url: %s" % json.dumps(bad), labels=False)
        assert main(["validate", cfg]) == 1, bad
        out = capsys.readouterr().out
        assert "server_url is %r: " % bad in out and why in out and "note:" not in out, out
    for loop in ("http://[::1]:8000", "http://127.0.0.2", "http://[::ffff:127.0.0.1]:80",
                 "http://LOCALHOST:8000", "http://0.0.0.0:8000"):
        cfg = agent_project(tmp_path, top="server_url: %s" % json.dumps(loop), labels=False)
        assert main(["validate", cfg, "--strict"]) == 1, loop
        assert "a loopback address" in capsys.readouterr().out
    cfg = agent_project(tmp_path, top="server_url:", labels=False)  # empty: as if unset
    assert main(["validate", cfg, "--strict"]) == 0
    assert "note: " in capsys.readouterr().out


def test_register_never_guesses_loopback(monkeypatch, tmp_path):
    from potato.commands import register

    monkeypatch.setattr(register.socket, "getfqdn", lambda: "localhost")
    monkeypatch.setattr(register.socket, "gethostname", lambda: "vm")
    assert register.guess_host("127.0.0.1") == "vm"
    assert register.guess_host("0.0.0.0") == "vm"
    assert register.guess_host("annotate.lab.org") == "annotate.lab.org"
    monkeypatch.setattr(register.socket, "gethostname", lambda: "localhost")
    assert register.guess_host("::") == "this-server"

    class Cfg:
        server_url = None
        output_dir = str(tmp_path)  # no server runs there: the config's port

        class server:
            host, port, tls_cert = "2001:db8::1", 8000, None

    assert register.server_url(Cfg) == ("http://[2001:db8::1]:8000", True)


# -- 6. a backend's description -----------------------------------------------------------------

def test_description_in_menu_and_check(tmp_path, serve, capsys):
    cfg = agent_project(tmp_path)
    code, out = check_cli(cfg, capsys)
    assert out.splitlines()[0] == "the lab's workstation under the desk"
    _, url = serve(cfg)
    page = Client(url).get("/admin/training", headers=H).text
    assert 'title="the lab&#x27;s workstation under the desk"' in page
    assert re.search(r'<p class="hint" id="backend-description"></p>', page)  # local is default
    data = json.loads(re.search(r'id="training-data">(.*?)</script>', page, re.S).group(1))
    assert data["descriptions"]["lab-workstation"] == "the lab's workstation under the desk"


# -- 8. the server's own wheel for agent machines ----------------------------------------------

@pytest.mark.slow
def test_served_wheel_installs_and_runs_the_agent(tmp_path, serve, capsys):
    """The install line register prints, into a fresh venv (with the system's site packages, so
    the trainer's packages already here are reused, not downloaded); then one run."""
    cfg = agent_project(tmp_path)
    _, url = serve(cfg)
    text = open(cfg).read() + f"server_url: {url.rstrip('/')}\n"
    open(cfg, "w").write(text)
    capsys.readouterr()
    assert main(["training", "register", "lab-workstation", cfg]) == 0
    out = capsys.readouterr().out
    token = re.search(r"POTATO_TRAINING_TOKEN=(\S+)", out).group(1)
    line = re.search(r'pip install "(potato-annotation\[train-text\] @ \S+)"', out).group(1)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # The venv's own (older) setuptools would hide the system's one that torch asks for.
    subprocess.run([str(venv / "bin" / "pip"), "uninstall", "-y", "-q", "setuptools"],
                   capture_output=True, timeout=120, env=env)
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index",
                        "--disable-pip-version-check", line], capture_output=True, text=True,
                       timeout=300, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    c = Client(url)
    run_id = start_run(c, backend="lab-workstation", schemas=["sentiment"],
                       trainer="text-naive-bayes")
    r = subprocess.run([str(venv / "bin" / "potato"), "training", "agent", "--server",
                        url.rstrip("/"), "--backend", "lab-workstation", "--once",
                        "--workdir", str(tmp_path / "work"), "--poll-interval", "0.2"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=dict(env, POTATO_TRAINING_TOKEN=token))
    assert r.returncode == 0, r.stderr[-3000:]
    run = wait_run(c, run_id)
    assert run["status"] == "success", run
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    assert f"(potato {potato.__version__}," in log and "warning: the agent runs" not in log
    # the agent that ran was the installed one, not this checkout
    assert str(venv) in log


def test_wheel_route_answers_when_it_cannot_build(tmp_path, serve, monkeypatch):
    from potato.training.exchange import wheel

    monkeypatch.setattr(wheel, "PROJECT_FILES", ("no-such-pyproject.toml",))
    monkeypatch.setattr(wheel, "SOURCE_ROOT", str(tmp_path / "installed"))
    os.makedirs(tmp_path / "installed")
    _, url = serve(agent_project(tmp_path))
    r = Client(url).get(wheel.URL_PATH, headers={"Accept": "application/json"})
    assert r.status == 503
    error = json.loads(r.body)["error"]
    assert "runs an installed Potato, not a checkout" in error
    assert "Install Potato 2.14.0 from a checkout of that version instead" in error
    assert str(tmp_path) not in error  # a public route names no path of the server


def test_wheel_head_and_get_on_one_connection(tmp_path, serve):
    import http.client

    from potato.training.exchange import wheel

    _, url = serve(agent_project(tmp_path))
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("HEAD", wheel.URL_PATH)
        head = conn.getresponse()
        assert head.status == 200 and head.read() == b""
        size = int(head.headers["Content-Length"])
        conn.request("GET", wheel.URL_PATH)  # the same connection: HEAD sent no body
        got = conn.getresponse()
        body = got.read()
        assert got.status == 200 and len(body) == size and body[:2] == b"PK"
    finally:
        conn.close()


# -- 9. the eleven common failures, as the run log says them ------------------------------------

def _ssh_case(tmp_path, serve, monkeypatch, trainer="text-naive-bayes", session=None, **keys):
    _, url = serve(make_project(tmp_path, ssh_backend(**keys)))
    if session:
        fake_ssh_for_agent_session(monkeypatch, **session)
    c = Client(url)
    return c, start_run(c, backend="gpu-server", schemas=["sentiment"], trainer=trainer)


def _torch_blocker(tmp_path):
    """A directory whose torch fails to import, as on a host without the trainer's packages."""
    d = tmp_path / "no-torch"
    (d / "torch").mkdir(parents=True)
    (d / "torch" / "__init__.py").write_text("raise ImportError(\"No module named 'torch'\")\n")
    return str(d)


def case_ssh_denied(tmp_path, serve, monkeypatch):
    monkeypatch.setenv("FAKE_SSH_MODE", "denied")
    return _ssh_case(tmp_path, serve, monkeypatch)


def case_python_missing(tmp_path, serve, monkeypatch):
    return _ssh_case(tmp_path, serve, monkeypatch, python="/opt/conda/bin/python3")


def case_gpu_busy(tmp_path, serve, monkeypatch):
    monkeypatch.setenv("FAKE_GPUS", "0,NVIDIA A100,40960,39000,1960,90,8.0;"
                                    "1,NVIDIA A100,40960,38000,2960,80,8.0")
    env = {"PYTHONPATH": _torch_blocker(tmp_path) + os.pathsep + ROOT,
           "POTATO_TRAINER_PLUGINS": PLUGINS}
    return _ssh_case(tmp_path, serve, monkeypatch, min_free_gpu_mb=4000, env=env)


def case_trainer_import(tmp_path, serve, monkeypatch):
    env = {"PYTHONPATH": _torch_blocker(tmp_path) + os.pathsep + ROOT}
    return _ssh_case(tmp_path, serve, monkeypatch, trainer="hf-text-classification", env=env,
                     gpus="none")


def case_no_kernels(tmp_path, serve, monkeypatch):
    torch = pytest.importorskip("torch")
    if torch.version.cuda:
        pytest.skip("this torch has CUDA kernels")
    monkeypatch.setenv("FAKE_GPUS", "0,NVIDIA A100,40960,1000,39960,5,8.0")
    return _ssh_case(tmp_path, serve, monkeypatch)


def case_silent_agent(tmp_path, serve, monkeypatch):
    return _ssh_case(tmp_path, serve, monkeypatch, trainer="test-steps", heartbeat_timeout_s=2,
                     session={"FAKE_SSH_MODE": "hang"})


def case_copy_stalled(tmp_path, serve, monkeypatch):
    from potato.training.web import agent_routes as agent_api

    monkeypatch.setattr(agent_api, "COPY_STALL_S", 1)
    c, run_id = _ssh_case(tmp_path, serve, monkeypatch, trainer="test-big-artifact",
                          session={"FAKE_SSH_STALL_BYTES": str(1 << 20)})
    return c, run_id


def case_no_sbatch(tmp_path, serve, monkeypatch):
    _, url = serve(make_project(tmp_path, slurm_backend(
        env={"PATH": os.path.dirname(sys.executable), "PYTHONPATH": ROOT})))
    c = Client(url)
    return c, start_run(c, backend="cluster", schemas=["sentiment"], trainer="text-naive-bayes")


def case_time_limit(tmp_path, serve, monkeypatch):
    monkeypatch.setenv("FAKE_SLURM_SCENARIO", "timelimit")
    _, url = serve(make_project(tmp_path, slurm_backend()))
    c = Client(url)
    return c, start_run(c, backend="cluster", schemas=["sentiment"], trainer="test-steps",
                        params={"seconds": 60})


def case_agent_queued(tmp_path, serve, monkeypatch):
    cfg = make_project(tmp_path, "  backends:\n    lab-workstation: {type: agent}\n")
    _, url = serve(cfg)
    assert main(["training", "register", "lab-workstation", cfg]) == 0  # but no agent polls
    c = Client(url)
    return c, start_run(c, backend="lab-workstation", schemas=["sentiment"],
                        trainer="text-naive-bayes")


def case_nvrtc(tmp_path, serve, monkeypatch):
    return _ssh_case(tmp_path, serve, monkeypatch, trainer="test-nvrtc")


# (case, the tutorial's text, the run's status when the log is read)
COMMON_FAILURES = [
    (case_ssh_denied, "ssh to gpu.example.org failed: Permission denied.", "error"),
    (case_python_missing, "/opt/conda/bin/python3 was not found on gpu.example.org.", "error"),
    (case_gpu_busy, "No GPU has 4000 MB free.", "error"),
    (case_trainer_import, "Trainer 'hf-text-classification' could not be imported.", "error"),
    (case_no_kernels, "This host's torch has no kernels for any of its GPUs.", "error"),
    (case_silent_agent, "No word from the agent on gpu-server for 2 seconds.", "error"),
    (case_copy_stalled, "The copy from gpu.example.org sent nothing for 1 s.", "error"),
    (case_no_sbatch, "login.cluster.example.org has no sbatch on PATH, so it cannot submit jobs.",
     "error"),
    (case_time_limit, "SLURM job 4242 ended before the worker finished: it reached its time "
                      "limit.", "error"),
    (case_agent_queued, "start potato training agent --backend lab-workstation", "queued"),
    (case_nvrtc, "nvrtc: error: failed to open libnvrtc-builtins.so.13.0.", "error"),
]


@pytest.fixture
def both_fakes(tmp_path, monkeypatch, fake_host, cluster):  # noqa: F811
    return fake_host


@pytest.mark.parametrize("case,text,status", COMMON_FAILURES,
                         ids=[c[0].__name__[5:] for c in COMMON_FAILURES])
def test_common_failure_texts_at_run_time(tmp_path, serve, monkeypatch, both_fakes, case, text,
                                          status):
    c, run_id = case(tmp_path, serve, monkeypatch)
    if status == "queued":
        time.sleep(1)
        run = wait_run(c, run_id, until=("queued",))
    else:
        run = wait_run(c, run_id, timeout=120)
    assert run["status"] == status, run
    log = c.get(f"/admin/training/api/runs/{run_id}/log", headers=H).text
    assert text in log, log[-3000:]
    if status == "error":
        assert text in run["error"], run["error"]
    else:
        assert text in run["step"]


# -- 10. the backend's env applies to every remote command: check and a run agree -------------

def _host_path(tmp_path):
    """A login PATH with Python and the basic tools, but none of the fakes."""
    return os.pathsep.join([os.path.dirname(sys.executable), "/usr/bin", "/bin"])


def test_env_path_gives_check_and_run_the_same_gpus(tmp_path, serve, monkeypatch,
                                                    fake_host):  # noqa: F811
    import shutil

    gpu_bin = tmp_path / "gpu-bin"
    gpu_bin.mkdir()
    shutil.copy(os.path.join(ROOT, "tests", "fakes", "nvidia-smi"), gpu_bin / "nvidia-smi")
    monkeypatch.setenv("FAKE_SSH_REMOTE_PATH", _host_path(tmp_path))
    monkeypatch.setenv("FAKE_GPUS", "0,NVIDIA A100,40960,1000,39960,5,8.0")
    env = {"PATH": str(gpu_bin) + os.pathsep + _host_path(tmp_path),
           "PYTHONPATH": _torch_blocker(tmp_path) + os.pathsep + ROOT,  # no torch: no kernel test
           "POTATO_TRAINER_PLUGINS": PLUGINS}
    _, url = serve(make_project(tmp_path, ssh_backend(env=env)))
    c = Client(url)
    _, report = c.json("POST", "/admin/training/api/backends/gpu-server/check", headers=H)
    assert report["ok"], report
    assert any(line.startswith("GPU 0: NVIDIA A100") for line in report["lines"]), report
    assert report["gpu"] == "0"
    run = wait_run(c, start_run(c, backend="gpu-server", schemas=["sentiment"],
                                trainer="test-env"), timeout=120)
    assert run["status"] == "success", run
    assert run["metrics"]["cuda_visible"] == "0"


def test_env_path_gives_check_and_run_the_same_slurm(tmp_path, serve, monkeypatch,
                                                     cluster):  # noqa: F811
    monkeypatch.setenv("FAKE_SSH_REMOTE_PATH", _host_path(tmp_path))
    fakes = os.path.join(ROOT, "tests", "fakes")
    env = {"PATH": os.pathsep.join([os.path.join(fakes, "slurm"), os.path.join(fakes, "scontrol"),
                                    _host_path(tmp_path)]), "PYTHONPATH": ROOT}
    _, url = serve(make_project(tmp_path, slurm_backend(env=env)))
    c = Client(url)
    _, report = c.json("POST", "/admin/training/api/backends/cluster/check", headers=H)
    assert report["ok"], report
    assert set(report["commands"]) >= {"sbatch", "squeue", "scancel"}
    assert all(report["commands"][k] for k in ("sbatch", "squeue", "scancel"))
    run = wait_run(c, start_run(c, backend="cluster", schemas=["sentiment"],
                                trainer="text-naive-bayes"), timeout=120)
    assert run["status"] == "success", run


def test_validate_notes_an_empty_writeback(tmp_path, capsys):
    cfg = make_project(tmp_path, labels=False)
    text = open(cfg).read()
    with open(cfg, "w") as f:
        f.write(text.replace("    schemas: [sentiment]\n", "    schemas: []\n"))
    assert main(["validate", cfg, "--strict"]) == 0  # a note: the tutorial's configs pass
    out = capsys.readouterr().out
    assert "note: " in out and ("writeback.schemas is empty, so runs train models whose "
                                "predictions annotators never see") in out
