#!/usr/bin/env bash
# Builds allot's RPM with rpmbuild from an already-built binary (no cargo inside rpmbuild):
#   bash packaging/rpm/build.sh [--binary PATH] [--out DIR]
# prints the path of the .rpm it made (default $CARGO_TARGET_DIR/rpm, else target/rpm:
# allot-VERSION-1.ARCH.rpm).
#
# The same contents as the .deb (packaging/deb/build.sh): the binary (stripped the same
# way), the unit in /usr/lib/systemd/system (enabled and started on install), man pages
# and completions made by the binary, the annotated example config, the README, and the
# licenses: LICENSE-MIT, LICENSE-APACHE and LICENSE.dependencies (every bundled crate,
# from packaging/licenses.sh). The scriptlets are in packaging/rpm/allot.spec; rpmbuild
# runs in a scratch _topdir under the target directory, removed afterwards, even on
# failure (its _tmppath too: rpmbuild keeps a failed scriptlet's file there).
# ALLOT_MAINTAINER="Name <address>" sets the Packager and the changelog's author.
set -euo pipefail
TARGET=$(realpath -m "${CARGO_TARGET_DIR:-$(dirname "$0")/../../target}")
BIN=""; OUT=$TARGET/rpm
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) BIN=$(realpath -m "$2"); shift 2 ;;
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "packaging/rpm/build.sh: unknown argument $1 (allowed: --binary PATH, --out DIR)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/../.."
command -v rpmbuild >/dev/null || { echo "packaging/rpm/build.sh: rpmbuild is missing (apt-get install rpm, or dnf install rpm-build)" >&2; exit 1; }
if [ -z "$BIN" ]; then
  # Linked against glibc's old symbol versions (packaging/binary.sh), to run on glibc 2.28 hosts.
  BIN=$(CARGO_TARGET_DIR=$TARGET bash packaging/binary.sh)
fi
[ -x "$BIN" ] || { echo "packaging/rpm/build.sh: $BIN is not an executable" >&2; exit 1; }
# A placeholder under the reserved .invalid domain (RFC 2606): no real mailbox.
MAINTAINER=${ALLOT_MAINTAINER:-allot developers <allot-maintainers@allot.invalid>}
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
SYSTEMD_MIN=$(sed -n 's/^pub const MIN_VERSION: u32 = \([0-9]*\);/\1/p' crates/allot-linux/src/ipc/systemd_bus/mod.rs)
[ -n "$SYSTEMD_MIN" ] || { echo "packaging/rpm/build.sh: no MIN_VERSION in crates/allot-linux/src/ipc/systemd_bus/mod.rs" >&2; exit 1; }
EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

mkdir -p "$TARGET"
TOP=$(mktemp -d "$TARGET/rpmbuild.XXXXXX")
trap 'rm -rf "$TOP"' EXIT
mkdir -p "$TOP/SOURCES" "$TOP/SPECS" "$TOP/tmp" "$OUT"
# Stripped as the .deb's binary is (dh_strip's way), so both carry the same bytes.
strip --remove-section=.comment --remove-section=.note -o "$TOP/SOURCES/allot" "$BIN"
cp packaging/systemd/allot.service packaging/systemd/allot.socket packaging/allot.toml LICENSE-MIT LICENSE-APACHE README.md "$TOP/SOURCES/"
bash packaging/licenses.sh copyright > "$TOP/SOURCES/LICENSE.dependencies"
LICENSE=$(bash packaging/licenses.sh spdx)
PROVIDES=$(bash packaging/licenses.sh list | awk -F'\t' '{printf "Provides:       bundled(crate(%s)) = %s\n", $1, $2}')
DATE=$(LC_ALL=C date -u -d "@$EPOCH" '+%a %b %d %Y')
awk -v version="$VERSION" -v license="$LICENSE" -v provides="$PROVIDES" -v date="$DATE" \
    -v packager="$MAINTAINER" -v systemd_min="$SYSTEMD_MIN" '
  { gsub(/@VERSION@/, version); gsub(/@LICENSE@/, license); gsub(/@DATE@/, date)
    gsub(/@PACKAGER@/, packager); gsub(/@SYSTEMD_MIN@/, systemd_min)
    if ($0 == "@PROVIDES@") print provides; else print }' \
  packaging/rpm/allot.spec > "$TOP/SPECS/allot.spec"
if grep -n '@[A-Z_]*@' "$TOP/SPECS/allot.spec" >&2; then
  echo "packaging/rpm/build.sh: a field of allot.spec was left unfilled (above)" >&2; exit 1
fi

SOURCE_DATE_EPOCH=$EPOCH rpmbuild -bb --quiet \
  --define "_topdir $TOP" \
  --define "_tmppath $TOP/tmp" \
  --define "_rpmdir $OUT" \
  --define "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm" \
  --define "packager $MAINTAINER" \
  --define "use_source_date_epoch_as_buildtime 1" \
  --define "clamp_mtime_to_source_date_epoch 1" \
  "$TOP/SPECS/allot.spec" >&2
RPM=$OUT/allot-$VERSION-1$(rpm --eval "%{?dist}").$(rpm --eval "%{_arch}").rpm
[ -f "$RPM" ] || { echo "packaging/rpm/build.sh: rpmbuild made no $RPM" >&2; exit 1; }
echo "$RPM"
