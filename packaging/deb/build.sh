#!/usr/bin/env bash
# Builds allot's Debian package with dpkg-deb (no debhelper needed):
#   bash packaging/deb/build.sh [--binary PATH] [--out DIR]
# prints the path of the .deb it made (default $CARGO_TARGET_DIR/debian, else
# target/debian: allot_VERSION-1_ARCH.deb).
#
# The package holds the binary (stripped), the systemd unit (enabled and started on
# install, as debhelper's dh_installsystemd does it), man pages (allot(1), one per command,
# allot.toml(5)) and bash/zsh/fish completions made by the binary itself from its CLI and
# config definitions, the annotated example config, the README, and the copyright file
# listing every bundled crate (packaging/licenses.sh). No config file is installed: allot runs on its defaults.
# Removing the package stops the daemon and lets go of everything it made (`allot daemon
# --release`: no running process is stopped or moved); purging also removes its state
# (/var/lib/allot). ALLOT_MAINTAINER="Name <address>" sets the Maintainer field.
set -euo pipefail
TARGET=$(realpath -m "${CARGO_TARGET_DIR:-$(dirname "$0")/../../target}")
BIN=""; OUT=$TARGET/debian
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) BIN=$(realpath -m "$2"); shift 2 ;;
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "packaging/deb/build.sh: unknown argument $1 (allowed: --binary PATH, --out DIR)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/../.."
if [ -z "$BIN" ]; then
  # Linked against glibc's old symbol versions (packaging/binary.sh), to run on glibc 2.28 hosts.
  BIN=$(CARGO_TARGET_DIR=$TARGET bash packaging/binary.sh)
fi
[ -x "$BIN" ] || { echo "packaging/deb/build.sh: $BIN is not an executable" >&2; exit 1; }
# A placeholder under the reserved .invalid domain (RFC 2606): no real mailbox.
MAINTAINER=${ALLOT_MAINTAINER:-allot developers <allot-maintainers@allot.invalid>}
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
ARCH=$(dpkg --print-architecture)
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/allot-deb.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
chmod 0755 "$STAGE"
mkdir -p "$STAGE/DEBIAN" "$STAGE/usr/bin" "$STAGE/lib/systemd/system" "$STAGE/usr/share/man/man1" "$STAGE/usr/share/man/man5" \
  "$STAGE/usr/share/bash-completion/completions" "$STAGE/usr/share/zsh/vendor-completions" \
  "$STAGE/usr/share/fish/vendor_completions.d" "$STAGE/usr/share/doc/allot/examples" \
  "$STAGE/usr/share/lintian/overrides"

# Stripped as dh_strip strips an executable; the debug info stays in the build tree.
strip --remove-section=.comment --remove-section=.note -o "$STAGE/usr/bin/allot" "$BIN"
chmod 0755 "$STAGE/usr/bin/allot"
install -m 0644 packaging/systemd/allot.service "$STAGE/lib/systemd/system/allot.service"
install -m 0644 packaging/systemd/allot.socket "$STAGE/lib/systemd/system/allot.socket"
"$STAGE/usr/bin/allot" manpages "$STAGE/usr/share/man" 2>/dev/null
gzip -9n "$STAGE"/usr/share/man/man1/*.1 "$STAGE"/usr/share/man/man5/*.5
"$STAGE/usr/bin/allot" completions bash > "$STAGE/usr/share/bash-completion/completions/allot"
"$STAGE/usr/bin/allot" completions zsh > "$STAGE/usr/share/zsh/vendor-completions/_allot"
"$STAGE/usr/bin/allot" completions fish > "$STAGE/usr/share/fish/vendor_completions.d/allot.fish"
install -m 0644 packaging/allot.toml "$STAGE/usr/share/doc/allot/examples/allot.toml"
install -m 0644 README.md "$STAGE/usr/share/doc/allot/README.md"
bash packaging/licenses.sh copyright > "$STAGE/usr/share/doc/allot/copyright"
install -m 0644 packaging/deb/lintian-overrides "$STAGE/usr/share/lintian/overrides/allot"
printf 'allot (%s-1) unstable; urgency=medium\n\n  * Built from the allot source tree.\n\n -- %s  %s\n' \
  "$VERSION" "$MAINTAINER" "$(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")" \
  | gzip -9n > "$STAGE/usr/share/doc/allot/changelog.Debian.gz"
find "$STAGE/usr" "$STAGE/lib" -type f -exec chmod 0644 {} + && chmod 0755 "$STAGE/usr/bin/allot"
find "$STAGE" -type d -exec chmod 0755 {} +

# The newest glibc symbol version the binary needs is its libc6 dependency. The daemon
# refuses a systemd older than 239 (crates/allot-linux/src/ipc/systemd_bus/mod.rs, MIN_VERSION:
# RHEL 8's; docs/systemd.md has what each version gets), and talks to systemd and logind over the system bus:
# default-dbus-system-bus | dbus-system-bus is how Debian names "a system bus" since
# bookworm (dbus and dbus-broker provide it; so does Debian 11's dbus 1.12.28-0+deb11u1);
# a dbus older than those names may lack them (Ubuntu 20.04's and 22.04's were not
# checked), so plain dbus is the last alternative.
# libgcc-s1 only if the binary links libgcc_s (a zig-linked one unwinds without it).
GLIBC=$(objdump -T "$STAGE/usr/bin/allot" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n1)
LIBGCC=""
if objdump -p "$STAGE/usr/bin/allot" | grep -q 'NEEDED *libgcc_s\.so\.1'; then LIBGCC=" libgcc-s1,"; fi
SYSTEMD_MIN=$(sed -n 's/^pub const MIN_VERSION: u32 = \([0-9]*\);/\1/p' crates/allot-linux/src/ipc/systemd_bus/mod.rs)
[ -n "$SYSTEMD_MIN" ] || { echo "packaging/deb/build.sh: no MIN_VERSION in crates/allot-linux/src/ipc/systemd_bus/mod.rs" >&2; exit 1; }
SIZE=$(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)
cat > "$STAGE/DEBIAN/control" <<EOF
Package: allot
Version: $VERSION-1
Architecture: $ARCH
Maintainer: $MAINTAINER
Installed-Size: $SIZE
Depends: libc6 (>= $GLIBC),$LIBGCC systemd (>= $SYSTEMD_MIN), default-dbus-system-bus | dbus-system-bus | dbus
Section: admin
Priority: optional
Description: proportional-share CPU for shared Linux machines
 allot gives each job tickets and each user a currency, so one user's fifty
 processes cannot crowd out another user's one. It adds soft and hard caps, a
 background class that only uses idle CPU, and a latency boost for jobs that
 use less than their share, all enforced through the kernel's cgroups
 (systemd's delegation on systemd hosts) by a root daemon that users drive with
 the allot CLI.
EOF
(cd "$STAGE" && find usr lib -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum > DEBIAN/md5sums)
chmod 0644 "$STAGE/DEBIAN/md5sums"
for s in postinst prerm postrm; do install -m 0755 "packaging/deb/$s" "$STAGE/DEBIAN/$s"; done
mkdir -p "$OUT"
DEB=$OUT/allot_${VERSION}-1_${ARCH}.deb
dpkg-deb --root-owner-group -Zxz --build "$STAGE" "$DEB" >/dev/null
echo "$DEB"
