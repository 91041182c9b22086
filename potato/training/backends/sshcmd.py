"""Pure builders for every ssh command line, and parsers for what comes back.

Nothing here runs a process: tests compare the argv lists and scripts directly. Every value
that enters a remote command is quoted with ``shlex.quote``.
"""

import json
import shlex
from typing import List, Optional

from potato.training.remote import model_source
from potato.training.remote.protocol import (
    REMOTE_ENV_FAILED, REMOTE_NO_CODE, REMOTE_NO_PYTHON, REMOTE_OLD_PYTHON)

PROBE_MARK = "POTATO-PROBE "


def ssh_options(control_dir: Optional[str]) -> List[str]:
    """Options for every ssh call: never a password prompt, never a silent host-key change."""
    opts = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=15",
            "-o", "ServerAliveCountMax=4", "-o", "LogLevel=ERROR",
            "-o", "StrictHostKeyChecking=accept-new"]
    if control_dir:
        # One backend, one host, one private directory: a short fixed name keeps the socket
        # path (plus ssh's 17-character temporary suffix) under the 108-byte unix limit.
        opts += ["-o", "ControlMaster=auto", "-o", "ControlPath=%s/c" % control_dir,
                 "-o", "ControlPersist=20"]
    return opts


def ssh_argv(login, remote_command: str, control_dir: Optional[str] = None,
             forward: Optional[str] = None) -> List[str]:
    """``ssh [options] [-l user] [-p port] [-i key] [-R forward] -- host command``; ``login``:
    the backend's options (``ssh.LoginOptions``: host, user, port, identity_file)."""
    argv = ["ssh"] + ssh_options(control_dir)
    if login.user:
        argv += ["-l", login.user]
    if login.port:
        argv += ["-p", str(login.port)]
    if login.identity_file:
        argv += ["-i", login.identity_file]
    if forward:
        argv += ["-R", forward]
    return argv + ["--", login.host, remote_command]


def control_exit_argv(login, control_dir: str) -> List[str]:
    """``ssh [options] -O exit -- host``: ends the shared connection (ControlMaster)."""
    argv = ssh_argv(login, "true", control_dir)
    return argv[:argv.index("--")] + ["-O", "exit", "--", login.host]


def shown(argv: List[str], what: str = "<agent command>") -> str:
    """An ssh argv for the run log, with its (long) remote command replaced by ``what``."""
    return " ".join(argv[:-1] + [what])


# Every remote command runs under this wrapper: it first reads the backend's ``env`` from stdin
# (NAME=value lines up to an empty line; values stay off the command line, which every account
# on a shared host can read) and exports it, so the probe, check, venv install, agent and job
# all see the same PATH. What follows the empty line on stdin is the command's own input.
ENV_SH = ('while IFS= read -r kv && [ -n "$kv" ]; do export "$kv" || exit %d; done; eval "$1"'
          % REMOTE_ENV_FAILED)


def with_env(command: str) -> str:
    """``command`` run after the backend's env (sent by ``env_header``) is exported."""
    return sh(ENV_SH, command)


def env_header(env) -> bytes:
    """The stdin lines ``with_env`` reads: ``NAME=value`` each, then an empty line."""
    lines = []
    for k, v in sorted((env or {}).items()):
        if "\n" in v or "\r" in v or "\0" in v:
            raise ValueError("env %s holds a line break; put each variable on one line" % k)
        lines.append("%s=%s\n" % (k, v))
    return ("".join(lines) + "\n").encode("utf-8")


def sh(script: str, *args: str) -> str:
    """A remote command that runs ``script`` with POSIX sh and positional args, all quoted.

    Wrapping in ``sh -c`` keeps the script POSIX whatever the login shell is; ``/bin/sh`` by
    path, because the backend's ``env`` may set a PATH without /bin before it runs.
    """
    return " ".join(["/bin/sh", "-c", shlex.quote(script), "potato"] + [shlex.quote(a) for a in args])


# Run by the remote python in the probe (Python 3.8, standard library): one JSON line.
PROBE_PY = r"""
import importlib.util, json, os, shutil, subprocess, sys, time
os.umask(0o077)
d = os.path.expanduser(sys.argv[1]); code = sys.argv[2]; venv_key = sys.argv[3]
stale = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
out = {"python": "%d.%d.%d" % tuple(sys.version_info[:3]), "executable": sys.executable,
       "code": os.path.isfile(os.path.join(d, "code", code, "potato", "__init__.py")),
       "missing": [m for m in ("torch", "transformers", "peft")
                   if importlib.util.find_spec(m) is None],
       "missing_4bit": [m for m in ("bitsandbytes", "accelerate")
                        if importlib.util.find_spec(m) is None],
       "remote_dir": d, "nvidia_smi": None, "venv": None}
marker = os.path.join(d, "venv", ".potato-packages")
if os.path.isfile(marker):
    with open(marker) as f:
        out["venv"] = f.read().strip() == venv_key
if shutil.which("nvidia-smi"):
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=index,name,memory.total,memory.used,"
                            "memory.free,utilization.gpu,compute_cap",
                            "--format=csv,noheader,nounits"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=20)
        out["nvidia_smi"] = {"rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr[-500:]}
    except Exception as e:
        out["nvidia_smi"] = {"rc": -1, "stdout": "", "stderr": str(e)}
# Everything under remote_dir is this account's only; older versions made some of it 0755.
for sub in ("", "code", "jobs", "media", "venv"):
    p = os.path.join(d, sub)
    try:
        if os.path.isdir(p) and not os.path.islink(p) and os.stat(p).st_uid == os.getuid():
            os.chmod(p, 0o700)
    except OSError:
        pass
# Job directories whose agent stopped touching .alive (killed with its server) go.
out["swept"] = []
jobs = os.path.join(d, "jobs")
for name in (sorted(os.listdir(jobs)) if stale > 0 and os.path.isdir(jobs) else []):
    alive = os.path.join(jobs, name, ".alive")
    try:
        if time.time() - os.stat(alive).st_mtime > stale:
            shutil.rmtree(os.path.join(jobs, name))
            out["swept"].append(name)
    except OSError:
        pass
print("POTATO-PROBE " + json.dumps(out))
"""

PROBE_SH = r"""
py=$1; shift
command -v "$py" >/dev/null 2>&1 || exit %d
"$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 8) else 1)' 2>/dev/null || {
  "$py" -c 'import sys; print("POTATO-PYTHON %%d.%%d" %% sys.version_info[:2])' 2>/dev/null
  exit %d
}
exec "$py" -c "$@"
""" % (REMOTE_NO_PYTHON, REMOTE_OLD_PYTHON)


def probe_command(python: str, remote_dir: str, code_hash: str, venv_key: str,
                  stale_s: float = 0) -> str:
    """One round trip: the interpreter (97: not found, 98: too old), GPUs, code, venv state;
    on the way, remote_dir made private (0700) and job directories whose agent has been silent
    for ``stale_s`` seconds removed (``swept``; 0: none)."""
    return sh(PROBE_SH, python, PROBE_PY, remote_dir, code_hash, venv_key, "%g" % stale_s)


def parse_probe(stdout: str) -> dict:
    for line in stdout.splitlines():
        if line.startswith(PROBE_MARK):
            return json.loads(line[len(PROBE_MARK):])
    raise ValueError("no probe line in the host's output: %r" % stdout[-500:])


def old_python_version(stdout: str) -> str:
    for line in stdout.splitlines():
        if line.startswith("POTATO-PYTHON "):
            return line.split()[1]
    return "older than 3.8"


# Reads a tar.gz of Potato's source on stdin and installs it as code/<hash>, atomically:
# extracted under a temporary name, then renamed (rename fails if another copy won the race).
INSTALL_PY = r"""
import io, os, shutil, sys, tarfile, tempfile
os.umask(0o077)
d = os.path.join(os.path.expanduser(sys.argv[1]), "code"); final = os.path.join(d, sys.argv[2])
os.makedirs(d, exist_ok=True)
tmp = tempfile.mkdtemp(prefix=".tmp-", dir=d)
data = sys.stdin.buffer.read()
with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
    for m in tar.getmembers():
        if m.name.startswith(("/", "..")) or ".." in m.name.split("/") or not (m.isfile() or m.isdir()):
            sys.exit("refusing member %r" % m.name)
        m.mode = 0o700 if m.isdir() else 0o600
    tar.extractall(tmp)
try:
    os.rename(tmp, final)
except OSError:
    shutil.rmtree(tmp, ignore_errors=True)
    if not os.path.isfile(os.path.join(final, "potato", "__init__.py")):
        raise
print("installed")
"""


def install_code_command(python: str, remote_dir: str, code_hash: str) -> str:
    return " ".join([shlex.quote(python), "-c", shlex.quote(INSTALL_PY),
                     shlex.quote(remote_dir), shlex.quote(code_hash)])


# Creates remote_dir/venv with --system-site-packages and installs the packages once.
VENV_PY = r"""
import json, os, shutil, subprocess, sys
os.umask(0o077)
d = os.path.expanduser(sys.argv[1]); key = sys.argv[2]; packages = json.loads(sys.argv[3])
venv = os.path.join(d, "venv"); marker = os.path.join(venv, ".potato-packages")
if os.path.isdir(venv):
    shutil.rmtree(venv)
subprocess.check_call([sys.executable, "-m", "venv", "--system-site-packages", venv])
py = os.path.join(venv, "bin", "python")
subprocess.check_call([py, "-m", "pip", "install", "--disable-pip-version-check", "-q"] + packages)
with open(marker, "w") as f:
    f.write(key)
print("venv ready")
"""


def venv_command(python: str, remote_dir: str, key: str, packages: List[str]) -> str:
    return " ".join([shlex.quote(python), "-c", shlex.quote(VENV_PY), shlex.quote(remote_dir),
                     shlex.quote(key), shlex.quote(json.dumps(packages))])


AGENT_SH = r"""
umask 077
d=$1; code=$2; py=$3; sock=$4; run=$5; job=$6
case "$d" in "~"|"~/"*) d="$HOME${d#\~}";; esac
case "$py" in "~/"*) py="$HOME${py#\~}";; esac
cd "$d/code/$code" || exit %d
PYTHONPATH="$d/code/$code${PYTHONPATH:+:$PYTHONPATH}" exec "$py" -m potato.training.agent --socket "$sock" --run "$run" \
  --workdir "$d/jobs/$job" --python "$py"
""" % REMOTE_NO_CODE


def agent_command(python: str, remote_dir: str, code_hash: str, socket_path: str,
                  run_id: str, job_name: str) -> str:
    """Start the agent from the copied source; its token arrives on stdin. ``job_name`` names
    the job directory: unique, so projects sharing a remote_dir never share one."""
    return sh(AGENT_SH, remote_dir, code_hash, python, socket_path, run_id, job_name)


def venv_python(remote_dir: str) -> str:
    """The venv's interpreter, as a path the remote shell expands (``~`` kept unquoted)."""
    return remote_dir.rstrip("/") + "/venv/bin/python"


def model_check_command(python: str, model: str) -> str:
    """``python -c <model_source.py> MODEL``: resolves a trainer's model on the host, before
    any of Potato's code is there."""
    with open(model_source.__file__, encoding="utf-8") as f:
        source = f.read()
    return " ".join([shlex.quote(python), "-c", shlex.quote(source), shlex.quote(model)])


def parse_model_check(stdout: str):
    """(found, sentence) from the host's POTATO-MODEL line; ValueError without one."""
    for line in stdout.splitlines():
        if line.startswith(model_source.MARK):
            d = json.loads(line[len(model_source.MARK):])
            return bool(d["ok"]), str(d["sentence"])[:500]
    raise ValueError("no model line in the host's output: %r" % stdout[-500:])
