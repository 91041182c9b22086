"""The one process runner: every tool Potato calls (ssh, scp, sbatch, squeue, scancel,
scontrol, nvidia-smi, the probe) runs through ``run`` (standard library, Python 3.8; shipped).

``run`` applies a deadline, captures stdout and the tail of stderr, and turns the ways a call can
fail to start (no such program, not executable, a timeout) into a ``Completed`` with a clear
``stderr`` instead of an exception; ``Completed.failure`` is the sentence for an error message,
with the command shell-quoted so it can be pasted into a terminal.
"""

import collections
import os
import shlex
import signal
import subprocess
from typing import Dict, List, Optional

# Variables no child sees (the server's Hugging Face write token): counted, since each server in
# the process hides its config's token_env while it runs (hide/unhide).
_hidden = collections.Counter()  # type: collections.Counter


def hide(name: str) -> None:
    """From now on, no process started by ``run`` or ``spawn`` sees variable ``name``."""
    _hidden[name] += 1


def unhide(name: str) -> None:
    _hidden[name] -= 1
    if _hidden[name] <= 0:
        del _hidden[name]


def child_env(env: Optional[Dict[str, str]]) -> Optional[Dict[str, str]]:
    """``env`` (None: this process's environment) without the hidden variables."""
    names = [n for n in _hidden if n in (os.environ if env is None else env)]
    if not names:
        return env
    out = dict(os.environ if env is None else env)
    for name in names:
        del out[name]
    return out

NOT_FOUND = 127
NOT_EXECUTABLE = 126


def quoted(argv: List[str]) -> str:
    """``argv`` as one shell-quoted line."""
    return " ".join(shlex.quote(str(a)) for a in argv)


class Completed:
    def __init__(self, argv, returncode, stdout, stderr, timed_out=False):
        self.argv = argv
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out

    @property
    def command(self) -> str:
        return quoted(self.argv)

    def stderr_tail(self, lines: int = 5) -> str:
        return "\n".join(self.stderr.strip().splitlines()[-lines:])

    def failure(self, what: str) -> str:
        """``what`` failed: how (exit status or timeout), the stderr tail and the command."""
        if self.timed_out:
            how = "did not finish in time"
        else:
            how = "failed (exit %s)" % self.returncode
        tail = self.stderr_tail() or self.stdout.strip()[-300:] or "no output"
        return "%s %s: %s. The command was: %s" % (what, how, tail, self.command)


class SpawnError(OSError):
    """A long-running process could not start; ``str(e)`` names the command."""


def spawn(argv: List[str], new_session: bool = True, **popen_args) -> subprocess.Popen:
    """Start a long-running process (the worker, an ssh session) in its own process group;
    with ``new_session=False`` in ours (a data-parallel rank: whatever stops the worker's
    group stops it too).

    Raises SpawnError, whose message names the quoted command, when it cannot start."""
    popen_args["env"] = child_env(popen_args.get("env"))
    try:
        return subprocess.Popen(argv, start_new_session=new_session, **popen_args)
    except OSError as e:
        raise SpawnError("cannot start %s: %s. The command was: %s"
                         % (argv[0], e.strerror or e, quoted(argv)))


def run(argv: List[str], input_bytes: Optional[bytes] = None, timeout: float = 120,
        env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None) -> Completed:
    """Run ``argv`` to completion; stdout and stderr are captured as text. The process group is
    killed after ``timeout`` seconds (the result then has ``timed_out``)."""
    try:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE if input_bytes is not None
                             else subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=child_env(env), cwd=cwd,
                             start_new_session=True)
    except FileNotFoundError:
        return Completed(argv, NOT_FOUND, "", "%s: command not found" % argv[0])
    except PermissionError:
        return Completed(argv, NOT_EXECUTABLE, "", "%s: permission denied" % argv[0])
    except OSError as e:
        return Completed(argv, NOT_EXECUTABLE, "", "%s: %s" % (argv[0], e.strerror or e))
    except ValueError as e:  # a null byte in an argument or the environment
        return Completed(argv, NOT_EXECUTABLE, "", "%s: cannot run: %s" % (argv[0], e))
    try:
        out, err = p.communicate(input_bytes, timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            p.kill()
        out, err = p.communicate()
        timed_out = True
    return Completed(argv, p.returncode, out.decode("utf-8", "replace"),
                     err.decode("utf-8", "replace"), timed_out)
