"""Fast unit tests for choosing a GPU on a host (potato/training/remote/gpus.py): nvidia-smi's
output, torch's kernels, the choice and its sentences, the host lock, and take(). A fake
nvidia-smi and a fake python (shell scripts on PATH) stand in for the real ones. Also the tests
tools/mutation.py runs against gpus.py (docs/testing.md, "Mutation testing")."""

import os
import stat
import sys

import pytest

from potato.training.remote import gpus
from potato.training.remote.protocol import RunSettings

SMI = ("0, NVIDIA A100-SXM4-80GB, 81920, 1000, 80920, 35, 8.0\n"
       "\n"
       "1, Tesla V100, 16384, 384, 16000, [N/A], 7.0\n")


# What a real nvidia-smi answers for each field of --query-gpu (csv, noheader, nounits); a field
# it does not know is refused the way it refuses one.
FAKE_SMI = r"""#!/bin/sh
case "$1" in --query-gpu=*) ;; *) echo "bad argument $1" >&2; exit 2;; esac
[ "$2" = --format=csv,noheader,nounits ] || { echo "bad format $2" >&2; exit 2; }
line=""
for f in $(echo "${1#--query-gpu=}" | tr ',' ' '); do
  case "$f" in
    index) v=0;; name) v="NVIDIA A100-SXM4-80GB";; memory.total) v=81920;;
    memory.used) v=1000;; memory.free) v=80920;; utilization.gpu) v=35;;
    compute_cap) v=8.0;;
    *) echo "Field \"$f\" is not a valid field to query." >&2; exit 2;;
  esac
  line="${line:+$line, }$v"
done
echo "$line"
"""


def test_read_gpus_asks_nvidia_smi_for_every_field_it_reads(tmp_path):
    d = tmp_path / "bin"
    d.mkdir()
    (d / "nvidia-smi").write_text(FAKE_SMI)
    (d / "nvidia-smi").chmod(0o755)
    assert gpus.read_gpus(_env(d)) == [
        {"index": 0, "name": "NVIDIA A100-SXM4-80GB", "memory_total_mb": 81920,
         "memory_used_mb": 1000, "memory_free_mb": 80920, "utilization_pct": 35,
         "compute_cap": "8.0"}]
    assert gpus.nvidia_smi_argv()[0] == "nvidia-smi"
    assert issubclass(gpus.NvidiaSmiParseError, gpus.GpuError)


def test_parse_nvidia_smi():
    assert gpus.parse_nvidia_smi(SMI) == [
        {"index": 0, "name": "NVIDIA A100-SXM4-80GB", "memory_total_mb": 81920,
         "memory_used_mb": 1000, "memory_free_mb": 80920, "utilization_pct": 35,
         "compute_cap": "8.0"},
        {"index": 1, "name": "Tesla V100", "memory_total_mb": 16384, "memory_used_mb": 384,
         "memory_free_mb": 16000, "utilization_pct": None, "compute_cap": "7.0"}]
    # an older nvidia-smi without compute_cap, and one that does not know it
    assert gpus.parse_nvidia_smi("2, G, 10, 1, 9, 0")[0]["compute_cap"] is None
    assert gpus.parse_nvidia_smi("2, G, 10, 1, 9, 0, [N/A]")[0]["compute_cap"] is None
    assert gpus.parse_nvidia_smi("2, G, 10, 1, 9, 0, ")[0]["compute_cap"] is None
    assert gpus.parse_nvidia_smi("") == []
    assert gpus.parse_nvidia_smi("  \n") == []


@pytest.mark.parametrize("line", ["No devices were found", "0, G, 10, 1, 9",
                                  "0, G, 10, [N/A], 9, 0, 8.0", "x, G, 10, 1, 9, 0"])
def test_parse_nvidia_smi_refuses(line):
    with pytest.raises(gpus.NvidiaSmiParseError) as e:
        gpus.parse_nvidia_smi("0, G, 10, 1, 9, 0, 8.0\n" + line + "\n")
    assert str(e.value) == "unexpected nvidia-smi line (want %s): %r" % (gpus.QUERY, line)


def _exe(d, name, body):
    d.mkdir(exist_ok=True)
    p = d / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return str(p)


def _env(d):
    return {"PATH": str(d) + os.pathsep + "/usr/bin" + os.pathsep + "/bin"}


def test_read_gpus(tmp_path, monkeypatch):
    d = tmp_path / "bin"
    assert gpus.read_gpus(_env(tmp_path / "empty")) == []
    _exe(d, "nvidia-smi", "[ \"$1\" = --query-gpu=%s ] || exit 9\n"
                          "[ \"$2\" = --format=csv,noheader,nounits ] || exit 9\n"
                          "printf '%%s' \"$SMI_OUT\"\n" % gpus.QUERY)
    env = dict(_env(d), SMI_OUT=SMI)
    assert [g["index"] for g in gpus.read_gpus(env)] == [0, 1]
    monkeypatch.setenv("PATH", _env(d)["PATH"])
    monkeypatch.setenv("SMI_OUT", "3, G, 10, 1, 9, 0, 9.0")
    assert [g["index"] for g in gpus.read_gpus()] == [3]


def test_read_gpus_failures(tmp_path):
    d = tmp_path / "bin"
    _exe(d, "nvidia-smi", "echo 'NVIDIA-SMI has failed' >&2\nexit 6\n")
    with pytest.raises(gpus.GpuError) as e:
        gpus.read_gpus(_env(d))
    assert str(e.value).startswith("nvidia-smi failed (exit 6): NVIDIA-SMI has failed.")
    _exe(d, "nvidia-smi", "exec sleep 30\n")
    with pytest.raises(gpus.GpuError, match="nvidia-smi did not finish in time"):
        gpus.read_gpus(_env(d), timeout=0.3)


def _python(tmp_path, body):
    return _exe(tmp_path / "py", "python", body)


def test_torch_archs(tmp_path):
    py = _python(tmp_path, "[ \"$1\" = -c ] || exit 9\n"
                           "echo 'some warning'\necho \"$TORCH_OUT\"\n")
    got = gpus.torch_archs(py, env=dict(_env(tmp_path), TORCH_OUT='{"archs": ["sm_80"]}'))
    assert got == {"archs": ["sm_80"]}
    assert gpus.torch_archs(py, env=dict(_env(tmp_path), TORCH_OUT="not json")) is None
    assert gpus.torch_archs(_python(tmp_path, "exit 0\n"), env=_env(tmp_path)) is None
    assert gpus.torch_archs(_python(tmp_path, "echo '{}'; exit 1\n"), env=_env(tmp_path)) \
        is None
    assert gpus.torch_archs(_python(tmp_path, "echo '{}'\nexec sleep 30\n"),
                            env=_env(tmp_path), timeout=0.3) is None
    assert gpus.torch_archs(_python(tmp_path, "echo '{\"a\": 1}'\n"), env=_env(tmp_path)) == \
        {"a": 1}


def test_torch_archs_runs_the_probe(tmp_path):
    # a stand-in torch package: the probe reports its version, its kernels and its CUDA
    torch = tmp_path / "site" / "torch"
    torch.mkdir(parents=True)
    (torch / "__init__.py").write_text(
        "__version__ = '2.4.1'\n"
        "class version:\n    cuda = '12.1'\n"
        "class cuda:\n    @staticmethod\n    def get_arch_list():\n"
        "        return ['sm_80', 'sm_90']\n")
    env = dict(_env(tmp_path), PYTHONPATH=str(tmp_path / "site"))
    assert gpus.torch_archs(sys.executable, env=env) == {
        "version": "2.4.1", "archs": ["sm_80", "sm_90"], "cuda": "12.1"}
    # a CPU-only torch has no CUDA kernels at all
    (torch / "__init__.py").write_text(
        "__version__ = '2.4.1+cpu'\n"
        "class version:\n    cuda = None\n"
        "class cuda:\n    @staticmethod\n    def get_arch_list():\n        return ['sm_80']\n")
    assert gpus.torch_archs(sys.executable, env=env) == {
        "version": "2.4.1+cpu", "archs": [], "cuda": None}
    # a torch that does not import (as without torch)
    (torch / "__init__.py").write_text("raise ImportError('No module named torch')\n")
    assert gpus.torch_archs(sys.executable, env=env) is None


def test_has_kernels():
    a100 = {"compute_cap": "8.0"}
    assert gpus.has_kernels(a100, None) is True
    assert gpus.has_kernels({"compute_cap": None}, {"archs": []}) is True
    assert gpus.has_kernels({}, {"archs": []}) is True
    assert gpus.has_kernels(a100, {"archs": []}) is False
    assert gpus.has_kernels(a100, {}) is False
    assert gpus.has_kernels(a100, {"archs": None}) is False
    assert gpus.has_kernels(a100, {"archs": ["sm_80"]}) is True
    assert gpus.has_kernels(a100, {"archs": ["sm_86", "sm_70"]}) is False
    assert gpus.has_kernels(a100, {"archs": ["compute_80"]}) is True
    assert gpus.has_kernels(a100, {"archs": ["compute_70"]}) is True
    assert gpus.has_kernels(a100, {"archs": ["compute_86"]}) is False
    assert gpus.has_kernels(a100, {"archs": ["sm_8x", "sm", "lto_80", "sm_80"]}) is True
    assert gpus.has_kernels(a100, {"archs": ["sm_8x", "sm", "lto_80"]}) is False
    assert gpus.has_kernels({"compute_cap": "12.0"}, {"archs": ["sm_120"]}) is True
    assert gpus.has_kernels({"compute_cap": "8.6"}, {"archs": ["sm_86"]}) is True
    assert gpus.has_kernels({"compute_cap": "8.6"}, {"archs": ["sm_80"]}) is False
    assert gpus.has_kernels({"compute_cap": "8.6"}, {"archs": ["sm_68"]}) is False


CARDS = gpus.parse_nvidia_smi(SMI)


def test_choose_pinned_and_none():
    assert gpus.choose("none", CARDS, 0) == (None, "gpus: none: training on the CPU")
    assert gpus.choose(" none ", [], 0) == (None, "gpus: none: training on the CPU")
    assert gpus.choose("1", CARDS, 10 ** 9) == (
        "1", "taking GPU 1 (Tesla V100, 16000 MB free) (pinned by gpus: 1)")
    assert gpus.choose("1,0", CARDS, 0)[1] == (
        "taking GPU 1 (Tesla V100, 16000 MB free), GPU 0 (NVIDIA A100-SXM4-80GB, 80920 MB "
        "free) (pinned by gpus: 1,0)")
    with pytest.raises(gpus.GpuError) as e:
        gpus.choose("0,5,7", CARDS, 0)
    assert str(e.value) == "gpus is 0,5,7 but this host has no GPU 5,7 (it has 0, 1)."
    with pytest.raises(gpus.GpuError) as e:
        gpus.choose("0", [], 0)
    assert str(e.value) == "gpus is 0 but this host has no GPU 0 (it has none)."


def test_choose_auto():
    for setting in ("auto", None, "", " auto "):
        assert gpus.choose(setting, [], 0) == (None, "this host has no GPU: training on the CPU")
    assert gpus.choose("auto", CARDS, 2000) == (
        "0", "taking GPU 0 (NVIDIA A100-SXM4-80GB, 80920 of 81920 MB free, 35% busy)")
    v100 = [c for c in CARDS if c["index"] == 1]
    assert gpus.choose("auto", v100, 16000) == (
        "1", "taking GPU 1 (Tesla V100, 16000 of 16384 MB free, ?% busy)")
    with pytest.raises(gpus.GpuError) as e:
        gpus.choose("auto", v100, 16001)
    assert str(e.value).startswith("No GPU has 16001 MB free. The most is 16000 MB on GPU 1:")
    # equal free memory: the lower index
    twins = [dict(CARDS[0], index=3), dict(CARDS[0], index=2)]
    assert gpus.choose("auto", twins, 0)[0] == "2"
    assert gpus.choose("auto", twins[::-1], 0)[0] == "2"
    # cards without kernels are skipped, even with more free memory
    assert gpus.choose("auto", CARDS, 0, {"archs": ["sm_70"]})[0] == "1"


def test_choose_without_kernels():
    with pytest.raises(gpus.GpuError) as e:
        gpus.choose("auto", CARDS, 0, {"version": "2.4", "archs": ["sm_90"]})
    assert str(e.value).startswith(
        "This host's torch has no kernels for any of its GPUs. Torch 2.4 supports sm_90; the "
        "GPUs are NVIDIA A100-SXM4-80GB (compute 8.0), Tesla V100 (compute 7.0). Install")
    with pytest.raises(gpus.GpuError) as e:
        gpus.choose("auto", CARDS, 0, {"version": "2.4", "archs": []})
    assert "Torch 2.4 supports none; the GPUs" in str(e.value)


class Clock:
    def __init__(self):
        self.now = 50.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.slept.append(s)
        self.now += s


def test_host_lock(tmp_path, monkeypatch):
    path = str(tmp_path / "new" / "dir" / "gpu.lock")
    old = os.umask(0o022)
    try:
        a = gpus.HostLock(path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    clock = Clock()
    monkeypatch.setattr(gpus.time, "monotonic", clock)
    monkeypatch.setattr(gpus.time, "sleep", clock.sleep)
    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(gpus.GpuError) as e:
        gpus.HostLock(path, timeout=2)
    assert str(e.value) == "another run has held the GPU lock %s for 2 s" % path
    assert clock.slept == [0.5] * 5  # tries at 0, 0.5, ..., 2.0, 2.5: over the deadline
    assert len(os.listdir("/proc/self/fd")) == fds  # the refused lock's file is closed
    clock.slept[:] = []
    with pytest.raises(gpus.GpuError):
        gpus.HostLock(path)
    assert len(clock.slept) == 601  # 300 s by default
    a.release()
    assert a.fd is None
    a.release()
    b = gpus.HostLock(path, timeout=0)
    assert b.fd is not None
    b.release()


def _host(tmp_path, smi):
    d = tmp_path / "bin"
    _exe(d, "nvidia-smi", "printf '%%s' '%s'\n" % smi)
    py = _python(tmp_path, 'printf "%s" "$GPU_MARK" > "$(dirname "$0")/ran"\n'
                           'echo \'{"version": "2", "archs": ["sm_70"]}\'\n')
    return _env(d), py


def test_take(tmp_path):
    env, py = _host(tmp_path, SMI)
    env["GPU_MARK"] = "the backend's env"
    lock, chosen, message = gpus.take(RunSettings(), py, str(tmp_path / "rd"), env)
    try:
        assert chosen == "1" and message.startswith("taking GPU 1 (Tesla V100")
        assert (tmp_path / "py" / "ran").read_text() == "the backend's env"
        assert os.path.exists(str(tmp_path / "rd" / "gpu.lock"))
        with pytest.raises(gpus.GpuError):
            gpus.HostLock(str(tmp_path / "rd" / "gpu.lock"), timeout=0)
    finally:
        lock.release()
    os.unlink(str(tmp_path / "py" / "ran"))
    lock, chosen, message = gpus.take(RunSettings(gpus="0"), py, str(tmp_path / "rd"), env)
    lock.release()
    assert chosen == "0" and not (tmp_path / "py" / "ran").exists()  # pinned: no probe


def test_take_without_gpus_does_not_probe_torch(tmp_path):
    env, py = _host(tmp_path, "")
    lock, chosen, message = gpus.take(RunSettings(), py, str(tmp_path / "rd"), env)
    lock.release()
    assert chosen is None and not (tmp_path / "py" / "ran").exists()


def test_take_releases_the_lock_when_it_fails(tmp_path):
    env, py = _host(tmp_path, SMI)
    with pytest.raises(gpus.GpuError, match="no GPU 4"):
        gpus.take(RunSettings(gpus="4"), py, str(tmp_path / "rd"), env)
    gpus.HostLock(str(tmp_path / "rd" / "gpu.lock"), timeout=0).release()
    with pytest.raises(gpus.GpuError, match="No GPU has"):
        gpus.take(RunSettings(min_free_gpu_mb=10 ** 6), py, str(tmp_path / "rd"), env)
    gpus.HostLock(str(tmp_path / "rd" / "gpu.lock"), timeout=0).release()


def test_how_long_the_probes_may_take(tmp_path, monkeypatch):
    # nvidia-smi answers in a second or it is hung (20 s); a cold torch import on a network
    # file system can take a minute (120 s)
    given = []
    run = gpus.proc.run

    def timed(argv, **kw):
        given.append((os.path.basename(argv[0]), kw["timeout"]))
        return run(argv, **kw)

    monkeypatch.setattr(gpus.proc, "run", timed)
    d = tmp_path / "bin"
    _exe(d, "nvidia-smi", "exit 0\n")
    assert gpus.read_gpus(_env(d)) == []
    assert gpus.torch_archs(_exe(d, "python", "echo '{}'\n"), env=_env(d)) == {}
    assert given == [("nvidia-smi", 20), ("python", 120)]
