#!/usr/bin/env bash
# Install what the test suite needs, then run it. Used as-is by .ci/run.
# Needs root (or sudo) for the Debian packages the integration tests use (Chromium, ...).
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_=""
[ "$(id -u)" = 0 ] || sudo_="sudo"
need_apt=()
command -v chromium >/dev/null || need_apt+=(chromium)
command -v chromedriver >/dev/null || need_apt+=(chromium-driver)
command -v openssl >/dev/null || need_apt+=(openssl)
[ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
command -v ssh >/dev/null || need_apt+=(openssh-client)
[ -x /usr/sbin/slurmctld ] || need_apt+=(slurmctld)
[ -x /usr/sbin/slurmd ] || need_apt+=(slurmd)
command -v sbatch >/dev/null || need_apt+=(slurm-client)
[ -x /usr/sbin/munged ] || need_apt+=(munge)
command -v ip >/dev/null || need_apt+=(iproute2)  # the two-node SLURM fixture (tests/slurm_cluster.py)
if [ ${#need_apt[@]} -gt 0 ]; then
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

pip_install() { python3 -m pip install --quiet --disable-pip-version-check "$@"; }
# torch first, pinned: on the project's build machines torch 2.13.0 is a CPU build kept on disk
# (an unpinned torch pulls a multi-GB CUDA build).
python3 -c 'import torch' 2>/dev/null || pip_install 'torch==2.13.0'
pip_install -e '.[test,train-text,train-image,train-audio]'

python3 -m pytest "$@"
