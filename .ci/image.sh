#!/usr/bin/env bash
# Builds Skein's image from the Containerfile with buildah and pulls nothing: the release
# build is made here first, then the build stage runs FROM scratch with this machine's
# system mounted into it read-only and the target directory holding that build
# (PREBUILT=1: it gathers the binary and the libraries it links rather than compiling
# again). Then lints the recipe with hadolint and smoke-tests the image: `skein --version`,
# and `skein dev` inside it serving a Kafka client (kcat) and the gateway (curl) on
# loopback.
#
# Needs root (buildah's chroot isolation), buildah, kcat and curl; prints the image's name.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/skein/target}"
python="${SKEIN_PYTHON:-$HOME/.cache/skein/venv/bin/python}"
image="localhost/skein:ci"
storage=(--storage-driver vfs)

echo "== hadolint Containerfile" >&2
"$(dirname "$python")/hadolint" Containerfile >&2

echo "== cargo build --release -p skein" >&2
cargo build --release --locked -p skein >&2

cargo_home="${CARGO_HOME:-$HOME/.cargo}"
rustup_home="${RUSTUP_HOME:-$HOME/.rustup}"
mounts=()
for dir in /usr /etc/ssl /etc/alternatives; do
  mounts+=(--volume "$dir:$dir:ro")
done
# /bin, /lib and /lib64 are links into /usr on Debian, which an empty root lacks: bound
# (through the link) to where the shell and the loader are looked for.
for dir in /bin /sbin /lib /lib64; do
  if [ -e "$dir" ]; then mounts+=(--volume "$(readlink -f "$dir"):$dir:ro"); fi
done
# At the paths they have here, for a build stage that compiles (without PREBUILT).
mounts+=(
  --volume "$cargo_home:$cargo_home"
  --volume "$rustup_home:$rustup_home:ro"
  --volume "$CARGO_TARGET_DIR:$CARGO_TARGET_DIR"
)

echo "== buildah bud (FROM scratch, this machine's toolchain)" >&2
buildah "${storage[@]}" bud --isolation chroot --layers=false \
  --build-arg BUILDER=scratch \
  --build-arg SRC="$PWD" \
  --build-arg PREBUILT=1 \
  --build-arg CARGO_HOME="$cargo_home" \
  --build-arg RUSTUP_HOME="$rustup_home" \
  --build-arg CARGO_TARGET_DIR="$CARGO_TARGET_DIR" \
  "${mounts[@]}" \
  -t "$image" -f Containerfile . >&2

echo "== smoke test: skein --version" >&2
container="$(buildah "${storage[@]}" from "$image")"
dev_pid=""
cleanup() {
  if [ -n "$dev_pid" ]; then kill -TERM -- "-$dev_pid" 2>/dev/null || true; wait "$dev_pid" 2>/dev/null || true; fi
  buildah "${storage[@]}" rm "$container" >/dev/null 2>&1 || true
}
trap cleanup EXIT
version="$(buildah "${storage[@]}" run --isolation chroot "$container" -- /usr/bin/skein --version)"
echo "$version" >&2
[ "$version" = "$("$CARGO_TARGET_DIR/release/skein" --version)" ]

echo "== smoke test: skein dev in the image" >&2
read -r kafka rest admin grpc sasl < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(5)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))')
log="$(mktemp)"
set -m
buildah "${storage[@]}" run --isolation chroot "$container" -- /usr/bin/skein dev \
  --data-dir /tmp/dev --kafka-listen "127.0.0.1:$kafka" --gateway-listen "127.0.0.1:$rest" \
  --admin-listen "127.0.0.1:$admin" --gateway-grpc-listen "127.0.0.1:$grpc" \
  --kafka-sasl-listen "127.0.0.1:$sasl" >"$log" 2>&1 &
dev_pid=$!
set +m
for _ in $(seq 120); do
  if curl -fsS "http://127.0.0.1:$rest/readyz" >/dev/null 2>&1; then break; fi
  sleep 0.5
done
if ! curl -fsS "http://127.0.0.1:$rest/readyz" >/dev/null; then
  cat "$log" >&2
  echo "skein dev in the image did not become ready" >&2
  exit 1
fi
# A record through the Kafka protocol, read back.
printf 'from-the-image\n' | kcat -b "127.0.0.1:$kafka" -t image-smoke -P
got="$(kcat -b "127.0.0.1:$kafka" -t image-smoke -C -o beginning -c 1 -e -q)"
[ "$got" = "from-the-image" ] || { cat "$log" >&2; echo "read back '$got'" >&2; exit 1; }
echo "skein dev in the image served Kafka and the gateway" >&2
echo "$image"
