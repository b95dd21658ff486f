# Sourced by build-image.sh and run.sh: mounts left inside a tree. mmdebstrap mounts
# /proc, /sys and /dev in the rootfs while it runs, and one killed mid-way leaves them
# there; a cached image holding a mount cannot be linked (cp -al) or removed.

# Every mount point at or under DIR, deepest first.
mounts_under() {
  local dir
  dir=$(realpath -m "$1")
  awk -v p="$dir/" '{ m = $5; gsub(/\\040/, " ", m); if (index(m "/", p) == 1) print m }' /proc/self/mountinfo | sort -r
}

# Unmounts (lazily) everything at or under DIR; true when nothing is left.
unmount_under() {
  local m
  while IFS= read -r m; do
    [ -n "$m" ] && umount -l "$m" 2>/dev/null
  done < <(mounts_under "$1")
  [ -z "$(mounts_under "$1")" ]
}

# A cached image holding a mount is not trusted: linking it (cp -al) fails or links the
# host's files into the guest. Prints the mounts it held and unmounts them. Status 0: it
# held none; 1: it held some, now unmounted (build it again); 2: some are still mounted.
check_cache() {
  local held
  held=$(mounts_under "$1")
  [ -z "$held" ] && return 0
  printf '%s\n' "$held" | tr '\n' ' '
  unmount_under "$1" && return 1
  return 2
}
