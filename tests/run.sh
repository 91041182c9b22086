#!/usr/bin/env bash
# Install what the test suite needs, then run it. Used as-is by .ci/run.
# Needs root (or sudo) for the Debian packages that the integration tests start.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'

python3 -m pytest "$@"
