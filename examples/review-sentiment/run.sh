#!/bin/sh
# Start the example project from a checkout: check the config, import the 600 example labels
# (as annotator "gold"; importing again replaces them, so this is safe to re-run), and serve.
# Then open http://127.0.0.1:8000/ to annotate, http://127.0.0.1:8000/admin for the admin pages
# (key: example-admin-key-change-me). Extra arguments go to `potato start` (e.g. --port 8001).
set -e
here=$(cd "$(dirname "$0")" && pwd)
potato="$here/../../bin/potato"
if ! python3 -c 'import yaml' 2>/dev/null; then
  echo "Installing PyYAML, Potato's only runtime dependency ..."
  python3 -m pip install --quiet PyYAML || python3 -m pip install --quiet --user PyYAML
fi
"$potato" validate "$here/config.yaml"
"$potato" annotations import "$here/config.yaml" "$here/labels.jsonl" --annotator gold
exec "$potato" start "$here/config.yaml" "$@"
