"""A single-node SLURM (munge + slurmctld + slurmd) for tests and benchmarks, as root.

No accounting database (as on many real clusters). Files live in one directory; clients need
``SLURM_CONF`` pointing at its slurm.conf. See shared notes on what was seen to work here.
"""

import os
import shutil
import signal
import socket
import subprocess
import time

from tests.sshd import free_port


def _munge():
    if subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode == 0:
        return
    key = "/etc/munge/munge.key"
    if not os.path.exists(key):
        os.makedirs("/etc/munge", exist_ok=True)
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
    shutil.chown(key, "munge", "munge")
    os.chmod(key, 0o400)
    for d in ("/run/munge", "/var/lib/munge", "/var/log/munge"):
        os.makedirs(d, exist_ok=True)
        shutil.chown(d, "munge", "munge")
    subprocess.run(["su", "-s", "/bin/sh", "munge", "-c", "/usr/sbin/munged --force"],
                   check=True)


# The slurm.conf lines every test cluster shares: root daemons, munge, no cgroups, no
# accounting database (as on many real clusters); tests/slurm_cluster.py uses them too.
COMMON = """SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
"""


def start(d):
    """Start munge (if needed), slurmctld and slurmd with state in ``d``; returns slurm.conf."""
    _munge()
    host = socket.gethostname().split(".")[0]
    for sub in ("state", "spool", "log"):
        (d / sub).mkdir(exist_ok=True)
    conf = d / "slurm.conf"
    conf.write_text(f"""\
ClusterName=potato-test
SlurmctldHost={host}
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
{COMMON}StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
MinJobAge=300
NodeName={host} CPUs=2 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
    env = dict(os.environ, SLURM_CONF=str(conf))
    subprocess.run(["slurmctld", "-f", str(conf)], check=True, env=env)
    subprocess.run(["slurmd", "-f", str(conf)], check=True, env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        r = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=env)
        if r.stdout.strip() == "idle":
            return str(conf)
        time.sleep(0.5)
    raise RuntimeError("SLURM did not come up: %s" % (d / "log" / "slurmctld.log").read_text()[-2000:])


def stop(d):
    for name in ("slurmd.pid", "slurmctld.pid"):
        try:
            os.kill(int((d / name).read_text()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
