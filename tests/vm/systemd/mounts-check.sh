#!/usr/bin/env bash
# The image cache's mount guard (mounts.sh), tested without a VM: a scratch "cached image"
# with mounts left in its rootfs (a bind mount where mmdebstrap mounts /proc, a tmpfs
# under it, a directory name with a space) is found, unmounted and reported as one to
# build again, and the bind mount's source is left as it was. Root (it mounts); prints
# ok/FAIL lines and exits 1 on a failure.
#
#   sudo bash tests/vm/systemd/mounts-check.sh
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "mounts-check: needs root (it mounts in a scratch directory)" >&2; exit 2; }
# shellcheck source=tests/vm/systemd/mounts.sh
. "$(dirname "$0")/mounts.sh"

S=$(mktemp -d /tmp/allot-mounts-check.XXXXXX)
IMG="$S/image-x"
fail=0
check() { local what=$1; shift; if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi; }
# the cleanup does not trust the functions under test: it unmounts what it sees itself
cleanup() {
  local m
  while IFS= read -r m; do umount -l "$m" 2>/dev/null || true; done \
    < <(awk -v p="$S/" '{ m = $5; gsub(/\\040/, " ", m); if (index(m "/", p) == 1) print m }' /proc/self/mountinfo | sort -r)
  rm -rf --one-file-system "$S"
}
trap cleanup EXIT

mkdir -p "$IMG/rootfs/proc" "$IMG/rootfs/dev" "$IMG/rootfs/a dir" "$S/host"
echo kept > "$S/host/marker"
mount --bind "$S/host" "$IMG/rootfs/proc"
mount -t tmpfs none "$IMG/rootfs/dev"
mkdir "$IMG/rootfs/dev/pts"
mount -t tmpfs none "$IMG/rootfs/dev/pts"
mount -t tmpfs none "$IMG/rootfs/a dir"

mapfile -t found < <(mounts_under "$IMG")
check "the four mounts under the image are found" test "${#found[@]}" = 4
check "deepest first (dev/pts before dev)" \
  test "$(printf '%s\n' "${found[@]}" | grep -n 'rootfs/dev' | head -n1 | cut -d: -f2)" = "$(realpath "$IMG")/rootfs/dev/pts"
check "a mount point with a space is named as it is" \
  bash -c 'printf "%s\n" "$@" | grep -qx ".*/rootfs/a dir"' _ "${found[@]}"

set +e; held=$(check_cache "$IMG"); rc=$?; set -e
check "a cache holding mounts is not trusted (status 1: build it again)" test "$rc" = 1
check "and its mounts are named" bash -c '[[ $1 == *rootfs/proc* && $1 == *rootfs/dev/pts* ]]' _ "$held"
check "nothing is left mounted under it" test -z "$(mounts_under "$IMG")"
check "the bind mount's source is untouched" test "$(cat "$S/host/marker")" = kept
check "the rootfs can now be removed on one file system" rm -rf --one-file-system "$IMG"

mkdir -p "$IMG/rootfs"
set +e; check_cache "$IMG" >/dev/null; rc=$?; set -e
check "a cache with no mount is trusted (status 0)" test "$rc" = 0

# A mount beside the image (its name a prefix of the image's, too) is not the image's.
mkdir -p "$S/other" "$S/image-x-other"
mount -t tmpfs none "$S/image-x-other"
mount -t tmpfs none "$S/other"
unmount_under "$IMG"
check "a mount outside the image is not touched" mountpoint -q "$S/other"
check "nor one whose name only begins with the image's" mountpoint -q "$S/image-x-other"
umount "$S/other" "$S/image-x-other"
exit "$fail"
