#!/usr/bin/env bash
# Creates (or updates) the Python environment and the Node packages with the Kafka clients
# the tests drive, and prints the Python interpreter's path. Packages come from PyPI and the
# npm registry; nothing else is downloaded. Node packages go to ~/.cache/skein/node.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${SKEIN_VENV:-$HOME/.cache/skein/venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
stamp="$venv/.requirements"
if ! cmp -s "$here/requirements.txt" "$stamp" 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt" >&2
  cp "$here/requirements.txt" "$stamp"
fi
node_dir="${SKEIN_NODE_DIR:-$HOME/.cache/skein/node}"
if command -v npm >/dev/null 2>&1 && ! cmp -s "$here/package.json" "$node_dir/package.json" 2>/dev/null; then
  mkdir -p "$node_dir"
  cp "$here/package.json" "$node_dir/package.json"
  (cd "$node_dir" && npm install --no-audit --no-fund --silent >&2)
fi
echo "$venv/bin/python"
