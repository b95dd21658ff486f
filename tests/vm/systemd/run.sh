#!/usr/bin/env bash
# Boot a real systemd host (Debian bookworm, systemd as PID 1, logind, cgroup v2 only,
# kernel 6.12 from bookworm-backports) in qemu (TCG), run a bash script in it as root
# once the boot is complete, and exit with the script's exit status.
#
#   tests/vm/systemd/run.sh [options] --script FILE [-- ARGS...]
#
# Options:
#   --script FILE    bash script run as root inside the booted guest (required), with
#                    ARGS; it may `. "$ALLOT_VM_LIB"` (tests/vm/systemd/guest-lib.sh)
#   --allot PATH     install this binary at /usr/local/bin/allot, plus the shared
#                    libraries ldd names for it that the guest lacks
#   --file SRC:DST   copy host file or directory SRC to the absolute guest path DST
#                    before boot (repeatable; split at the first ':'). A directory's
#                    contents are merged into DST; a file goes to DST, or into DST
#                    when DST ends in '/' or is a directory. Copies are owned by root.
#   --deb FILE       dpkg -i FILE inside the guest after boot, before the script
#                    (repeatable; all in one dpkg call, in the order given)
#   --env K=V        export K=V to the script (repeatable)
#   --timeout SECS   wall-clock limit for the VM run (default 900, env ALLOT_VM_TIMEOUT)
#   --cgroup MODE    the guest's cgroup layout: v2 (default: unified only), hybrid
#                    (systemd.unified_cgroup_hierarchy=0: v1 controllers, systemd's
#                    unified tree beside them, as Ubuntu 20.04) or v1 (legacy only, the
#                    RHEL 8 default: also systemd.legacy_systemd_cgroup_controller=1)
#   --suite NAME     the guest's Debian release: bookworm (default: systemd 252) or
#                    bullseye (Debian 11: systemd 247, glibc 2.31); the kernel is the same
#   --smp N          guest CPUs (default 2, env ALLOT_VM_SMP)
#   --mem MiB        guest memory (default 2048, env ALLOT_VM_MEM)
#   --log FILE       serial console log (default tests/vm/build/systemd/console.log)
#   --stdout FILE    the script's stdout, byte-exact, nothing else
#                    (default tests/vm/build/systemd/stdout.txt)
#   --quiet          do not show the console live (it is still logged)
#   --rebuild        build the image again even if the cached one is current
#   --keep           keep the run's folder (root tree and disk image) for inspection
#   -h, --help
#
# Exit status: the script's own exit status, or 2 for bad usage, or, when the harness
# could not get a result (it never skips):
#   91 --allot binary missing/unusable   92 host tools could not be installed
#   93 kernel could not be fetched        94 image (rootfs or disk) build failed
#   95 VM timed out                       96 the VM never booted to the test script
#   97 no exit marker (guest crashed)     98 guest setup (dpkg -i of a --deb) failed
#   99 the script's stdout did not come back intact
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=$(cd "$HERE/.." && pwd)/build/systemd
MARK_BOOTED="ALLOT-VM-BOOTED"
MARK_EXIT="ALLOT-VM-EXIT="
MARK_SETUP="ALLOT-VM-SETUP-FAILED:"
MARK_BOOTFAIL="ALLOT-VM-BOOT-FAILED:"

say() { printf 'vm-systemd: %s\n' "$*" >&2; }
die_usage() { say "usage error: $*"; exit 2; }
LOG=""
die_harness() {
  local code=$1; shift
  if [ "${QUIET:-0}" = 1 ] && [ -n "$LOG" ] && [ -s "$LOG" ]; then
    say "last lines of the console log:"; tail -n 40 "$LOG" >&2
  fi
  say "HARNESS FAILURE: $*"
  exit "$code"
}
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

# ---------------------------------------------------------------- arguments
SCRIPT=""; ALLOT=""; FILES=(); DEBS=(); ENVS=(); ARGS=()
TIMEOUT=${ALLOT_VM_TIMEOUT:-900}
SMP=${ALLOT_VM_SMP:-2}
MEM=${ALLOT_VM_MEM:-2048}
LOG="$BUILD/console.log"
STDOUT_FILE="$BUILD/stdout.txt"
QUIET=0; REBUILD=0; KEEP=0; CGROUP=v2; SUITE=bookworm
need() { [ "$1" -ge 2 ] || die_usage "$2 needs a value"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --script)  need $# "$1"; SCRIPT=$2; shift 2 ;;
    --allot)   need $# "$1"; ALLOT=$2; shift 2 ;;
    --file)    need $# "$1"; FILES+=("$2"); shift 2 ;;
    --deb)     need $# "$1"; DEBS+=("$2"); shift 2 ;;
    --env)     need $# "$1"; ENVS+=("$2"); shift 2 ;;
    --timeout) need $# "$1"; TIMEOUT=$2; shift 2 ;;
    --smp)     need $# "$1"; SMP=$2; shift 2 ;;
    --cgroup)  need $# "$1"; CGROUP=$2; shift 2 ;;
    --suite)   need $# "$1"; SUITE=$2; shift 2 ;;
    --mem)     need $# "$1"; MEM=$2; shift 2 ;;
    --log)     need $# "$1"; LOG=$2; shift 2 ;;
    --stdout)  need $# "$1"; STDOUT_FILE=$2; shift 2 ;;
    --quiet)   QUIET=1; shift ;;
    --rebuild) REBUILD=1; shift ;;
    --keep)    KEEP=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; ARGS=("$@"); break ;;
    *) die_usage "unknown option '$1' (script arguments go after --; see --help)" ;;
  esac
done
[ -n "$SCRIPT" ] || die_usage "--script FILE is required"
case $CGROUP in v2|hybrid|v1) ;; *) die_usage "--cgroup '$CGROUP': use v2, hybrid or v1" ;; esac
case $SUITE in bookworm|bullseye) ;; *) die_usage "--suite '$SUITE': use bookworm or bullseye" ;; esac
[ -f "$SCRIPT" ] && [ -r "$SCRIPT" ] || die_usage "--script '$SCRIPT' is not a readable file"
for n in "$TIMEOUT" "$SMP" "$MEM"; do
  [[ $n =~ ^[1-9][0-9]{0,6}$ ]] || die_usage "not a positive integer: '$n'"
done
[ "$MEM" -ge 512 ] || die_usage "--mem $MEM is too small for systemd (at least 512)"
[ "$SMP" -le 64 ] || die_usage "--smp $SMP is more than 64"
for e in ${ENVS[@]+"${ENVS[@]}"}; do
  [[ $e =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die_usage "--env wants NAME=VALUE, got '$e'"
done
for f in ${FILES[@]+"${FILES[@]}"}; do
  [[ $f == *:* ]] || die_usage "--file wants SRC:DST, got '$f'"
  src=${f%%:*}; dst=${f#*:}
  [ -n "$src" ] && [ -e "$src" ] || die_usage "--file '$f': source '$src' does not exist"
  [[ $dst == /* ]] || die_usage "--file '$f': destination '$dst' must be an absolute guest path"
  [[ /$dst/ != */../* ]] || die_usage "--file '$f': destination '$dst' must not contain '..'"
done
for d in ${DEBS[@]+"${DEBS[@]}"}; do
  [ -f "$d" ] || die_usage "--deb '$d' is not a file"
  dpkg-deb --info "$d" >/dev/null 2>&1 || die_usage "--deb '$d' is not a Debian package (dpkg-deb --info fails)"
done
if [ -n "$ALLOT" ]; then
  [ -f "$ALLOT" ] && [ -x "$ALLOT" ] || die_harness 91 "--allot '$ALLOT' missing or not executable"
fi
[ "$(id -u)" = 0 ] || die_harness 92 "needs root (the image build uses mmdebstrap and chroot; the root tree is root-owned)"

# ---------------------------------------------------------------- host tools
export DEBIAN_FRONTEND=noninteractive
need_pkgs=()
command -v qemu-system-x86_64 >/dev/null || need_pkgs+=(qemu-system-x86)
command -v mke2fs >/dev/null || need_pkgs+=(e2fsprogs)
command -v mmdebstrap >/dev/null || need_pkgs+=(mmdebstrap)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  say "installing ${need_pkgs[*]}"
  { apt-get update -q && apt-get install -y -q --no-install-recommends "${need_pkgs[@]}"; } >/dev/null \
    || die_harness 92 "apt-get install ${need_pkgs[*]} failed"
fi

# ---------------------------------------------------------------- image (cached)
mkdir -p "$BUILD"
# one cached image per suite: bookworm's keyed on the build script alone, as always
if [ "$SUITE" = bookworm ]; then
  KEY=$(sha256sum < "$HERE/build-image.sh" | cut -c1-16)
else
  KEY=$SUITE-$({ cat "$HERE/build-image.sh"; echo "$SUITE"; } | sha256sum | cut -c1-16)
fi
IMG="$BUILD/image-$KEY"
exec 9>"$BUILD/.image.lock"
flock 9
# shellcheck source=tests/vm/systemd/mounts.sh
. "$HERE/mounts.sh"
# a cache holding a mount (the host's /proc, say) is not trusted: it is built again
# (tests/vm/systemd/mounts-check.sh tests this without a VM)
if [ -d "$IMG" ]; then
  set +e; held=$(check_cache "$IMG"); crc=$?; set -e
  case $crc in
    0) ;;
    1) say "the cached image $IMG held mounts ($held): unmounted them; building it again"; REBUILD=1 ;;
    *) die_harness 94 "cannot unmount what is mounted under $IMG: $(mounts_under "$IMG" | tr '\n' ' ')" ;;
  esac
fi
if [ "$REBUILD" = 1 ] || [ ! -s "$IMG/vmlinuz" ] || [ ! -d "$IMG/rootfs" ]; then
  say "building the guest image $IMG (kernel + rootfs; about a minute)"
  set +e; bash "$HERE/build-image.sh" "$IMG" "$SUITE"; brc=$?; set -e
  case $brc in
    0) ;;
    92|93|94) die_harness $brc "image build failed (log: $IMG.failed.log)" ;;
    *) die_harness 94 "image build failed (exit $brc)" ;;
  esac
  for old in "$BUILD"/image-*; do   # images (and logs) of older build scripts, this suite's
    case ${old#"$BUILD"/image-} in bullseye-*) osuite=bullseye ;; *) osuite=bookworm ;; esac
    [ "$old" = "$IMG" ] || [ "$osuite" != "$SUITE" ] || rm -rf --one-file-system "$old"
  done
else
  say "cached image $IMG ($(cut -d' ' -f1,2 "$IMG/kernel-version"))"
fi
flock -s 9   # shared while this run copies from the image: no rebuild under our feet

# ---------------------------------------------------------------- this run's disk
WORK=$(mktemp -d "$BUILD/run.XXXXXX")
QEMU_PID=""; READER_PID=""
cleanup() {
  # only the processes this script started: timeout (it passes the signal to qemu)
  # and the console reader
  if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then
    kill "$QEMU_PID" 2>/dev/null || true; wait "$QEMU_PID" 2>/dev/null || true
  fi
  if [ -n "$READER_PID" ] && kill -0 "$READER_PID" 2>/dev/null; then
    kill "$READER_PID" 2>/dev/null || true
  fi
  if [ "$KEEP" = 1 ]; then say "kept $WORK"; else rm -rf --one-file-system "$WORK"; fi
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM HUP

T_PREP=$(date +%s.%N)
ROOT="$WORK/root"
# hard links: fast, and the cached tree is never written through (guest_put unlinks first)
cp -al "$IMG/rootfs" "$ROOT" || die_harness 94 "cannot link the root tree into $WORK"
flock -u 9

# put host SRC at guest path DST: fresh root-owned copies, never through a hard link
guest_put() {
  local src=$1 dst=$2 g
  if [[ $dst == */ ]] || [ -d "$ROOT$dst" ] && [ ! -d "$src" ]; then dst=${dst%/}/$(basename "$src"); fi
  g=$ROOT$dst
  mkdir -p "$(dirname "$g")"
  if [ -d "$src" ]; then
    [ ! -e "$g" ] || [ -d "$g" ] || rm -f "$g"
    mkdir -p "$g"
    cp -R -P --preserve=mode,timestamps --no-preserve=ownership --remove-destination "$src/." "$g/"
  else
    [ ! -d "$g" ] || rm -rf "$g"
    rm -f "$g"
    cp -L --preserve=mode,timestamps --no-preserve=ownership "$src" "$g"
  fi
}

if [ -n "$ALLOT" ]; then
  if ldd_out=$(ldd "$ALLOT" 2>&1); then
    for f in $(printf '%s\n' "$ldd_out" | grep -o '/[^ ]*' | sort -u); do
      [ -e "$f" ] || die_harness 91 "ldd names $f for $ALLOT but it does not exist"
      [ -e "$ROOT$f" ] || { say "adding $f (ldd of allot; not in the guest)"; guest_put "$f" "$f"; }
    done
  elif ! printf '%s' "$ldd_out" | grep -q 'not a dynamic executable'; then
    die_harness 91 "ldd $ALLOT failed: $ldd_out"
  fi
  guest_put "$ALLOT" /usr/local/bin/allot
  chmod 0755 "$ROOT/usr/local/bin/allot"
fi
for f in ${FILES[@]+"${FILES[@]}"}; do guest_put "${f%%:*}" "${f#*:}"; done
i=0
: > "$WORK/debs.list"
for d in ${DEBS[@]+"${DEBS[@]}"}; do
  i=$((i + 1)); g=/var/lib/allot-vm/debs/$(printf '%02d' $i)-$(basename "$d")
  guest_put "$d" "$g"; echo "$g" >> "$WORK/debs.list"
done
# the harness's own files last, so a --file cannot replace them
{ printf 'set --'; for a in ${ARGS[@]+"${ARGS[@]}"}; do printf ' %q' "$a"; done; echo; } > "$WORK/args"
{ for e in ${ENVS[@]+"${ENVS[@]}"}; do printf 'export %s=%q\n' "${e%%=*}" "${e#*=}"; done; } > "$WORK/env"
guest_put "$SCRIPT" /etc/allot-vm/script
guest_put "$WORK/args" /etc/allot-vm/args
guest_put "$WORK/env" /etc/allot-vm/env
guest_put "$WORK/debs.list" /etc/allot-vm/debs.list
guest_put "$HERE/guest-runner.sh" /usr/local/lib/allot-vm/runner
guest_put "$HERE/guest-lib.sh" /usr/local/lib/allot-vm/guest-lib.sh
guest_put "$HERE/iolab.py" /usr/local/lib/allot-vm/iolab.py
guest_put "$HERE/allot-vm-test.service" /etc/systemd/system/allot-vm-test.service
chmod 0755 "$ROOT/usr/local/lib/allot-vm/runner"
mkdir -p "$ROOT/etc/systemd/system/multi-user.target.wants"
ln -sfn ../allot-vm-test.service "$ROOT/etc/systemd/system/multi-user.target.wants/allot-vm-test.service"

DISK="$WORK/root.img"
SIZE=$(( $(du -sm "$ROOT" | cut -f1) + 1024 ))
mke2fs -q -F -t ext4 -L allot-root -E lazy_itable_init=0,lazy_journal_init=0 -d "$ROOT" "$DISK" "${SIZE}M" >/dev/null \
  || die_harness 94 "mke2fs -d of the root tree failed"
[ "$KEEP" = 1 ] || rm -rf --one-file-system "$ROOT"
PREP=$(awk -v a="$T_PREP" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')

# ---------------------------------------------------------------- boot
mkdir -p "$(dirname "$LOG")" "$(dirname "$STDOUT_FILE")"
: > "$LOG"
RAW_OUT="$WORK/stdout.raw"   # ttyS1: the script's stdout, byte-exact
CTL="$WORK/control.txt"      # ttyS2: the markers, away from console noise
: > "$RAW_OUT"; : > "$CTL"
ACCEL="tcg,thread=multi"
[ "$SMP" = 1 ] && ACCEL="tcg"
# cx16=off: qemu 7.2's TCG corrupts the 6.12 kernel's SLUB (cmpxchg16b on a %gs
# address), which panics the guest within seconds; without CX16 the kernel takes its
# fallback path.
CPU="max,cx16=off"
APPEND="console=ttyS0 root=/dev/nvme0n1 rw rootfstype=ext4 quiet loglevel=3 panic=-1"
case $CGROUP in
  v2) APPEND+=" cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1" ;;
  hybrid) APPEND+=" systemd.unified_cgroup_hierarchy=0" ;;
  v1) APPEND+=" systemd.unified_cgroup_hierarchy=0 systemd.legacy_systemd_cgroup_controller=1" ;;
esac
APPEND+=" mitigations=off systemd.show_status=error"
say "kernel $(cut -d' ' -f1,2 "$IMG/kernel-version"); disk ${SIZE}M (prepared in ${PREP}s); accel $ACCEL; smp $SMP; mem ${MEM}M; timeout ${TIMEOUT}s"
say "script $SCRIPT${ARGS[*]+ ${ARGS[*]}}; cgroup $CGROUP; console log $LOG"

START=$(date +%s.%N)
FIFO="$WORK/console.fifo"
mkfifo "$FIFO"
timeout -k 10 "$TIMEOUT" qemu-system-x86_64 \
    -accel "$ACCEL" -cpu "$CPU" -smp "$SMP" -m "$MEM" \
    -nographic -no-reboot -nodefaults -display none -monitor none \
    -serial stdio -serial "file:$RAW_OUT" -serial "file:$CTL" \
    -drive "file=$DISK,format=raw,if=none,id=root,cache=unsafe" -device nvme,drive=root,serial=allot-root \
    -kernel "$IMG/vmlinuz" -append "$APPEND" \
    </dev/null >"$FIFO" 2>&1 &
QEMU_PID=$!
# strip CRs and terminal escapes; show live (unless --quiet) and keep a log
if [ "$QUIET" = 1 ]; then
  sed -u 's/\r//g; s/\x1bc//g; s/\x1b\[[0-9;?]*[A-Za-z]//g' <"$FIFO" > "$LOG" &
else
  sed -u 's/\r//g; s/\x1bc//g; s/\x1b\[[0-9;?]*[A-Za-z]//g' <"$FIFO" | tee "$LOG" &
fi
READER_PID=$!
set +e
wait "$QEMU_PID"; QRC=$?
QEMU_PID=""
wait "$READER_PID"
READER_PID=""
set -e
WALL=$(awk -v a="$START" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
cp "$RAW_OUT" "$STDOUT_FILE"
sed -i 's/\r$//' "$CTL"

exit_line=$(grep -a -x "${MARK_EXIT}[0-9]\+ bytes=[0-9]\+ sha256=[0-9a-f]\{64\}" "$CTL" | tail -n1 || true)
if [ -z "$exit_line" ]; then
  if grep -aq "^$MARK_BOOTFAIL" "$CTL"; then
    die_harness 96 "the guest fell into emergency/rescue mode: $(grep -a -m1 "^${MARK_BOOTFAIL}" "$CTL") (log: $LOG)"
  fi
  if grep -aq "^$MARK_SETUP" "$CTL"; then
    die_harness 98 "guest setup failed: $(grep -a -m1 "^${MARK_SETUP}" "$CTL") (log: $LOG)"
  fi
  if [ "$QRC" = 124 ] || [ "$QRC" = 137 ]; then
    die_harness 95 "VM timed out after ${TIMEOUT}s$(grep -aq "^$MARK_BOOTED" "$CTL" || echo ' before the script started') (log: $LOG)"
  fi
  if ! grep -aq "^$MARK_BOOTED" "$CTL"; then
    die_harness 96 "the VM never booted to the test script (qemu exit $QRC, ${WALL}s; log: $LOG)"
  fi
  die_harness 97 "no ${MARK_EXIT} marker: the guest crashed or powered off mid-script (qemu exit $QRC, ${WALL}s; log: $LOG)"
fi
read -r code bytes sum < <(sed 's/^[^=]*=\([0-9]*\) bytes=\([0-9]*\) sha256=\(.*\)$/\1 \2 \3/' <<<"$exit_line")
got_bytes=$(stat -c %s "$STDOUT_FILE")
got_sum=$(sha256sum < "$STDOUT_FILE" | cut -d' ' -f1)
if [ "$got_bytes" != "$bytes" ] || [ "$got_sum" != "$sum" ]; then
  die_harness 99 "the script's stdout came back as $got_bytes bytes (sha256 $got_sum), the guest sent $bytes ($sum)"
fi
booted=$(grep -a -o -m1 "^${MARK_BOOTED} uptime=[0-9.]*" "$CTL" | sed 's/.*=//')
[ "$QRC" = 0 ] || say "note: qemu exited $QRC after the exit marker"
if [ "$code" -ge 91 ] && [ "$code" -le 99 ]; then
  say "note: exit $code is the SCRIPT's own status (not a harness failure), but it is in the harness's range 91..99"
fi
say "script exit $code; boot to script ${booted}s (guest uptime); VM wall ${WALL}s; stdout $STDOUT_FILE ($bytes bytes)"
# A failed script names its failures where CI shows them: the stdout file stays in the
# build folder of a clone CI deletes, so the lines guest-lib's check marked FAIL, else the
# script's last lines, go to stderr.
if [ "$code" != 0 ]; then
  # other load on the host slows the guest: said beside the failures
  say "the host's load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  if grep -aq '^FAIL ' "$STDOUT_FILE"; then
    say "the script's failed checks (and what differed):"; grep -a -e '^FAIL ' -e '^diff| ' "$STDOUT_FILE" | head -n 80 >&2
  else
    say "the script's last lines of stdout:"; tail -n 20 "$STDOUT_FILE" >&2
  fi
fi
exit "$code"
