"""Pure builders and parsers of the ssh backend and the GPU choice."""

import json
import os
import subprocess
import sys

import pytest

from potato.training.remote import gpus
from potato.training.backends import errors
from potato.training.backends import sshcmd
from potato.training.backends.ssh import SshOptions
from potato.training.remote import protocol

HOSTILE = "/tmp/pt dir/it's; $(touch HACKED) `touch HACKED2` \"q\"\nline"

# Captured from a real `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` (driver 550).
REAL_SMI = """\
0, NVIDIA A100-SXM4-80GB, 81920, 70321, 11157, 98, 8.0
1, NVIDIA A100-SXM4-80GB, 81920, 4, 81475, 0, 8.0
2, Tesla V100-PCIE-16GB, 16384, 0, 16144, [N/A], 7.0
"""


def test_ssh_argv_has_safe_defaults_and_maps_keys():
    b = SshOptions(host="gpu.example.org", user="ann", port=2222, identity_file="/keys/id")
    argv = sshcmd.ssh_argv(b, "true", "/tmp/ctl", forward="/tmp/s.sock:127.0.0.1:8000")
    assert argv[0] == "ssh"
    opts = [argv[i + 1] for i, a in enumerate(argv) if a == "-o"]
    assert "BatchMode=yes" in opts and "StrictHostKeyChecking=accept-new" in opts
    assert "ConnectTimeout=15" in opts and "ServerAliveInterval=15" in opts
    assert "LogLevel=ERROR" in opts and "ControlPath=/tmp/ctl/c" in opts
    assert not any("StrictHostKeyChecking=no" in o for o in opts)
    assert argv[argv.index("-l") + 1] == "ann" and argv[argv.index("-p") + 1] == "2222"
    assert argv[argv.index("-i") + 1] == "/keys/id"
    assert argv[argv.index("-R") + 1] == "/tmp/s.sock:127.0.0.1:8000"
    assert argv[-3:] == ["--", "gpu.example.org", "true"]


def test_ssh_argv_minimal():
    argv = sshcmd.ssh_argv(SshOptions(host="alias"), "cmd")
    assert "-l" not in argv and "-p" not in argv and "-i" not in argv and "-R" not in argv
    assert argv[-3:] == ["--", "alias", "cmd"]


def test_probe_command_quotes_hostile_values(tmp_path):
    cmd = sshcmd.probe_command(sys.executable, HOSTILE, "abc123", "k")
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, cwd=tmp_path,
                       env=dict(os.environ, HOME=str(tmp_path)))
    assert r.returncode == 0, r.stderr
    info = sshcmd.parse_probe(r.stdout)
    assert info["remote_dir"] == HOSTILE and info["code"] is False
    assert not list(tmp_path.glob("HACKED*"))


def test_probe_reserved_exit_codes(tmp_path):
    r = subprocess.run(["sh", "-c", sshcmd.probe_command("python-nope", "~/x", "h", "k")],
                       capture_output=True, text=True)
    assert r.returncode == protocol.REMOTE_NO_PYTHON
    old = tmp_path / "python3.6"
    old.write_text("#!/bin/sh\n"
                   "case \"$2\" in *'print'*) echo 'POTATO-PYTHON 3.6';; esac\nexit 1\n")
    old.chmod(0o755)
    r = subprocess.run(["sh", "-c", sshcmd.probe_command(str(old), "~/x", "h", "k")],
                       capture_output=True, text=True)
    assert r.returncode == protocol.REMOTE_OLD_PYTHON
    assert sshcmd.old_python_version(r.stdout) == "3.6"


def test_install_and_agent_commands_quote_hostile_paths(tmp_path):
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"# potato\n"
        info = tarfile.TarInfo("potato/__init__.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    remote = str(tmp_path / "r d;$(touch HACKED)")
    cmd = sshcmd.install_code_command(sys.executable, remote, "h1")
    r = subprocess.run(["sh", "-c", cmd], input=buf.getvalue(), capture_output=True,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert os.path.isfile(os.path.join(remote, "code", "h1", "potato", "__init__.py"))
    assert not list(tmp_path.glob("HACKED*"))
    # A second install of the same hash (another copy won the race) keeps the first.
    r = subprocess.run(["sh", "-c", cmd], input=buf.getvalue(), capture_output=True)
    assert r.returncode == 0
    assert [p for p in os.listdir(os.path.join(remote, "code")) if p.startswith(".tmp")] == []
    agent = sshcmd.agent_command("python3", remote, "h1", "/tmp/s;x.sock", "r1", "r1-abc")
    assert "'/tmp/s;x.sock'" in agent and "sh -c" in agent


def test_ssh_failure_messages():
    m = errors.ssh_failure("gpu.example.org", "ann", 255,
                           "ann@gpu.example.org: Permission denied (publickey).")
    assert m.startswith("ssh to gpu.example.org failed: Permission denied. ")
    assert "ssh-copy-id ann@gpu.example.org" in m
    m = errors.ssh_failure("h", None, 255, "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS "
                                           "CHANGED! @@@\nHost key verification failed.")
    assert "host key does not match" in m and "ssh-keygen -R h" in m
    m = errors.ssh_failure("h", None, 255, "ssh: Could not resolve hostname h: Name or service")
    assert "does not resolve" in m
    m = errors.ssh_failure("h", None, 255, "something odd")
    assert m == "ssh to h failed (exit 255): something odd"


def test_parse_real_nvidia_smi_output():
    cards = gpus.parse_nvidia_smi(REAL_SMI)
    assert [c["index"] for c in cards] == [0, 1, 2]
    assert cards[1]["memory_free_mb"] == 81475 and cards[2]["utilization_pct"] is None
    assert cards[0]["compute_cap"] == "8.0"
    with pytest.raises(gpus.NvidiaSmiParseError, match="unexpected nvidia-smi line"):
        gpus.parse_nvidia_smi("No devices were found\n")


def test_nvidia_smi_argv():
    assert gpus.nvidia_smi_argv() == [
        "nvidia-smi", "--query-gpu=index,name,memory.total,memory.used,memory.free,"
        "utilization.gpu,compute_cap", "--format=csv,noheader,nounits"]


TORCH_80 = {"version": "2.4.0", "archs": ["sm_70", "sm_80", "sm_90"], "cuda": "12.1"}


def test_auto_takes_most_free_memory_not_least_busy():
    cards = gpus.parse_nvidia_smi(REAL_SMI)
    chosen, why = gpus.choose("auto", cards, 2000, TORCH_80)
    assert chosen == "1" and "GPU 1" in why
    busy_but_free = [dict(cards[0], memory_free_mb=50000, utilization_pct=99),
                     dict(cards[1], memory_free_mb=40000, utilization_pct=0)]
    assert gpus.choose("auto", busy_but_free, 2000, TORCH_80)[0] == "0"


def test_auto_refuses_when_none_has_enough_free():
    cards = gpus.parse_nvidia_smi(REAL_SMI)
    with pytest.raises(gpus.GpuError) as e:
        gpus.choose("auto", cards, 90000, TORCH_80)
    assert str(e.value).startswith("No GPU has 90000 MB free.")


def test_auto_skips_gpus_without_kernels():
    cards = gpus.parse_nvidia_smi(REAL_SMI)
    only_sm90 = {"version": "2.5", "archs": ["sm_90"], "cuda": "12.4"}
    with pytest.raises(gpus.GpuError) as e:
        gpus.choose("auto", cards, 10, only_sm90)
    assert str(e.value).startswith("This host's torch has no kernels for any of its GPUs.")
    v100_ok = {"version": "2.5", "archs": ["sm_70"], "cuda": "12.4"}
    assert gpus.choose("auto", cards, 10, v100_ok)[0] == "2"
    ptx = {"version": "2.5", "archs": ["sm_70", "compute_75"], "cuda": "12.4"}
    assert gpus.choose("auto", cards, 10, ptx)[0] == "1"  # PTX runs on 8.0


def test_pinned_none_and_no_gpus():
    cards = gpus.parse_nvidia_smi(REAL_SMI)
    assert gpus.choose("0,2", cards, 99999, None)[0] == "0,2"
    with pytest.raises(gpus.GpuError, match="no GPU 5"):
        gpus.choose("5", cards, 0, None)
    assert gpus.choose("none", cards, 0, None) == (None, "gpus: none: training on the CPU")
    assert gpus.choose("auto", [], 2000, None)[0] is None


def test_host_lock_is_exclusive(tmp_path):
    a = gpus.HostLock(str(tmp_path / "gpu.lock"))
    with pytest.raises(gpus.GpuError, match="held the GPU lock"):
        gpus.HostLock(str(tmp_path / "gpu.lock"), timeout=0.6)
    a.release()
    gpus.HostLock(str(tmp_path / "gpu.lock"), timeout=1).release()


def test_embedded_remote_scripts_are_python_3_8(tmp_path):
    """The snippets sent with python -c are checked like the modules that travel."""
    import shutil

    exe = shutil.which("vermin")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("vermin is not installed")
        pytest.skip("vermin not installed")
    for name in ("PROBE_PY", "INSTALL_PY", "VENV_PY"):
        path = tmp_path / (name + ".py")
        path.write_text(getattr(sshcmd, name))
        r = subprocess.run([exe, "--no-config-file", "-t=3.8-", "--violations", str(path)],
                           capture_output=True, text=True)
        assert r.returncode == 0, (name, r.stdout)
    json.loads(json.dumps(gpus.TORCH_ARCHS))
