"""A throwaway OpenSSH server on loopback, for tests and benchmarks.

Everything lives in one directory: host key, client key, authorized_keys, sshd_config, and a
client ssh_config defining the alias ``potato-real``. ``bin/ssh`` there is a wrapper that runs
the real ssh with that config (and, with ``log``, records each start), to put first on PATH.
Nothing touches the machine's own ssh setup.
"""

import os
import signal
import socket
import subprocess
import time

SSHD = "/usr/sbin/sshd"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(d, log_spawns=None):
    """Start sshd with its files in ``d`` (a pathlib.Path); returns the port."""
    for name in ("host_key", "client_key"):
        if not (d / name).exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)],
                           check=True)
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    os.chmod(d / "authorized_keys", 0o600)
    port = free_port()
    (d / "sshd_config").write_text(f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {d}/host_key
PidFile {d}/sshd.pid
AuthorizedKeysFile {d}/authorized_keys
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
AllowTcpForwarding yes
AllowStreamLocalForwarding yes
StreamLocalBindUnlink yes
LogLevel VERBOSE
""")
    os.makedirs("/run/sshd", exist_ok=True)
    subprocess.run([SSHD, "-f", str(d / "sshd_config"), "-E", str(d / "sshd.log")], check=True)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    (d / "ssh_config").write_text(f"""\
Host potato-real
  HostName 127.0.0.1
  Port {port}
  User root
  IdentityFile {d}/client_key
  IdentitiesOnly yes
  UserKnownHostsFile {d}/known_hosts
""")
    wrapper = d / "bin"
    wrapper.mkdir(exist_ok=True)
    record = f'echo "$$" >> "{log_spawns}"\n' if log_spawns else ""
    (wrapper / "ssh").write_text(f'#!/bin/sh\n{record}exec /usr/bin/ssh -F "{d}/ssh_config" "$@"\n')
    os.chmod(wrapper / "ssh", 0o755)
    return port


def stop(d):
    try:
        os.kill(int((d / "sshd.pid").read_text()), signal.SIGTERM)
    except (OSError, ValueError):
        pass


def for_tests(tmp_path_factory):
    """A started sshd in a fresh directory for a test module (skipped where openssh-server is
    missing; a failure under CI, whose .ci/run installs it). Stop it with ``stop(d)``."""
    import pytest

    if not os.path.exists(SSHD):
        if os.environ.get("CI"):
            pytest.fail("openssh-server is not installed: .ci/run installs it")
        pytest.skip("openssh-server not installed")
    d = tmp_path_factory.mktemp("sshd")
    start(d)
    return d
