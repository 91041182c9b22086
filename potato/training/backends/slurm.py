"""The slurm backend: the ssh backend's agent, started on a login node, submits the worker
with sbatch (see potato/training/remote/slurm_job.py for the job side)."""

from typing import Any, Dict

from potato.training.backends import errors
from potato.training.backends import sshcmd
from potato.training.backends.ship import code_hash
from potato.training.backends.ssh import SshBackend
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
"$jp" -c 'import importlib.util as u
print("POTATO-JOBMISSING " + ",".join(
    m for m in ("torch", "transformers", "peft") if u.find_spec(m) is None))' 2>/dev/null
"""


class SlurmBackend(SshBackend):
    type = "slurm"
    python_fix = ("on the compute nodes: point the backend's job_python at an environment there "
                  "that has them (python runs only the agent on the login node)")
    builds_venv = False  # a venv made on the login node may not run on compute nodes
    lost_after_s = slurm_job.LOST_AFTER_S

    def restart_error(self) -> str:
        return ("The run was ended by a server restart: the server's ssh session to %s closed "
                "with it, and the agent there cancelled its SLURM job. Start the run again."
                % self.bcfg.host)

    @property
    def label(self) -> str:
        return "%s (SLURM via %s)" % (self.name, self.bcfg.host)

    def settings(self) -> RunSettings:
        b = self.bcfg
        return RunSettings(scheduler="slurm", gpus="none", env=dict(b.env),
                           num_threads=b.num_threads, fetch_artifacts=b.fetch_artifacts,
                           keep_remote=b.keep_remote, max_artifact_mb=b.max_artifact_mb,
                           max_media_cache_mb=b.max_media_cache_mb,
                           remote_dir=self.remote_dir, host=b.host,
                           job_python=b.job_python or "python", prelude=list(b.prelude),
                           poll_interval_s=b.poll_interval_s, lost_after_s=self.lost_after_s,
                           requeue=b.requeue,
                           **b.sbatch)

    def check(self) -> Dict[str, Any]:
        host = self.bcfg.host
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
        job_python = self.bcfg.job_python or "python"
        r = self._ssh(sshcmd.sh(CHECK_SH, job_python), timeout=60)
        found = {}
        job_py = None
        for line in r.stdout.splitlines():
            if line.startswith("POTATO-CMD "):
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
