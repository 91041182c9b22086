#!/usr/bin/env bash
# Install what the test suite needs, then run it. Used as-is by .ci/run.
# Needs root (or sudo) for the Debian packages that the integration tests start.
set -euo pipefail
cd "$(dirname "$0")/.."

pip_install() { python3 -m pip install --quiet --disable-pip-version-check "$@"; }

# torch first, pinned: on the project's build machines torch 2.13.0 is a CPU build kept on disk
# (an unpinned torch pulls a multi-GB CUDA build).
python3 -c 'import torch' 2>/dev/null || pip_install 'torch==2.13.0'
pip_install -e '.[test,train-text]'

python3 -m pytest "$@"
