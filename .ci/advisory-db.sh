#!/usr/bin/env bash
# The RustSec advisory database for `cargo deny check`, which runs offline (CI and the
# developers' machines reach package registries only, never a git host).
#
#   bash .ci/advisory-db.sh
#       Lays a snapshot of the database out where deny.toml's db-path and db-urls make cargo-deny
#       look, and prints which snapshot it is and how old. The snapshot is $SKEIN_ADVISORY_DB if
#       set, otherwise advisory-db/ in the shared/ folder beside the checkout. Exits 3 when there
#       is none (.ci/run then checks bans, licenses and sources only).
#
#   bash .ci/advisory-db.sh subset SOURCE OUT [CRATE...]
#       Makes a snapshot in OUT from SOURCE, a clone of the RustSec advisory-db repository (a
#       checkout or a bare git directory): the advisories of every crate named in Cargo.lock and
#       fuzz/Cargo.lock, and of any CRATE given (ones about to be added), plus a SNAPSHOT file
#       with the commit and its date. To refresh: update the clone, run this, replace the
#       snapshot with OUT, run `cargo deny check advisories` and handle what it reports in
#       deny.toml. Run it again whenever Cargo.lock gains crates, or their advisories are missed.
set -euo pipefail
cd "$(dirname "$0")/.."

# cargo-deny keeps each database in <db-path>/<last url segment>-<hash of the url>; this is the
# directory for deny.toml's db-urls entry (cargo-deny names the one it wanted if it differs).
db_root="$HOME/.cache/skein/advisory-dbs"
db_dir="$db_root/advisory-db-3157b0e258782691"

lock_crates() {
  cat Cargo.lock fuzz/Cargo.lock 2>/dev/null | sed -n 's/^name = "\(.*\)"$/\1/p' | sort -u
}

if [ "${1:-}" = subset ]; then
  [ $# -ge 3 ] || { echo "usage: $0 subset SOURCE OUT [CRATE...]" >&2; exit 2; }
  src="$2"; out="$3"; shift 3
  if [ -d "$src/.git" ]; then git_dir="$src/.git"; else git_dir="$src"; fi
  commit="$(git --git-dir="$git_dir" rev-parse HEAD)"
  date="$(git --git-dir="$git_dir" show -s --format=%cI HEAD)"
  paths=()
  for name in $( (lock_crates; printf '%s\n' "$@") | grep -v '^$' | sort -u); do
    if git --git-dir="$git_dir" cat-file -e "HEAD:crates/$name" 2>/dev/null; then
      paths+=("crates/$name")
    fi
  done
  rm -rf "$out"
  mkdir -p "$out/crates"
  if [ ${#paths[@]} -gt 0 ]; then
    git --git-dir="$git_dir" archive HEAD "${paths[@]}" | tar -x -C "$out"
  fi
  printf 'commit %s\ndate %s\n' "$commit" "$date" >"$out/SNAPSHOT"
  echo "$out: $(find "$out/crates" -name '*.md' | wc -l) advisories of ${#paths[@]} crates, advisory-db $commit ($date)"
  exit 0
fi

src="${SKEIN_ADVISORY_DB:-../shared/advisory-db}"
if [ ! -d "$src/crates" ]; then
  echo "   no advisory database at $src: advisories NOT checked (see .ci/advisory-db.sh)"
  exit 3
fi
if [ -f "$src/SNAPSHOT" ]; then
  commit="$(sed -n 's/^commit //p' "$src/SNAPSHOT")"
  date="$(sed -n 's/^date //p' "$src/SNAPSHOT")"
else
  commit="$(git -C "$src" rev-parse HEAD)"
  date="$(git -C "$src" show -s --format=%cI HEAD)"
fi
rm -rf "$db_dir"
mkdir -p "$db_dir/.git"
cp -R "$src/crates" "$db_dir/crates"
chmod -R u+w "$db_dir"
# cargo-deny dates a database by the time of its last fetch (.git/FETCH_HEAD): make that the
# snapshot's own date, so its age is honest.
touch -d "$date" "$db_dir/.git/FETCH_HEAD"
age=$(( ($(date +%s) - $(date -d "$date" +%s)) / 86400 ))
echo "   advisory database: advisory-db $commit of $date ($age days old), from $src"
if [ "$age" -gt 90 ]; then
  echo "   warning: the advisory database is over 90 days old; refresh it (see .ci/advisory-db.sh)"
fi
