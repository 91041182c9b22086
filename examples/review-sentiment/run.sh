#!/bin/sh
# Validate the example project. (The server issue makes this import the labels and start it.)
set -e
here=$(cd "$(dirname "$0")" && pwd)
potato="$here/../../bin/potato"
"$potato" validate "$here/config.yaml"
