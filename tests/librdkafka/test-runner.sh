#!/usr/bin/env bash
# librdkafka's own test runner, built from the librdkafka sources that rdkafka-sys vendors
# (the crate is already in Cargo.lock, so nothing is downloaded but crates.io's crate), once
# per version, under ~/.cache/skein/librdkafka-tests. Prints the runner's path.
set -euo pipefail
cd "$(dirname "$0")/../.."

src="$(cargo metadata --format-version 1 --locked 2>/dev/null | python3 -c '
import json, os, sys
for package in json.load(sys.stdin)["packages"]:
    if package["name"] == "rdkafka-sys":
        print(os.path.join(os.path.dirname(package["manifest_path"]), "librdkafka"))
        break
')"
[ -f "$src/tests/test.c" ] || { echo "no librdkafka sources at '$src'" >&2; exit 1; }
version="$(basename "$(dirname "$src")")"
out="${SKEIN_LIBRDKAFKA_TESTS:-$HOME/.cache/skein/librdkafka-tests}/$version"
runner="$out/tests/test-runner"
if [ ! -x "$runner" ]; then
  echo "building librdkafka's test runner ($version) in $out" >&2
  # Only what the transaction and idempotence tests need: no SASL, zstd or external lz4.
  # (Its sources include curl's header whatever WITH_CURL says: .ci/run installs
  # libcurl4-openssl-dev.)
  cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DRDKAFKA_BUILD_TESTS=ON \
    -DRDKAFKA_BUILD_EXAMPLES=OFF -DWITH_SASL=OFF -DWITH_ZSTD=OFF -DENABLE_LZ4_EXT=OFF >&2
  cmake --build "$out" --target test-runner -j "$(nproc)" >&2
fi
echo "$runner"
