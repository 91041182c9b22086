"""Fast unit tests for the ssh command builders (potato/training/backends/sshcmd.py), written
so that tools/mutation.py's mutants of that module fail: whole argv lists and the quoted
remote commands split back into their words."""

import json
import shlex
import subprocess
from types import SimpleNamespace

import pytest

from potato.training.backends import sshcmd
from potato.training.remote import model_source
from potato.training.remote.protocol import (REMOTE_ENV_FAILED, REMOTE_NO_CODE,
                                             REMOTE_NO_PYTHON, REMOTE_OLD_PYTHON)

BASE = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=4", "-o", "LogLevel=ERROR",
        "-o", "StrictHostKeyChecking=accept-new"]
CONTROL = ["-o", "ControlMaster=auto", "-o", "ControlPath=/tmp/ctl/c", "-o", "ControlPersist=20"]


def _bcfg(**kw):
    d = dict(host="gpu.example.org", user=None, port=None, identity_file=None)
    d.update(kw)
    return SimpleNamespace(**d)


def test_ssh_options_exactly():
    assert sshcmd.ssh_options(None) == BASE
    assert sshcmd.ssh_options("") == BASE
    assert sshcmd.ssh_options("/tmp/ctl") == BASE + CONTROL


def test_ssh_argv_exactly():
    assert sshcmd.ssh_argv(_bcfg(), "cmd") == ["ssh"] + BASE + ["--", "gpu.example.org", "cmd"]
    b = _bcfg(user="ann", port=2222, identity_file="/keys/id")
    assert sshcmd.ssh_argv(b, "cmd", "/tmp/ctl", forward="/s.sock:127.0.0.1:8000") == (
        ["ssh"] + BASE + CONTROL + ["-l", "ann", "-p", "2222", "-i", "/keys/id",
                                    "-R", "/s.sock:127.0.0.1:8000", "--", "gpu.example.org",
                                    "cmd"])


def test_control_exit_argv_exactly():
    b = _bcfg(user="ann", port=22)
    assert sshcmd.control_exit_argv(b, "/tmp/ctl") == (
        ["ssh"] + BASE + CONTROL + ["-l", "ann", "-p", "22", "-O", "exit", "--",
                                    "gpu.example.org"])


def test_shown_replaces_only_the_remote_command():
    assert sshcmd.shown(["ssh", "-p", "22", "--", "h", "long command"]) == (
        "ssh -p 22 -- h <agent command>")
    assert sshcmd.shown(["ssh", "--", "h", "x"], "probe") == "ssh -- h probe"


def test_sh_quotes_every_argument_and_runs_posix_sh():
    cmd = sshcmd.sh('printf "%s|" "$0" "$@"', "a b", "it's", "$HOME", "")
    words = shlex.split(cmd)
    assert words == ["/bin/sh", "-c", 'printf "%s|" "$0" "$@"', "potato", "a b", "it's",
                     "$HOME", ""]
    r = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True)
    assert r.stdout == "potato|a b|it's|$HOME||"


def test_with_env_reads_the_env_header_then_runs_the_command():
    assert ("exit %d;" % REMOTE_ENV_FAILED) in sshcmd.ENV_SH
    cmd = sshcmd.with_env('printf "%s|" "$A" "$B"; cat')
    assert shlex.split(cmd) == ["/bin/sh", "-c", sshcmd.ENV_SH, "potato",
                                'printf "%s|" "$A" "$B"; cat']
    stdin = sshcmd.env_header({"B": "two words", "A": "$x'"}) + b"rest"
    r = subprocess.run(["/bin/sh", "-c", cmd], input=stdin, capture_output=True)
    assert r.stdout == b"$x'|two words|rest"


def test_env_header():
    assert sshcmd.env_header({"B": "2", "A": "x y"}) == b"A=x y\nB=2\n\n"
    assert sshcmd.env_header({"U": "\xe9"}) == "U=\xe9\n\n".encode("utf-8")
    assert sshcmd.env_header(None) == b"\n"
    assert sshcmd.env_header({}) == b"\n"
    for bad in ("a\nb", "a\rb", "a\0b"):
        with pytest.raises(ValueError) as e:
            sshcmd.env_header({"OK": "1", "BADVAR": bad})
        assert "BADVAR" in str(e.value)


def test_probe_command_words():
    words = shlex.split(sshcmd.probe_command("python3", "~/p", "h1", "k1"))
    assert words == ["/bin/sh", "-c", sshcmd.PROBE_SH, "potato", "python3", sshcmd.PROBE_PY,
                     "~/p", "h1", "k1", "0"]
    assert shlex.split(sshcmd.probe_command("py", "d", "h", "k", 90.5))[-1] == "90.5"
    assert ("exit %d" % REMOTE_NO_PYTHON) in sshcmd.PROBE_SH
    assert ("exit %d" % REMOTE_OLD_PYTHON) in sshcmd.PROBE_SH
    assert 'print("POTATO-PYTHON %d.%d" % sys.version_info[:2])' in sshcmd.PROBE_SH


def test_parse_probe():
    out = "motd line\n" + sshcmd.PROBE_MARK + json.dumps({"python": "3.8.1"}) + "\nbye\n"
    assert sshcmd.parse_probe(out) == {"python": "3.8.1"}
    with pytest.raises(ValueError) as e:
        sshcmd.parse_probe("a" + "b" * 500)
    assert repr("b" * 500) in str(e.value)  # the last 500 characters


def test_old_python_version():
    assert sshcmd.old_python_version("x\nPOTATO-PYTHON 3.6\n") == "3.6"
    assert sshcmd.old_python_version("Python 2.7\n") == "older than 3.8"


def test_install_and_venv_commands_words():
    assert shlex.split(sshcmd.install_code_command("/u/py 3", "~/r d", "h1")) == [
        "/u/py 3", "-c", sshcmd.INSTALL_PY, "~/r d", "h1"]
    assert shlex.split(sshcmd.venv_command("py", "~/r", "k1", ["torch", "a b"])) == [
        "py", "-c", sshcmd.VENV_PY, "~/r", "k1", '["torch", "a b"]']


def test_agent_command_words():
    assert ("exit %d" % REMOTE_NO_CODE) in sshcmd.AGENT_SH
    assert shlex.split(sshcmd.agent_command("py", "~/r", "h1", "/s.sock", "r1", "j1")) == [
        "/bin/sh", "-c", sshcmd.AGENT_SH, "potato", "~/r", "h1", "py", "/s.sock", "r1", "j1"]


def test_venv_python():
    assert sshcmd.venv_python("~/potato/") == "~/potato/venv/bin/python"
    assert sshcmd.venv_python("/srv/p//") == "/srv/p/venv/bin/python"
    assert sshcmd.venv_python("/srv/BOX/") == "/srv/BOX/venv/bin/python"  # only "/" is cut


def test_model_check_command_and_its_answer():
    with open(model_source.__file__, "rb") as f:
        raw = f.read()
    assert raw.isascii()  # it travels on a command line, whatever the host's locale
    source = raw.decode("ascii")
    assert shlex.split(sshcmd.model_check_command("py", "org/m x")) == [
        "py", "-c", source, "org/m x"]
    line = model_source.MARK + json.dumps({"ok": 1, "sentence": "s" * 600})
    assert sshcmd.parse_model_check("noise\n" + line + "\n") == (True, "s" * 500)
    line = model_source.MARK + json.dumps({"ok": False, "sentence": 5})
    assert sshcmd.parse_model_check(line) == (False, "5")
    with pytest.raises(ValueError) as e:
        sshcmd.parse_model_check("a" + "b" * 500)
    assert repr("b" * 500) in str(e.value)
