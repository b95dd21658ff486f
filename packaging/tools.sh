#!/usr/bin/env bash
# Installs the tools that build the packaged binary against an old glibc, pinned, into a
# virtual environment under the target directory (nothing outside it is changed):
#   bash packaging/tools.sh        (.ci/run calls it; packaging/binary.sh says to when they are missing)
#
#   cargo-zigbuild  links with zig as the C toolchain, so a target such as
#                   x86_64-unknown-linux-gnu.2.28 links against glibc 2.28's symbol
#                   versions whatever glibc the build host has (PyPI's cargo-zigbuild: the
#                   crates.io tool's release binary, so nothing is compiled here)
#   zig             PyPI's ziglang (the Zig project's own build in a wheel); cargo-zigbuild
#                   finds it as `python -m ziglang` through the environment's python
# Prints the folder whose bin/ holds cargo-zigbuild.
set -euo pipefail
CARGO_ZIGBUILD=0.24.0
ZIGLANG=0.17.0
TARGET=$(realpath -m "${CARGO_TARGET_DIR:-$(dirname "$0")/../target}")
VENV=$TARGET/tools/zigbuild
command -v python3 >/dev/null || { echo "packaging/tools.sh: python3 is missing (it installs cargo-zigbuild and zig from PyPI)" >&2; exit 1; }
if [ "$("$VENV/bin/cargo-zigbuild" --version 2>/dev/null)" != "cargo-zigbuild $CARGO_ZIGBUILD" ] \
   || [ "$("$VENV/bin/python" -m ziglang version 2>/dev/null)" != "$ZIGLANG" ]; then
  rm -rf "$VENV"
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check "cargo-zigbuild==$CARGO_ZIGBUILD" "ziglang==$ZIGLANG" >&2
fi
echo "$("$VENV/bin/cargo-zigbuild" --version), zig $("$VENV/bin/python" -m ziglang version) in $VENV" >&2
echo "$VENV"
