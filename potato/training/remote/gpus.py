"""GPUs on the host where a run executes: read nvidia-smi, choose, lock (standard library, 3.8).

``gpus: auto`` takes the GPU with the most free memory (not the least utilised: memory decides
whether a model fits), refuses when none has ``min_free_gpu_mb`` free, skips GPUs that the
host's torch has no kernels for, and trains on the CPU on a host without GPUs. ``"1"`` or
``"0,1"`` pin; ``none`` is the CPU. Choosing and starting hold a lock file on the host, so two
runs never pick the same card at once.
"""

import fcntl
import json
import os
import shutil
import time

from potato.training.remote import proc

QUERY = "index,name,memory.total,memory.used,memory.free,utilization.gpu,compute_cap"


class GpuError(Exception):
    pass


class NvidiaSmiParseError(GpuError):
    pass


def nvidia_smi_argv():
    return ["nvidia-smi", "--query-gpu=" + QUERY, "--format=csv,noheader,nounits"]


def parse_nvidia_smi(text):
    """GPUs from ``nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits`` output."""
    out = []
    for line in text.strip().splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 6:
            raise NvidiaSmiParseError("unexpected nvidia-smi line (want %s): %r"
                                      % (QUERY, line))
        try:
            gpu = {"index": int(parts[0]), "name": parts[1], "memory_total_mb": int(parts[2]),
                   "memory_used_mb": int(parts[3]), "memory_free_mb": int(parts[4]),
                   "utilization_pct": _int_or_none(parts[5])}
        except ValueError:
            raise NvidiaSmiParseError("unexpected nvidia-smi line (want %s): %r"
                                      % (QUERY, line))
        cap = parts[6] if len(parts) > 6 else ""
        gpu["compute_cap"] = cap if cap and cap != "[N/A]" else None
        out.append(gpu)
    return out


def _int_or_none(text):
    try:
        return int(text)
    except ValueError:
        return None  # "[N/A]" on some cards


def read_gpus(env=None, timeout=20):
    """GPUs on this host ([] without nvidia-smi)."""
    if shutil.which("nvidia-smi", path=(env or os.environ).get("PATH")) is None:
        return []
    r = proc.run(nvidia_smi_argv(), timeout=timeout, env=env)
    if r.timed_out or r.returncode != 0:
        raise GpuError(r.failure("nvidia-smi"))
    return parse_nvidia_smi(r.stdout)


TORCH_ARCHS = ("import json, torch; print(json.dumps({'version': torch.__version__, "
               "'archs': torch.cuda.get_arch_list() if torch.version.cuda else [], "
               "'cuda': torch.version.cuda}))")


def torch_archs(python, env=None, timeout=120):
    """{version, archs, cuda} of the worker interpreter's torch, or None without torch."""
    r = proc.run([python, "-c", TORCH_ARCHS], timeout=timeout, env=env)
    if r.timed_out or r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def has_kernels(gpu, torch_info):
    """Whether torch was built with kernels for this GPU's compute capability."""
    if torch_info is None or not gpu.get("compute_cap"):
        return True  # nothing to compare with: let torch decide
    archs = torch_info.get("archs") or []
    if not archs:
        return False
    major, minor = gpu["compute_cap"].split(".")
    cap = int(major) * 10 + int(minor)
    for a in archs:
        kind, _, num = a.partition("_")
        if not num.isdigit():
            continue
        n = int(num)
        if kind == "sm" and n == cap:
            return True
        if kind == "compute" and n <= cap:  # PTX can be compiled for newer cards
            return True
    return False


def choose(setting, gpus, min_free_mb, torch_info=None):
    """(CUDA_VISIBLE_DEVICES value or None for CPU, a sentence for the run log)."""
    setting = (setting or "auto").strip()
    if setting == "none":
        return None, "gpus: none: training on the CPU"
    if setting != "auto":
        wanted = [int(x) for x in setting.split(",")]
        known = {g["index"]: g for g in gpus}
        missing = [i for i in wanted if i not in known]
        if missing:
            raise GpuError("gpus is %s but this host has no GPU %s (it has %s)." % (
                setting, ",".join(map(str, missing)),
                ", ".join(str(g["index"]) for g in gpus) or "none"))
        names = ", ".join("GPU %d (%s, %d MB free)" % (i, known[i]["name"],
                                                       known[i]["memory_free_mb"])
                          for i in wanted)
        return setting, "taking %s (pinned by gpus: %s)" % (names, setting)
    if not gpus:
        return None, "this host has no GPU: training on the CPU"
    usable = [g for g in gpus if has_kernels(g, torch_info)]
    if not usable:
        raise GpuError("This host's torch has no kernels for any of its GPUs. Torch %s supports "
                       "%s; the GPUs are %s. Install a torch build for these GPUs, or set "
                       "gpus: none to train on the CPU." % (
                           (torch_info or {}).get("version"),
                           ", ".join((torch_info or {}).get("archs") or []) or "none",
                           ", ".join("%s (compute %s)" % (g["name"], g["compute_cap"])
                                     for g in gpus)))
    best = max(usable, key=lambda g: (g["memory_free_mb"], -g["index"]))
    if best["memory_free_mb"] < min_free_mb:
        raise GpuError("No GPU has %d MB free. The most is %d MB on GPU %d: wait for other "
                       "jobs to finish, lower min_free_gpu_mb, or pin a GPU with gpus: \"N\"."
                       % (min_free_mb, best["memory_free_mb"], best["index"]))
    return str(best["index"]), "taking GPU %d (%s, %d of %d MB free, %s%% busy)" % (
        best["index"], best["name"], best["memory_free_mb"], best["memory_total_mb"],
        best["utilization_pct"] if best["utilization_pct"] is not None else "?")


class HostLock:
    """An exclusive lock file on the host (fcntl), held while a GPU is chosen and taken."""

    def __init__(self, path, timeout=300):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError:
                if time.monotonic() > deadline:
                    os.close(self.fd)
                    raise GpuError("another run has held the GPU lock %s for %d s" % (path,
                                                                                   timeout))
                time.sleep(0.5)

    def release(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def take(settings, python, remote_dir, env=None):
    """Lock, read and choose: (lock, CUDA_VISIBLE_DEVICES or None, log sentence).

    The caller releases the lock once the worker has started.
    """
    lock = HostLock(os.path.join(remote_dir, "gpu.lock"))
    try:
        gpus = read_gpus(env)
        torch_info = torch_archs(python, env) if gpus and settings.gpus == "auto" else None
        chosen, message = choose(settings.gpus, gpus, settings.min_free_gpu_mb, torch_info)
    except Exception:
        lock.release()
        raise
    return lock, chosen, message
