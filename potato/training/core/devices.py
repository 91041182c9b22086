"""Which device a local run would use, found without importing torch into the server.

``probe()`` runs a short child Python that imports torch (when installed) and prints JSON;
``local_report`` turns it into the report of ``potato training check local``.
"""

import importlib.util
import json
import os
import sys
from typing import Any, Dict

from potato.training.core import fit
from potato.training.remote import proc, trainers

PROBE = r"""
import json, os
out = {"torch": None, "cuda": [], "mps": False}
try:
    import torch
    out["torch"] = torch.__version__
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            out["cuda"].append({"index": i, "name": p.name,
                                "memory_mb": int(p.total_memory / 2**20),
                                "compute_cap": "%d.%d" % (p.major, p.minor)})
    mps = getattr(torch.backends, "mps", None)
    out["mps"] = bool(mps is not None and mps.is_available())
except Exception as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
"""


def probe(python: str = sys.executable, timeout: float = 60) -> Dict[str, Any]:
    if python == sys.executable and importlib.util.find_spec("torch") is None:
        return {"torch": None, "cuda": [], "mps": False}
    r = proc.run([python, "-c", PROBE], timeout=timeout)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"torch": None, "cuda": [], "mps": False,
                "error": r.failure("the device probe (%s)" % python)}


def choose(requested: str, found: Dict[str, Any]):
    """(device, warning or None) for a device request and what the probe found."""
    cuda = found.get("cuda") or []
    if requested == "auto":
        if cuda:
            return "cuda:0", None
        if found.get("mps"):
            return "mps", None
        return "cpu", None
    if requested.startswith("cuda"):
        index = int(requested.split(":")[1]) if ":" in requested else 0
        if any(g["index"] == index for g in cuda):
            return "cuda:%d" % index, None
        fallback = "mps" if found.get("mps") else "cpu"
        return fallback, ("device %s was requested but this machine has %s; using %s"
                          % (requested, "%d CUDA GPU(s)" % len(cuda) if cuda else "no CUDA GPU",
                             fallback))
    if requested == "mps" and not found.get("mps"):
        return "cpu", "device mps was requested but Apple Metal is not available; using cpu"
    return requested, None


def describe(device: str, found: Dict[str, Any], threads: int) -> str:
    if device.startswith("cuda"):
        index = int(device.split(":")[1])
        g = next(g for g in found["cuda"] if g["index"] == index)
        return "CUDA GPU %d, %s, %d MB, compute capability %s" % (
            index, g["name"], g["memory_mb"], g.get("compute_cap") or "unknown")
    if device == "mps":
        return "Apple Metal (mps)"
    return "CPU (%d threads)" % threads


def four_bit_line(where, missing, has_cuda=True):
    """The check's line on hf-llm-classification's load_in_4bit (bitsandbytes, accelerate,
    and a CUDA GPU)."""
    if not missing and not has_cuda:
        return ("bitsandbytes and accelerate present on %s, but no CUDA GPU: load_in_4bit "
                "cannot run there (it needs a CUDA GPU)" % where)
    if not missing:
        return ("bitsandbytes and accelerate present on %s: load_in_4bit can run (CUDA GPUs)"
                % where)
    return ("%s missing on %s: hf-llm-classification's load_in_4bit cannot run there (pip install "
            "%s, or leave load_in_4bit off)" % (", ".join(missing), where, " ".join(missing)))


def local_report(cfg) -> Dict[str, Any]:
    mt = cfg.model_training
    found = probe()
    device, warning = choose(mt.device, found)
    threads = mt.num_threads or os.cpu_count() or 1
    lines = ["local: this machine, %s" % describe(device, found, threads)]
    if warning:
        lines.append("warning: " + warning)
    missing = {}
    unfit = fit.reasons(cfg)  # only the trainers that fit the project's schemes and items
    fitting = {n: i for n, i in trainers.all_trainers().items() if not unfit.get(n)}
    for name, info in fitting.items():
        gone = info.missing_packages()
        if gone:
            missing[name] = gone
            lines.append("trainer %s needs %s (%s)" % (name, ", ".join(gone), info.install_hint))
    usable = [n for n in fitting if n not in missing]
    lines.append("trainers ready for this project: %s" % (", ".join(usable) or "none"))
    lines += ["warning: " + p for p in trainers.plugin_problems()]
    missing_4bit = [p for p in ("bitsandbytes", "accelerate")
                    if importlib.util.find_spec(p) is None]
    lines.append(four_bit_line("this machine", missing_4bit, bool(found.get("cuda"))))
    return {"ok": True, "python": sys.version.split()[0], "device": device, "torch": found.get("torch"),
            "gpus": found.get("cuda", []), "missing_packages": missing,
            "missing_4bit": missing_4bit, "lines": lines}
