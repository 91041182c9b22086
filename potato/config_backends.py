"""Backends in the config: which keys each type takes, their typed record, and how
``model_training.backends`` entries are read (part of ``potato.config``; see its docstring).

The SLURM time parser is standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from potato.config_reader import Path, Reader, dotted, suggest



SSH_KEYS = ("type", "description", "host", "user", "port", "identity_file", "python", "packages",
            "gpus", "min_free_gpu_mb", "num_threads", "remote_dir", "env", "fetch_artifacts",
            "keep_remote", "max_artifact_mb", "heartbeat_timeout_s", "max_media_cache_mb")
# sbatch options a slurm backend maps to flags (key -> flag).
SBATCH_OPTIONS = {"partition": "--partition", "gres": "--gres", "time": "--time",
                  "account": "--account", "qos": "--qos", "mem": "--mem",
                  "cpus_per_task": "--cpus-per-task", "constraint": "--constraint"}
SLURM_KEYS = tuple(k for k in SSH_KEYS if k not in ("gpus", "packages")) + (
    "job_python", "prelude", "poll_interval_s", "requeue") + tuple(SBATCH_OPTIONS)
AGENT_KEYS = ("type", "description", "heartbeat_timeout_s", "queue_timeout_s", "fetch_artifacts",
              "keep_remote", "max_artifact_mb")
LOCAL_KEYS = ("type", "description")
# The config side of the registry of backend kinds (the other side is TYPES in
# potato/training/backends/__init__.py): each kind and the keys it takes.
BACKEND_KEYS = {"local": LOCAL_KEYS, "ssh": SSH_KEYS, "slurm": SLURM_KEYS, "agent": AGENT_KEYS}

# Variables a POSIX shell (bash as /bin/sh included) keeps read-only or needs to run the remote
# commands; exporting them from a backend's env would break every command on the host.
SHELL_OWNED = ("UID", "EUID", "PPID", "SHELLOPTS", "BASHOPTS", "BASH_VERSINFO", "BASHPID",
               "GROUPS", "IFS", "OPTIND", "PS4")

# Keys that belong to another backend type, with what to write instead.
BACKEND_KEY_HINTS = {
    ("slurm", "gpus"): "On SLURM, ask for GPUs with gres (for example gres: gpu:1).",
    ("slurm", "packages"): "A slurm backend installs nothing; load software with prelude lines "
                           "(for example prelude: [\"module load cuda\"]).",
    ("ssh", "requeue"): "requeue is a slurm backend's key (whether SLURM may restart a job "
                        "after a node failure); an ssh run is never requeued.",
}


@dataclass
class Backend:
    """One place a run can execute. Keys that a type does not accept keep their defaults."""

    name: str
    type: str
    description: str = ""
    host: Optional[str] = None
    user: Optional[str] = None
    port: Optional[int] = None
    identity_file: Optional[str] = None
    python: str = "python3"
    packages: List[str] = field(default_factory=list)
    gpus: str = "auto"
    min_free_gpu_mb: float = 2000
    num_threads: Optional[int] = None
    remote_dir: Optional[str] = None
    env: Dict[str, str] = field(default_factory=dict)
    fetch_artifacts: bool = True
    keep_remote: bool = False
    max_artifact_mb: float = 2048
    max_media_cache_mb: float = 10240  # the host's media cache (remote_dir/media), all runs
    heartbeat_timeout_s: float = 120
    queue_timeout_s: Optional[float] = None
    job_python: Optional[str] = None
    prelude: List[str] = field(default_factory=list)
    poll_interval_s: float = 10
    requeue: bool = False  # slurm: let SLURM requeue the job (else sbatch --no-requeue)
    sbatch: Dict[str, str] = field(default_factory=dict)  # sbatch option key -> value



# ---------------------------------------------------------------------------------------------
# SLURM time limits

_SLURM_TIME = [  # (pattern, names of the groups in order)
    (re.compile(r"^(\d+)$"), ("m",)),
    (re.compile(r"^(\d+):(\d+)$"), ("m", "s")),
    (re.compile(r"^(\d+):(\d+):(\d+)$"), ("h", "m", "s")),
    (re.compile(r"^(\d+)-(\d+)$"), ("d", "h")),
    (re.compile(r"^(\d+)-(\d+):(\d+)$"), ("d", "h", "m")),
    (re.compile(r"^(\d+)-(\d+):(\d+):(\d+)$"), ("d", "h", "m", "s")),
]
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def slurm_time_seconds(text: str) -> Optional[float]:
    """Seconds in an sbatch ``--time`` value, ``inf`` for no limit, None when not a valid format.

    Accepts the formats sbatch documents: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS,
    and INFINITE/UNLIMITED.
    """
    text = text.strip()
    if text.upper() in ("INFINITE", "UNLIMITED"):
        return float("inf")
    for pattern, units in _SLURM_TIME:
        m = pattern.match(text)
        if m:
            return float(sum(int(v) * _UNIT_SECONDS[u] for v, u in zip(m.groups(), units)))
    return None


def parse_backend(r: Reader, name: str, raw, path: Path, resolve) -> Optional[Backend]:
    where = dotted(path)
    kinds = tuple(BACKEND_KEYS)
    if not isinstance(raw, dict):
        r.error(path, f"{where} must be a mapping with at least a type ({', '.join(kinds)}).",
                name)
        return None
    btype = raw.get("type")
    if btype is None:
        r.error(path, f"{where} has no type. Set type to one of: {', '.join(kinds)}.", name)
        return None
    if btype not in kinds:
        r.error(path + ("type",), f"{where}.type is {btype!r}, which is not a backend type."
                                  f"{suggest(btype, kinds)} Valid types: "
                                  f"{', '.join(kinds)}.", name)
        return None
    if name == "local" and btype != "local":
        r.error(path, f"{where}: the name local is reserved for this machine; give the {btype} "
                      f"backend another name.", name)
        return None
    hints = {k: h for (t, k), h in BACKEND_KEY_HINTS.items() if t == btype}
    m = r.mapping(raw, path, BACKEND_KEYS[btype], f"a{'n' if btype in ('ssh', 'agent') else ''} "
                                                 f"{btype} backend", name, hints)
    b = Backend(name, btype)
    b.description = r.text(m, "description", path, "", name) or ""
    b.host = r.text(m, "host", path, None, name)
    b.user = r.text(m, "user", path, None, name)
    b.port = r.number(m, "port", path, None, 1, 65535, integer=True, backend=name)
    b.identity_file = resolve(r.text(m, "identity_file", path, None, name))
    b.python = r.text(m, "python", path, "python3", name)
    b.packages = r.text_list(m, "packages", path, name)
    b.min_free_gpu_mb = r.number(m, "min_free_gpu_mb", path, 2000, minimum=0, backend=name)
    b.num_threads = r.number(m, "num_threads", path, None, minimum=1, integer=True, backend=name)
    b.remote_dir = r.text(m, "remote_dir", path, None, name)
    b.fetch_artifacts = r.boolean(m, "fetch_artifacts", path, True, name)
    b.keep_remote = r.boolean(m, "keep_remote", path, False, name)
    b.max_artifact_mb = r.number(m, "max_artifact_mb", path, 2048, minimum=0, backend=name)
    b.heartbeat_timeout_s = r.number(m, "heartbeat_timeout_s", path, 120, positive=True,
                                     backend=name)
    b.max_media_cache_mb = r.number(m, "max_media_cache_mb", path, 10240, minimum=0,
                                    backend=name)
    b.queue_timeout_s = r.number(m, "queue_timeout_s", path, None, positive=True, backend=name)
    b.job_python = r.text(m, "job_python", path, None, name)
    b.prelude = r.text_list(m, "prelude", path, name)
    b.poll_interval_s = r.number(m, "poll_interval_s", path, 10, positive=True, backend=name)
    b.requeue = r.boolean(m, "requeue", path, False, name)
    b.env = _parse_env(r, m.get("env"), path, where, name)
    if "gpus" in m:
        b.gpus = parse_gpus(r, m["gpus"], path + ("gpus",), name)
    for key in SBATCH_OPTIONS:
        if key == "time":
            continue
        value = r.text(m, key, path, None, name)
        if value is not None:
            b.sbatch[key] = value
    if "time" in m and m["time"] is not None:
        # PyYAML reads 1:30:00 as a base-60 number; the source text is what the user meant.
        text = r.scalars.get(path + ("time",), str(m["time"]))
        if isinstance(m["time"], (dict, list, bool)):
            r.error(path + ("time",), f"{where}.time must be a SLURM time such as 02:00:00.", name)
        elif slurm_time_seconds(text) is None:
            r.error(path + ("time",), f"{where}.time is {text!r}, which sbatch does not accept. "
                                      f"Use MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS "
                                      f"(for example 02:00:00).", name)
        elif slurm_time_seconds(text) == 0:
            r.error(path + ("time",), f"{where}.time is {text}, which means no limit on SLURM. "
                                      f"Give the job a limit such as 02:00:00.", name)
        else:
            b.sbatch["time"] = text
    return b


def parse_gpus(r: Reader, value, path: Path, name: str) -> str:
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        if text in ("auto", "none") or re.match(r"^\d+(,\d+)*$", text):
            return text
    if isinstance(value, int) and not isinstance(value, bool):
        r.error(path, f"{dotted(path)} is the number {value}. Write gpus: \"{value}\" (quoted) to "
                      f"pin GPU {value}, or gpus: auto to take the GPU with the most free memory.",
                name)
        return "auto"
    r.error(path, f"{dotted(path)} is {value!r}; use auto, none, or GPU indices such as \"1\" or "
                  f"\"0,1\".", name)
    return "auto"


def _parse_env(r: Reader, env, path: Path, where: str, name: str) -> Dict[str, str]:
    """A backend's env: variable names to one-line values, none the remote shell owns."""
    if env is None:
        return {}
    if not isinstance(env, dict) or not all(
            isinstance(k, str) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k) for k in env):
        r.error(path + ("env",), f"{where}.env must map variable names (letters, digits, _) "
                                 f"to values.", name)
    elif any(isinstance(v, str) and any(c in v for c in "\n\r\0") for v in env.values()):
        r.error(path + ("env",), f"{where}.env has a value with a line break or a NUL; each "
                                 f"variable must fit on one line.", name)
    elif any(k in SHELL_OWNED for k in env):
        bad = sorted(k for k in env if k in SHELL_OWNED)
        r.error(path + ("env",), f"{where}.env sets {', '.join(bad)}, which the remote shell "
                                 f"owns (read-only or used to run every command); remove "
                                 f"it.", name)
    else:
        return {k: "" if v is None else str(v) for k, v in env.items()}
    return {}


# -- each kind's own checks (potato validate and the server's start-up) -------------------------

SIX_HOURS = 6 * 3600


def _login_rules(b: Backend, bpath: Path, where: str, err, warn) -> None:
    """Kinds that log into a host with ssh: a host, and no host or user ssh would read as an
    option or that holds white space."""
    if not b.host:
        err(bpath, f"{where} is an {b.type} backend without host. Set host to the machine "
                   f"to log into (a name ssh accepts, ~/.ssh/config aliases included).", b.name)
    for key in ("host", "user"):
        value = (getattr(b, key) or "").strip()
        if value.startswith("-"):
            err(bpath + (key,), f"{where}.{key} is {value!r}, which starts with '-': ssh "
                                f"would read it as an option, not a {key} name. Give the "
                                f"{key} name itself (put ssh options in ~/.ssh/config).", b.name)
        elif any(ch.isspace() for ch in getattr(b, key) or ""):
            err(bpath + (key,), f"{where}.{key} is {getattr(b, key)!r}, which holds a space or "
                                f"other white space: no {key} name does. Give the {key} name "
                                f"alone (put ssh options in ~/.ssh/config).", b.name)


def _slurm_rules(b: Backend, bpath: Path, where: str, err, warn) -> None:
    if not b.remote_dir:
        err(bpath, f"{where} has no remote_dir. A slurm backend needs a directory on "
                   f"storage that the login and compute nodes share (for example "
                   f"~/potato-training or /scratch/$USER/potato).", b.name)
    elif re.match(r"^/(var/)?tmp(/|$)", b.remote_dir.strip()):
        err(bpath + ("remote_dir",),
            f"{where}.remote_dir is {b.remote_dir}, which is node-local on compute nodes: "
            f"the job would not see the files the login node wrote. Use a directory on "
            f"shared storage (for example ~/potato-training).", b.name)
    time_text = b.sbatch.get("time")
    if time_text is not None and slurm_time_seconds(time_text) > SIX_HOURS:
        warn(bpath + ("time",),
             f"{where}.time is {time_text}. A job that holds a GPU for more than 6 hours "
             f"is long on a shared cluster; check its policy", b.name)


# The config side of each kind's traits, beside BACKEND_KEYS: its checks, whether its agent
# reaches the server through an ssh reverse-forwarded socket (so arrives as loopback), whether
# its runs wait for an agent that polls the server.
KIND_RULES = {"ssh": (_login_rules,), "slurm": (_login_rules, _slurm_rules)}
ARRIVES_AS_LOOPBACK = ("ssh", "slurm")
POLLED_BY_AGENTS = ("agent",)


def kind_rules(b: Backend):
    return KIND_RULES.get(b.type, ())


def arrives_as_loopback(b: Backend) -> bool:
    return b.type in ARRIVES_AS_LOOPBACK


def polled_by_agents(b: Backend) -> bool:
    return b.type in POLLED_BY_AGENTS
