"""The slurm backend: the ssh backend's agent, started on a login node, submits the worker
with sbatch (see potato/training/remote/slurm_job.py for the job side)."""

import re
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Dict, List, Optional

from potato.config.backends import KeyContext, boolean, dotted, key, number, text, text_list
from potato.training.backends import errors
from potato.training.backends import sshcmd
from potato.training.backends.ship import code_hash
from potato.training.backends.ssh import LoginOptions, SshBackend
from potato.training.remote.protocol import RunSettings
from potato.training.remote import slurm_job

# What `check` runs on the login node, with the backend's env applied: where the SLURM
# commands are, and the version of the interpreter jobs will run (from the login node's view).
CHECK_SH = r"""
for c in sbatch squeue scancel scontrol; do
  p=$(command -v "$c" 2>/dev/null) && echo "POTATO-CMD $c $p" || echo "POTATO-CMD $c -"
done
jp=$1
v=$("$jp" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) \
  && echo "POTATO-JOBPY $v" || echo "POTATO-JOBPY -"
scontrol show partition -o 2>/dev/null | sed 's/^/POTATO-PART /'
"$jp" -c 'import importlib.util as u
print("POTATO-JOBMISSING " + ",".join(
    m for m in ("torch", "transformers", "peft") if u.find_spec(m) is None))' 2>/dev/null
"""


# -- SLURM time limits ----------------------------------------------------------------------------

_SLURM_TIME = [  # (pattern, names of the groups in order)
    (re.compile(r"^(\d+)$"), ("m",)),
    (re.compile(r"^(\d+):(\d+)$"), ("m", "s")),
    (re.compile(r"^(\d+):(\d+):(\d+)$"), ("h", "m", "s")),
    (re.compile(r"^(\d+)-(\d+)$"), ("d", "h")),
    (re.compile(r"^(\d+)-(\d+):(\d+)$"), ("d", "h", "m")),
    (re.compile(r"^(\d+)-(\d+):(\d+):(\d+)$"), ("d", "h", "m", "s")),
]
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
SIX_HOURS = 6 * 3600


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


def slurm_time(ctx: KeyContext, name: str, default) -> Optional[str]:
    """``time``: an sbatch time limit, as the config's text says it."""
    value = ctx.m.get(name)
    if value is None:
        return default
    path = ctx.path + (name,)
    # PyYAML reads 1:30:00 as a base-60 number; the source text is what the user meant.
    source = ctx.r.scalars.get(path, str(value))
    if isinstance(value, (dict, list, bool)):
        ctx.r.error(path, f"{dotted(path)} must be a SLURM time such as 02:00:00.", ctx.name)
    elif slurm_time_seconds(source) is None:
        ctx.r.error(path, f"{dotted(path)} is {source!r}, which sbatch does not accept. Use MM, "
                          f"MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (for example "
                          f"02:00:00).", ctx.name)
    elif slurm_time_seconds(source) == 0:
        ctx.r.error(path, f"{dotted(path)} is {source}, which means no limit on SLURM. Give the "
                          f"job a limit such as 02:00:00.", ctx.name)
    else:
        return source
    return default


@dataclass
class SlurmOptions(LoginOptions):
    job_python: Optional[str] = key(text)
    prelude: List[str] = key(text_list, default_factory=list)
    poll_interval_s: float = key(number(positive=True), 10)
    requeue: bool = key(boolean, False)  # let SLURM requeue the job (else sbatch --no-requeue)
    # sbatch options (key -> --key, _ as -)
    partition: Optional[str] = key(text)
    gres: Optional[str] = key(text)
    time: Optional[str] = key(slurm_time)
    account: Optional[str] = key(text)
    qos: Optional[str] = key(text)
    mem: Optional[str] = key(text)
    cpus_per_task: Optional[str] = key(text)
    constraint: Optional[str] = key(text)
    # a data-parallel run across this many nodes (remote/nodes.py); the ranks on each are the
    # trainer's processes (one per GPU the worker sees on the first node); ntasks_per_node
    # and gpus_per_node are what sbatch allocates for them
    nodes: Optional[int] = key(number(integer=True, minimum=1, maximum=1024))
    ntasks_per_node: Optional[int] = key(number(integer=True, minimum=1, maximum=64))
    gpus_per_node: Optional[str] = key(text)

    hints: ClassVar[Dict[str, str]] = {
        "gpus": "On SLURM, ask for GPUs with gres (for example gres: gpu:1).",
        "packages": "A slurm backend installs nothing; load software with prelude lines (for "
                    "example prelude: [\"module load cuda\"]).",
    }

    @property
    def sbatch(self) -> Dict[str, str]:
        """The sbatch options set (key -> value)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name in slurm_job.SlurmSettings.SBATCH_KEYS
                and getattr(self, f.name) is not None}

    def rules(self, b, bpath, where: str, err, warn) -> None:
        super().rules(b, bpath, where, err, warn)
        if not self.remote_dir:
            err(bpath, f"{where} has no remote_dir. A slurm backend needs a directory on "
                       f"storage that the login and compute nodes share (for example "
                       f"~/potato-training or /scratch/$USER/potato).", b.name)
        elif re.match(r"^/(var/)?tmp(/|$)", self.remote_dir.strip()):
            err(bpath + ("remote_dir",),
                f"{where}.remote_dir is {self.remote_dir}, which is node-local on compute "
                f"nodes: the job would not see the files the login node wrote. Use a "
                f"directory on shared storage (for example ~/potato-training).", b.name)
        if (self.ntasks_per_node or self.gpus_per_node) and (self.nodes or 1) == 1:
            warn(bpath + ("ntasks_per_node" if self.ntasks_per_node else "gpus_per_node",),
                 f"{where} sets ntasks_per_node or gpus_per_node without nodes: a run on one "
                 f"node starts a rank per GPU itself; these keys are for nodes of 2 or more",
                 b.name)
        if self.time is not None and slurm_time_seconds(self.time) > SIX_HOURS:
            warn(bpath + ("time",),
                 f"{where}.time is {self.time}. A job that holds a GPU for more than 6 hours "
                 f"is long on a shared cluster; check its policy", b.name)


class SlurmBackend(SshBackend):
    type = "slurm"
    Options = SlurmOptions
    article = "a"
    python_fix = ("on the compute nodes: point the backend's job_python at an environment there "
                  "that has them (python runs only the agent on the login node)")
    builds_venv = False  # a venv made on the login node may not run on compute nodes
    packages = ()  # nothing is installed (software comes from prelude lines)
    lost_after_s = slurm_job.LOST_AFTER_S

    def restart_error(self) -> str:
        return ("The run was ended by a server restart: the server's ssh session to %s closed "
                "with it, and the agent there cancelled its SLURM job. Start the run again."
                % self.options.host)

    @property
    def label(self) -> str:
        return "%s (SLURM via %s)" % (self.name, self.options.host)

    def settings(self) -> RunSettings:
        b = self.options
        return RunSettings(gpus="none", env=dict(b.env), num_threads=b.num_threads,
                           fetch_artifacts=b.fetch_artifacts, keep_remote=b.keep_remote,
                           max_artifact_mb=b.max_artifact_mb,
                           max_media_cache_mb=b.max_media_cache_mb,
                           remote_dir=self.remote_dir, host=b.host,
                           scheduler=slurm_job.SlurmSettings(
                               job_python=b.job_python or "python", prelude=list(b.prelude),
                               poll_interval_s=b.poll_interval_s,
                               lost_after_s=self.lost_after_s, requeue=b.requeue, **b.sbatch))

    def check(self) -> Dict[str, Any]:
        host = self.options.host
        report = self.report(host=host)
        lines = report["lines"]
        if self.remote_dir.startswith(("/tmp", "/var/tmp")):
            lines.append("remote_dir %s is node-local on compute nodes; use shared storage."
                         % self.remote_dir)
            return report
        try:
            info = self.probe()
        except errors.RemoteError as e:
            lines.append(str(e))
            return report
        lines.append("%s: Python %s (%s) runs the agent" % (host, info["python"],
                                                            info["executable"]))
        job_python = self.options.job_python or "python"
        r = self._ssh(sshcmd.sh(CHECK_SH, job_python), timeout=60)
        found = {}
        job_py = None
        partitions = []
        for line in r.stdout.splitlines():
            if line.startswith("POTATO-PART "):
                partitions.append(line[len("POTATO-PART "):])
            elif line.startswith("POTATO-CMD "):
                _, name, path = line.split(" ", 2)
                found[name] = None if path == "-" else path
            elif line.startswith("POTATO-JOBPY "):
                v = line.split(" ", 1)[1]
                job_py = None if v == "-" else v
            elif line.startswith("POTATO-JOBMISSING"):  # job_python as the login node sees it
                report["missing_packages"] = [m for m in line.split(" ", 1)[-1].split(",")
                                              if m and m != "POTATO-JOBMISSING"]
        report["commands"] = found
        ok = True
        for name in slurm_job.NEEDED:
            if found.get(name):
                lines.append("%s: %s" % (name, found[name]))
            else:
                ok = False
                lines.append(slurm_job.no_command_message(host, name))
        lines.append("scontrol: %s" % (found.get("scontrol") or
                                       "not found (reasons are read from slurm.out instead)"))
        ok = self.check_nodes(lines, partitions) and ok
        lines.append("job_python %s on the login node: %s" % (
            job_python, "Python " + job_py if job_py else "not found there (it may exist on "
                                                             "compute nodes only)"))
        lines.append("Packages on compute nodes cannot be seen from the login node: a short "
                     "first job with a small time finds out.")
        lines.append("Potato's code %s %s in %s" % (code_hash(), "is already" if info["code"]
                                                     else "will be copied", self.remote_dir))
        report["ok"] = ok
        report["python"] = info["python"]
        return report

    def check_nodes(self, lines: List[str], partitions: List[str]) -> bool:
        """``check``'s lines on the nodes a run asks for; False when the partition cannot give
        them."""
        b = self.options
        if (b.nodes or 1) <= 1:
            return True
        lines.append("a run asks for %d nodes (sbatch --nodes=%d%s), one worker rank 0 on the "
                     "first and the other ranks started with srun" % (
                         b.nodes, b.nodes, ", --ntasks-per-node=%d" % b.ntasks_per_node
                         if b.ntasks_per_node else ""))
        limit = slurm_job.node_limit(slurm_job.parse_partitions("\n".join(partitions)),
                                     b.partition)
        if limit is None:
            lines.append("partition %s: scontrol did not show it, so its node limits are not "
                         "checked" % (b.partition or "(the default)"))
            return True
        lines.append("partition %s: %s nodes, MaxNodes %s" % (
            limit[0], limit[1] if limit[1] is not None else "?",
            limit[2] if limit[2] is not None else "UNLIMITED"))
        message = slurm_job.too_many_nodes(b.nodes, limit)
        if message:
            lines.append(message)
        return message is None
