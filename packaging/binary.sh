#!/usr/bin/env bash
# Builds the binary both packages carry, linked against glibc's symbol versions no newer
# than the floor, so the same .deb and .rpm run on the oldest distributions
# docs/systemd.md lists (RHEL 8 has glibc 2.28; Debian 11 and Ubuntu 20.04 2.31):
#   bash packaging/binary.sh            builds (cargo zigbuild, release), prints the binary's path
#   bash packaging/binary.sh --floor    prints the floor (what packaging/check.sh holds the binary to)
# A plain `cargo build --release` links against the build host's glibc and needs whatever
# it has (2.34 and newer on Debian 12). The tools come from packaging/tools.sh.
set -euo pipefail
GLIBC_FLOOR=2.28
case "${1:-}" in
  --floor) echo "$GLIBC_FLOOR"; exit 0 ;;
  "") ;;
  -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "packaging/binary.sh: unknown argument $1 (allowed: --floor)" >&2; exit 2 ;;
esac
TARGET=$(realpath -m "${CARGO_TARGET_DIR:-$(dirname "$0")/../target}")
cd "$(dirname "$0")/.."
VENV=$TARGET/tools/zigbuild
[ -x "$VENV/bin/cargo-zigbuild" ] || { echo "packaging/binary.sh: $VENV/bin/cargo-zigbuild is missing (run: bash packaging/tools.sh)" >&2; exit 1; }
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
case "$TRIPLE" in
  *-linux-gnu) ;;
  *) echo "packaging/binary.sh: the host is $TRIPLE; allowed: a *-linux-gnu host (the packages are built for glibc)" >&2; exit 1 ;;
esac
# The venv's bin first: cargo-zigbuild runs zig as `python -m ziglang` with that python.
PATH=$VENV/bin:$PATH CARGO_TARGET_DIR=$TARGET \
  cargo zigbuild --release --locked -p allot --bin allot --target "$TRIPLE.$GLIBC_FLOOR" >&2
echo "$TARGET/$TRIPLE/release/allot"
