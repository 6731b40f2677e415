#!/usr/bin/env bash
# Creates (or updates) the Python environment with the Kafka clients the tests drive, and
# prints its interpreter's path. Packages come from PyPI; nothing else is downloaded.
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
echo "$venv/bin/python"
