"""The ssh backend: run on a GPU server the annotation server can log into.

Per run: one round trip checks the interpreter, the GPUs, and whether this version of Potato's
source is already on the host (``remote_dir/code/<hash>``); the source is copied only when
missing, a venv is made only when ``packages`` changed; then one ssh session with a reverse
forward (a fresh unix socket under the remote /tmp) starts the agent, which does the rest over
HTTP: bundle, worker, events, predictions, model files, clean-up. One connection is shared by
these ssh calls (ControlMaster in a private 0700 directory).
"""

import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Optional, Tuple

from potato.config.backends import (KeyContext, boolean, dotted, env_mapping, file_path,
                                    heartbeat_timeout, key, number, text, text_list)

from potato.training.remote import bundle as bundle_mod
from potato.training.remote import gpus as gpus_mod
from potato.training.backends.base import Outcome, RemoteState, RunContext, TrainingBackend
from potato.training.backends.ship import code_hash, source_archive
from potato.training.remote import proc, protocol
from potato.training.remote.protocol import RunSettings
from potato.training.backends import errors
from potato.training.backends import media_push, sshcmd
from potato.training.backends.wait import outcome_of, wait_for_agent
from potato.training.core.devices import four_bit_line
from potato.training.remote.supervise import tail

DEFAULT_REMOTE_DIR = "~/.cache/potato-training"
TRAINER_PACKAGES = ("torch", "transformers", "peft")
SWEEP_FLOOR_S = 60.0  # a job whose .alive (touched every 2 s) is this old may be swept, at least


def gpu_choice(ctx: KeyContext, name: str, default) -> str:
    """``gpus``: auto, none, or GPU indices (a bare number is refused: it reads as a count)."""
    value = ctx.m.get(name)
    if value is None:
        return default
    path = ctx.path + (name,)
    if isinstance(value, str):
        text_value = value.strip().replace(" ", "")
        if text_value in ("auto", "none") or re.match(r"^\d+(,\d+)*$", text_value):
            return text_value
    if isinstance(value, int) and not isinstance(value, bool):
        ctx.r.error(path, f"{dotted(path)} is the number {value}. Write gpus: \"{value}\" (quoted) "
                          f"to pin GPU {value}, or gpus: auto to take the GPU with the most free "
                          f"memory.", ctx.name)
        return default
    ctx.r.error(path, f"{dotted(path)} is {value!r}; use auto, none, or GPU indices such as \"1\" "
                      f"or \"0,1\".", ctx.name)
    return default


@dataclass
class LoginOptions:
    """The keys of a kind that logs into a host with ssh (ssh, and slurm's login node)."""

    host: Optional[str] = key(text)
    user: Optional[str] = key(text)
    port: Optional[int] = key(number(minimum=1, maximum=65535, integer=True))
    identity_file: Optional[str] = key(file_path)
    python: str = key(text, "python3")
    min_free_gpu_mb: float = key(number(minimum=0), 2000)
    num_threads: Optional[int] = key(number(minimum=1, integer=True))
    remote_dir: Optional[str] = key(text)
    env: Dict[str, str] = key(env_mapping, default_factory=dict)
    fetch_artifacts: bool = key(boolean, True)
    keep_remote: bool = key(boolean, False)
    max_artifact_mb: float = key(number(minimum=0), 2048)
    heartbeat_timeout_s: float = key(heartbeat_timeout, 120)
    max_media_cache_mb: float = key(number(minimum=0), 10240)  # the host's media cache, all runs

    def rules(self, b, bpath, where: str, err, warn) -> None:
        """A host, and no host or user that ssh would read as an option or that holds white
        space."""
        if not self.host:
            err(bpath, f"{where} is an {b.type} backend without host. Set host to the machine "
                       f"to log into (a name ssh accepts, ~/.ssh/config aliases included).", b.name)
        for name in ("host", "user"):
            value = (getattr(self, name) or "").strip()
            if value.startswith("-"):
                err(bpath + (name,), f"{where}.{name} is {value!r}, which starts with '-': ssh "
                                     f"would read it as an option, not a {name} name. Give the "
                                     f"{name} name itself (put ssh options in ~/.ssh/config).",
                    b.name)
            elif any(ch.isspace() for ch in getattr(self, name) or ""):
                err(bpath + (name,), f"{where}.{name} is {getattr(self, name)!r}, which holds a "
                                     f"space or other white space: no {name} name does. Give the "
                                     f"{name} name alone (put ssh options in ~/.ssh/config).",
                    b.name)


@dataclass
class SshOptions(LoginOptions):
    packages: List[str] = key(text_list, default_factory=list)
    gpus: str = key(gpu_choice, "auto")

    hints: ClassVar[Dict[str, str]] = {
        "requeue": "requeue is a slurm backend's key (whether SLURM may restart a job after a "
                   "node failure); an ssh run is never requeued.",
    }


class SshBackend(TrainingBackend):
    type = "ssh"
    Options = SshOptions
    article = "an"
    arrives_as_loopback = True  # its agent speaks through a reverse-forwarded unix socket
    python_fix = ("or point the backend's python at one that has them, or list them under the "
                  "backend's packages")
    builds_venv = True

    def __init__(self, bcfg, cfg, tokens=None):
        super().__init__(bcfg, cfg, tokens)
        self.remote_dir = self.options.remote_dir or DEFAULT_REMOTE_DIR
        self._control_dir: Optional[str] = None  # made on first use (0700), removed by close
        self.server_port: Optional[int] = None  # set by listening_on once the server listens

    @property
    def label(self) -> str:
        return "%s (ssh to %s)" % (self.name, self.options.host)

    @property
    def control_dir(self) -> str:
        """The private directory of the shared connection (ControlMaster's socket)."""
        if self._control_dir is None:
            base = tempfile.gettempdir()
            if len(base) > 70:  # a unix socket path has at most 107 bytes
                base = "/tmp"
            self._control_dir = tempfile.mkdtemp(prefix="potato-ssh-", dir=base)
        return self._control_dir

    def restart_error(self) -> str:
        return ("The run was ended by a server restart: the server's ssh session to %s closed "
                "with it, and the agent there stopped the worker. Start the run again."
                % self.options.host)

    # -- building blocks -----------------------------------------------------------------------
    def argv(self, command: str, forward: Optional[str] = None):
        """ssh argv for ``command``, which runs with the backend's env (see ``stdin``)."""
        return sshcmd.ssh_argv(self.options, sshcmd.with_env(command), self.control_dir, forward)

    def stdin(self, data: bytes = b"") -> bytes:
        """What a remote command's stdin starts with: the backend's env, then ``data``."""
        return sshcmd.env_header(self.options.env) + data

    @property
    def venv_key(self) -> str:
        return hashlib.sha256(json.dumps(sorted(self.packages)).encode()).hexdigest()[:16]

    def _ssh(self, command: str, input_bytes=None, timeout=120):
        r = proc.run(self.argv(command), self.stdin(input_bytes or b""), timeout)
        if r.timed_out:
            raise errors.ConnectError("ssh to %s did not answer within %d s. Check the host and "
                                      "the network." % (self.options.host, timeout))
        if r.returncode == 255:
            raise errors.ConnectError(errors.ssh_failure(self.options.host, self.options.user,
                                                         r.returncode, r.stderr))
        return r

    def probe(self) -> Dict[str, Any]:
        stale = 0 if self.options.keep_remote else max(self.options.heartbeat_timeout_s,
                                                     SWEEP_FLOOR_S)  # never a live job
        r = self._ssh(sshcmd.probe_command(self.options.python, self.remote_dir, code_hash(),
                                           self.venv_key, stale), timeout=90)
        if r.returncode == protocol.REMOTE_NO_PYTHON:
            raise errors.SetupError(errors.no_python(self.options.python, self.options.host,
                                                     self.name))
        if r.returncode == protocol.REMOTE_OLD_PYTHON:
            raise errors.SetupError(errors.old_python(self.options.python, self.options.host,
                                                      sshcmd.old_python_version(r.stdout),
                                                      self.name))
        try:
            info = sshcmd.parse_probe(r.stdout)
        except ValueError:
            raise errors.SetupError("The check on %s failed (exit %s): %s" % (
                self.options.host, r.returncode, r.stderr_tail() or r.stdout[-300:]))
        smi = info.get("nvidia_smi")
        info["gpus"] = []
        if smi and smi.get("rc") == 0:
            try:
                info["gpus"] = gpus_mod.parse_nvidia_smi(smi["stdout"])
            except gpus_mod.NvidiaSmiParseError as e:
                info["gpu_error"] = str(e)
        elif smi:
            info["gpu_error"] = "nvidia-smi failed on %s: %s" % (self.options.host,
                                                                 smi.get("stderr", "").strip())
        return info

    def install_code(self) -> None:
        r = self._ssh(sshcmd.install_code_command(self.options.python, self.remote_dir,
                                                  code_hash()), source_archive(), timeout=300)
        if r.returncode != 0:
            raise errors.TransferError("Copying Potato's code to %s failed (exit %s): %s" % (
                self.options.host, r.returncode, r.stderr_tail()))

    def make_venv(self) -> None:
        r = self._ssh(sshcmd.venv_command(self.options.python, self.remote_dir, self.venv_key,
                                          self.packages), timeout=3600)
        if r.returncode != 0:
            raise errors.SetupError("Installing %s into a venv on %s failed (exit %s): %s" % (
                ", ".join(self.packages), self.options.host, r.returncode, r.stderr_tail()))

    @property
    def host(self) -> Optional[str]:
        return self.options.host

    @property
    def packages(self) -> List[str]:
        """What goes into a venv on the host before a run (the ssh kind's own key)."""
        return self.options.packages

    def settings(self) -> RunSettings:
        b = self.options
        return RunSettings(host=b.host, remote_dir=self.remote_dir, gpus=b.gpus,
                           min_free_gpu_mb=b.min_free_gpu_mb, env=dict(b.env),
                           num_threads=b.num_threads, fetch_artifacts=b.fetch_artifacts,
                           keep_remote=b.keep_remote, max_artifact_mb=b.max_artifact_mb,
                           max_media_cache_mb=b.max_media_cache_mb)

    # -- a run ---------------------------------------------------------------------------------
    def execute(self, ctx: RunContext) -> Outcome:
        host = self.options.host
        if not self.server_port:
            return Outcome("error", "The ssh backend needs the annotation server's port; start "
                                    "runs through a running server.", ran_on=self.name)
        if self.cfg.server.tls_cert:
            return Outcome("error", "The ssh backend cannot reach a server that serves TLS "
                                    "itself yet: serve TLS from a reverse proxy instead (see "
                                    "docs/annotation-server.md).", ran_on=self.name)
        try:
            ctx.set_step("connecting to %s" % host)
            info = self.probe()
            ctx.log("%s: Python %s (%s)" % (host, info["python"], info["executable"]))
            if info.get("swept"):
                ctx.log("%s: removed %d job director%s left by runs whose agent stopped "
                        "(silent over %g s): %s" % (host, len(info["swept"]),
                                                   "y" if len(info["swept"]) == 1 else "ies",
                                                   self.options.heartbeat_timeout_s,
                                                   ", ".join(info["swept"][:20])))
            gpus = ", ".join("GPU %d %s %d/%d MB free" % (g["index"], g["name"],
                                                        g["memory_free_mb"], g["memory_total_mb"])
                             for g in info["gpus"]) or "no GPU"
            ctx.log("%s: %s%s" % (host, gpus, "; " + info["gpu_error"]
                                  if info.get("gpu_error") else ""))
            if not info["code"]:
                ctx.set_step("copying Potato's code to %s" % host)
                self.install_code()
            else:
                ctx.log("Potato's code %s is already on %s" % (code_hash(), host))
            python = self.options.python
            if self.packages and self.builds_venv:
                if not info.get("venv"):
                    ctx.set_step("installing %s on %s" % (", ".join(self.packages), host))
                    self.make_venv()
                python = sshcmd.venv_python(self.remote_dir)
            unique = secrets.token_hex(6)  # names the job directory and the media pin
            media_push.push(self, ctx, self.job_name(ctx, unique))
            ctx.bundle_sha256 = bundle_mod.pack(ctx.paths.bundle, ctx.paths.bundle_archive)
            return self._run_agent(ctx, python, unique)
        except errors.RemoteError as e:
            return Outcome("error", str(e), ran_on=self.name)

    @staticmethod
    def job_name(ctx: RunContext, unique: str) -> str:
        """The run's job directory on the host (also its pin in the media cache)."""
        return "%s-%s" % (ctx.run_id, unique[:6])

    def _run_agent(self, ctx: RunContext, python: str, unique: str) -> Outcome:
        host = self.options.host
        token = secrets.token_urlsafe(32)
        remote = RemoteState(token, self.settings())
        ctx.remote = remote
        sock = "/tmp/potato-%s-%s.sock" % (ctx.run_id, unique)
        argv = self.argv(sshcmd.agent_command(python, self.remote_dir, code_hash(), sock,
                                              ctx.run_id, self.job_name(ctx, unique)),
                         forward="%s:127.0.0.1:%d" % (sock, self.server_port))
        ctx.set_step("waiting for the agent on %s" % host)
        ctx.log("ssh: %s" % sshcmd.shown(argv))
        try:
            with open(ctx.paths.agent_log, "ab") as agent_log:
                p = proc.spawn(argv, stdin=subprocess.PIPE, stdout=agent_log,
                               stderr=subprocess.STDOUT)
        except proc.SpawnError as e:
            return Outcome("error", str(e), ran_on=self.name)
        try:
            p.stdin.write(self.stdin((token + "\n").encode()))
            p.stdin.flush()
        except OSError:
            pass  # ssh already exited: reported below from its log

        def gone():
            if p.poll() is None:
                return None
            log_tail = tail(ctx.paths.agent_log, 8)
            if p.returncode == 255:
                return Outcome("error", errors.ssh_failure(host, self.options.user, 255, log_tail),
                               ran_on=self.name)
            return Outcome("error", errors.agent_stopped(host, p.returncode, log_tail),
                           ran_on=self.name)

        outcome = None
        try:
            outcome = wait_for_agent(ctx, remote, self.name, host, self.options.heartbeat_timeout_s,
                                     gone)
        finally:
            # Waiting ended without the agent's result (max_wall_seconds, silence, a cancel not
            # confirmed in time, a shutdown): the run ends now, not when the agent is done;
            # the agent sees its session close and stops the worker within grace_seconds.
            self._close(p, quick=outcome is not None or ctx.cancel.is_set()
                        or ctx.shutdown.is_set())
            ctx.log("agent output:\n" + tail(ctx.paths.agent_log, 30))
        if outcome is not None:
            return outcome
        return outcome_of(ctx, remote, self.name, self._artifact_uri(ctx, remote.result or {}))

    def _artifact_uri(self, ctx, result) -> Optional[str]:
        remote_dir = result.get("workdir")
        stayed = [a for a in result.get("artifacts", []) if not a.get("fetched")]
        if remote_dir and (stayed or not self.options.fetch_artifacts):
            return "ssh://%s%s/artifacts" % (self.options.host, remote_dir)
        return ctx.paths.artifacts

    def _close(self, p: subprocess.Popen, quick: bool = False) -> None:
        """Close the agent's stdin (it stops the worker if still running), then the session.

        ``quick`` (a cancel, or the server ended the run): the session is closed at once; the
        agent on the host sees its stdin close and stops the worker (SIGTERM, SIGKILL after
        grace_seconds) or cancels its job, on its own."""
        try:
            p.stdin.close()
        except OSError:
            pass
        try:
            p.wait(timeout=0.5 if quick else 15)
        except subprocess.TimeoutExpired:
            p.terminate()
            try:
                p.wait(timeout=1 if quick else 5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def listening_on(self, port: int) -> None:
        self.server_port = port

    def close(self) -> None:
        """Close the shared connection (if one is open) and its private directory."""
        if self._control_dir is None:
            return
        if os.listdir(self._control_dir):
            proc.run(sshcmd.control_exit_argv(self.options, self._control_dir), timeout=15)
        shutil.rmtree(self._control_dir, ignore_errors=True)
        self._control_dir = None

    # -- check ---------------------------------------------------------------------------------
    def check_model(self, model: str) -> Optional[Tuple[bool, str]]:
        try:
            r = self._ssh(sshcmd.model_check_command(self.options.python, model), timeout=60)
        except errors.RemoteError as e:
            return False, str(e)
        try:
            return sshcmd.parse_model_check(r.stdout)
        except ValueError:  # the python -c failed: its stderr says why (the command is long)
            return False, "finding model %s on %s failed (exit %s): %s" % (
                model, self.options.host, r.returncode, r.stderr_tail() or "no output")

    def check(self) -> Dict[str, Any]:
        host = self.options.host
        report = self.report(host=host)
        lines = report["lines"]
        try:
            info = self.probe()
        except errors.RemoteError as e:
            lines.append(str(e))
            return report
        report.update(python=info["python"], gpus=info["gpus"])
        if not self.packages:  # else the venv made at the first run brings them
            report["missing_packages"] = info["missing"]
        lines.append("%s: Python %s (%s)" % (host, info["python"], info["executable"]))
        torch_info = None
        if info["gpus"] and "torch" not in info["missing"]:
            r = self._ssh(" ".join([sshcmd.shlex.quote(self.options.python), "-c",
                                    sshcmd.shlex.quote(gpus_mod.TORCH_ARCHS)]), timeout=120)
            if r.returncode == 0:
                try:
                    torch_info = json.loads(r.stdout.strip().splitlines()[-1])
                except (ValueError, IndexError):
                    torch_info = None
        for g in info["gpus"]:
            note = "" if gpus_mod.has_kernels(g, torch_info) else \
                " (torch there has no kernels for it)"
            lines.append("GPU %d: %s, %d of %d MB free, %s%% busy, compute capability %s%s" % (
                g["index"], g["name"], g["memory_free_mb"], g["memory_total_mb"],
                g["utilization_pct"] if g["utilization_pct"] is not None else "?",
                g.get("compute_cap") or "unknown", note))
        if info.get("gpu_error"):
            lines.append(info["gpu_error"])
        ok = True
        try:
            chosen, sentence = gpus_mod.choose(self.options.gpus, info["gpus"],
                                               self.options.min_free_gpu_mb, torch_info)
            if chosen is None:  # the CPU: a sentence of its own, not "would start <reason>"
                lines.append("A run would train on the CPU: %s" % (
                    "gpus is none" if (self.options.gpus or "").strip() == "none"
                    else "this host has no GPU"))
            else:
                lines.append("A run would start %s" % sentence)
            report["gpu"] = chosen
        except gpus_mod.GpuError as e:
            lines.append(str(e))
            ok = False
        if self.packages:
            lines.append("packages %s are installed into %s/venv at the first run"
                         % (", ".join(self.packages), self.remote_dir))
        elif info["missing"]:
            lines.append("missing on %s for hf-text-classification: %s (pip install "
                         "torch transformers peft there, or set packages)"
                         % (host, ", ".join(info["missing"])))
        else:
            lines.append("training packages present: %s" % ", ".join(TRAINER_PACKAGES))
        if not self.packages and "missing_4bit" in info:
            lines.append(four_bit_line(host, info["missing_4bit"], bool(info["gpus"])))
            report["missing_4bit"] = info["missing_4bit"]
        lines.append("Potato's code %s %s on %s" % (code_hash(), "is already" if info["code"]
                                                     else "will be copied", host))
        report["ok"] = ok
        return report
