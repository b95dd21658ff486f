#!/usr/bin/env bash
# Build the systemd guest for tests/vm/systemd/run.sh into OUTDIR (run.sh calls this;
# it can also be run by hand):
#
#   tests/vm/systemd/build-image.sh OUTDIR [SUITE]
#
# SUITE is the rootfs's Debian release: bookworm (the default: systemd 252) or bullseye
# (Debian 11: systemd 247, glibc 2.31, for tests/vm/systemd/oldsd.sh); the kernel is
# bookworm-backports' either way.
# OUTDIR gets:
#   vmlinuz          Debian bookworm-backports linux-image-cloud-amd64 (6.12)
#   rootfs/          Debian SUITE made by mmdebstrap: systemd as PID 1, logind, the
#                    kernel's modules (depmod'ed), users allot-ta (2001) and allot-tb (2002)
#   kernel-version, packages.txt (dpkg -l of the rootfs), suite, build.log, build-time
# run.sh keys its cache on a hash of this file, so any change here (the package list
# included) builds a new image. Needs root (mmdebstrap --mode=root, chroot) and Debian's
# mirrors. It writes OUTDIR.tmp first and renames it when everything succeeded.
#
# Exit status: 0, or 93 kernel could not be fetched or lacks an option, 94 rootfs build
# failed, 92 host tools missing (same codes as run.sh).
set -euo pipefail

SUITE=${2:-bookworm}
case $SUITE in bookworm|bullseye) ;; *) echo "build-image.sh: suite '$SUITE': use bookworm or bullseye" >&2; exit 2 ;; esac
KERNEL_SUITE=bookworm
MIRROR=http://deb.debian.org/debian
SECURITY=http://deb.debian.org/debian-security
# what the guest needs: systemd as PID 1 with logind sessions, the tools a test uses
PACKAGES=(
  systemd systemd-sysv udev dbus libpam-systemd login passwd adduser
  procps util-linux sudo iproute2 kmod psmisc
  python3-minimal rt-tests
)
# kernel options the harness relies on being built in (no initramfs: the root disk is NVMe)
KERNEL_BUILTIN=(
  CONFIG_CGROUPS CONFIG_CGROUP_SCHED CONFIG_FAIR_GROUP_SCHED CONFIG_CFS_BANDWIDTH
  CONFIG_BLK_DEV_NVME CONFIG_EXT4_FS CONFIG_SERIAL_8250_CONSOLE CONFIG_DEVTMPFS
  CONFIG_TMPFS CONFIG_UNIX CONFIG_CGROUP_BPF CONFIG_SCHEDSTATS CONFIG_PSI
)
KERNEL_MIN=6.12

say() { printf 'vm-image: %s\n' "$*" >&2; }
die() {
  local code=$1; shift
  if [ -n "${LOG:-}" ] && [ -f "$LOG" ]; then
    cp "$LOG" "$OUT.failed.log"; tail -n 15 "$LOG" | sed 's/^/  | /' >&2
    say "full log: $OUT.failed.log"
  fi
  say "FAILED: $*"; exit "$code"
}

[ $# = 1 ] || [ $# = 2 ] || { echo "usage: $0 OUTDIR [SUITE]" >&2; exit 2; }
OUT=$1
[ "$(id -u)" = 0 ] || die 92 "needs root (mmdebstrap --mode=root and chroot)"
for t in mmdebstrap apt-get dpkg-deb chroot; do
  command -v "$t" >/dev/null || die 92 "missing $t (apt-get install mmdebstrap)"
done

# shellcheck source=tests/vm/systemd/mounts.sh
. "$(dirname "$0")/mounts.sh"
TMP=$OUT.tmp
unmount_under "$TMP" || die 94 "cannot unmount what an earlier build left mounted under $TMP"
rm -rf --one-file-system "$TMP"
mkdir -p "$TMP"
cleanup() { unmount_under "$TMP"; rm -rf --one-file-system "$TMP"; }
trap cleanup EXIT
LOG=$TMP/build.log
rm -f "$OUT.failed.log"
T0=$(date +%s)
export DEBIAN_FRONTEND=noninteractive

# ---------------------------------------------------------------- kernel
# A private apt configuration (sources list, lists, cache) under TMP: the host's apt
# sources are neither read nor changed.
kernel() {
  local apt=$TMP/apt meta kpkg deb cfg opt kver
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/dl"
  echo "deb $MIRROR $KERNEL_SUITE-backports main" > "$apt/sources.list"
  local A=(-q -o "Dir::Etc::sourcelist=$apt/sources.list" -o "Dir::Etc::sourceparts=-"
           -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
           -o "APT::Sandbox::User=root")
  say "kernel: apt-get update ($KERNEL_SUITE-backports, private lists)"
  apt-get "${A[@]}" update >>"$LOG" 2>&1 || die 93 "apt-get update of $KERNEL_SUITE-backports failed"
  ( cd "$apt/dl" && apt-get "${A[@]}" download linux-image-cloud-amd64 ) >>"$LOG" 2>&1 \
    || die 93 "apt-get download linux-image-cloud-amd64 from $KERNEL_SUITE-backports failed"
  meta=$(ls "$apt"/dl/linux-image-cloud-amd64_*.deb)
  kpkg=$(dpkg-deb -f "$meta" Depends | tr ',' '\n' | sed -n 's/^ *\(linux-image-[0-9][^ ]*\).*/\1/p' | head -n1)
  [ -n "$kpkg" ] || die 93 "no versioned image package in $(basename "$meta")'s Depends"
  say "kernel: downloading $kpkg"
  ( cd "$apt/dl" && apt-get "${A[@]}" download "$kpkg" ) >>"$LOG" 2>&1 \
    || die 93 "apt-get download $kpkg failed"
  deb=$(ls "$apt"/dl/"$kpkg"_*.deb)
  dpkg-deb -x "$deb" "$TMP/k" || die 93 "cannot extract $deb"
  cfg=$(ls "$TMP"/k/boot/config-* | head -n1)
  for opt in "${KERNEL_BUILTIN[@]}"; do
    grep -qx "$opt=y" "$cfg" || die 93 "$kpkg lacks built-in $opt"
  done
  kver=$(basename "$cfg"); kver=${kver#config-}
  printf '%s\n%s\n' "$KERNEL_MIN" "${kver%%[-+]*}" | sort -V -C \
    || die 93 "$kpkg is kernel ${kver}, older than $KERNEL_MIN"
  cp "$TMP"/k/boot/vmlinuz-* "$TMP/vmlinuz"
  cp "$cfg" "$TMP/kernel-config"
  echo "$kpkg $(dpkg-deb -f "$deb" Version) $kver" > "$TMP/kernel-version"
  KVER=$kver
}
kernel
say "kernel: $(cat "$TMP/kernel-version") ($(( $(date +%s) - T0 )) s)"

# ---------------------------------------------------------------- rootfs
R=$TMP/rootfs
T1=$(date +%s)
cat > "$TMP/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY $SUITE-security main
EOF
say "rootfs: mmdebstrap $SUITE (${#PACKAGES[@]} packages and their dependencies)"
pkgs=$(IFS=,; echo "${PACKAGES[*]}")
mmdebstrap --variant=apt --mode=root --format=directory --include="$pkgs" \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  "$SUITE" "$R" "$TMP/sources.list" >>"$LOG" 2>&1 \
  || die 94 "mmdebstrap failed"
say "rootfs: mmdebstrap done ($(( $(date +%s) - T1 )) s)"

# the kernel's modules, so modprobe (systemd's modprobe@ units, autofs4, loop) works
# (into /lib/modules: the same folder on a merged-/usr rootfs, and the one bullseye's kmod
# reads if its /lib is not merged)
mkdir -p "$R/lib/modules"
cp -a "$TMP/k/lib/modules/$KVER" "$R/lib/modules/"
chroot "$R" depmod -a "$KVER" >>"$LOG" 2>&1 || die 94 "depmod in the rootfs failed"

# identity: fixed machine-id (no first-boot logic), hostname, users
echo "$(printf '%s' "allot-vm-systemd" | sha256sum | cut -c1-32)" > "$R/etc/machine-id"
echo allot-vm > "$R/etc/hostname"
printf '127.0.0.1 localhost allot-vm\n::1 localhost ip6-localhost ip6-loopback\n' > "$R/etc/hosts"
printf '# root is mounted by the kernel (root=/dev/nvme0n1 rw); nothing else\n' > "$R/etc/fstab"
echo 'LANG=C.UTF-8' > "$R/etc/default/locale"
chroot "$R" sh -e -c '
  passwd -d root >/dev/null
  groupadd -g 2001 allot-ta; useradd -m -u 2001 -g 2001 -s /bin/bash -c "allot test user a" allot-ta
  groupadd -g 2002 allot-tb; useradd -m -u 2002 -g 2002 -s /bin/bash -c "allot test user b" allot-tb
' >>"$LOG" 2>&1 || die 94 "creating the test users failed"

# systemd: boot to multi-user, nothing slow or periodic that a test did not ask for
S=$R/etc/systemd/system
ln -sf /lib/systemd/system/multi-user.target "$S/default.target"
for u in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer fstrim.timer \
         e2scrub_all.timer e2scrub_reap.service systemd-tmpfiles-clean.timer \
         getty@tty1.service serial-getty@ttyS0.service console-getty.service \
         systemd-networkd-wait-online.service systemd-binfmt.service \
         proc-sys-fs-binfmt_misc.automount; do
  ln -sf /dev/null "$S/$u"
done
# journal in /run: no disk writes, no flush at boot
mkdir -p "$R/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\n' > "$R/etc/systemd/journald.conf.d/allot-vm.conf"
# a boot that falls into emergency/rescue mode says so on the console and powers off
# instead of waiting for a login nobody will give (run.sh then fails with 96)
mkdir -p "$R/usr/local/lib/allot-vm"
cat > "$R/usr/local/lib/allot-vm/boot-failed" <<'EOS'
#!/bin/sh
# ExecStart of emergency.service and rescue.service in the allot test VM
m="ALLOT-VM-BOOT-FAILED: $1; failed units: $(systemctl --failed --no-legend --plain | cut -d' ' -f1 | tr '\n' ' ')"
m="$m; first errors: $(journalctl -b -p err -o cat --no-pager | head -n 3 | tr '\n' ';')"
{ echo "$m"; journalctl -b -p warning --no-pager | tail -n 40; } >/dev/console 2>&1
stty -F /dev/ttyS2 raw -echo 2>/dev/null; echo "$m" >/dev/ttyS2   # run.sh's control channel
sync
systemctl poweroff -ff
EOS
chmod 0755 "$R/usr/local/lib/allot-vm/boot-failed"
for u in emergency rescue; do
  mkdir -p "$S/$u.service.d"
  printf '[Service]\nExecStart=\nExecStart=/usr/local/lib/allot-vm/boot-failed %%N\n' \
    > "$S/$u.service.d/allot-vm.conf"
done

chroot "$R" dpkg-query -W -f '${Package} ${Version}\n' > "$TMP/packages.txt"
echo "$SUITE" > "$TMP/suite"
rm -rf "$R"/var/cache/apt/archives/*.deb "$R"/var/lib/apt/lists/* "$TMP/k" "$TMP/apt"
echo "$(( $(date +%s) - T0 ))" > "$TMP/build-time"
say "rootfs: $(wc -l < "$TMP/packages.txt") packages, $(du -sm "$R" | cut -f1) MiB; built in $(cat "$TMP/build-time") s"

# nothing mounted may go into the cache: it would be linked into every run's root tree
unmount_under "$TMP" || die 94 "a mount is left under $TMP after the build: $(mounts_under "$TMP" | tr '\n' ' ')"
trap - EXIT
rm -rf --one-file-system "$OUT"
mv "$TMP" "$OUT"
