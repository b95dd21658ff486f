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
