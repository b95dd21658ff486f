#!/usr/bin/env bash
# Run allot (or a shell script) as the only program on a pure cgroup v2 kernel
# inside qemu (TCG), and exit with its exit code.
#
#   tests/vm/run.sh [options] [--allot PATH] -- ARGS...    runs: allot-lab ARGS... (the
#                                     lab passes product commands to allot), or allot ARGS...
#                                     when no allot-lab is beside PATH
#   tests/vm/run.sh [options] [--allot PATH] --shell 'SCRIPT' [-- ARGS...]
#                                     runs: sh SCRIPT ARGS... (busybox ash; allot at
#                                     /bin/allot too when --allot is given)
# Options:
#   --allot PATH     the allot binary to put at /bin/allot (and allot-lab beside it, when
#                    there, at /bin/allot-lab), with the shared libraries ldd
#                    names for it (default: target/release/allot when it exists;
#                    required unless --shell is given)
#   --shell SCRIPT   run this sh script instead of allot
#   --kernel K       bookworm (default: Debian 12's cloud kernel, 6.1) or sid (Debian
#                    unstable's cloud kernel, which has sched_ext; fetched with a private
#                    apt configuration: the host's sources are neither read nor changed)
#   --add PATH       also put this program at /bin/NAME, with its libraries (repeatable)
#   --env K=V        export K=V to the program (repeatable)
#   --timeout SECS   wall-clock limit for the whole VM run (default 1200, env ALLOT_VM_TIMEOUT)
#   --smp N          guest CPUs (default 2, env ALLOT_VM_SMP)
#   --mem MiB        guest memory (default 1024, env ALLOT_VM_MEM)
#   --log FILE       serial console log (default tests/vm/build/console.log)
#   --stdout FILE    the program's own stdout, byte-exact, without kernel or stderr
#                    lines (default tests/vm/build/stdout.txt)
#   -h, --help
#
# Exit status: the program's own exit status inside the VM, or 2 for bad usage, or,
# when the harness could not get a result (it never skips):
#   91 allot binary missing/unusable  92 host tools could not be installed
#   93 kernel could not be fetched    94 initramfs build failed   95 VM timed out
#   96 VM never reached /init         97 no exit marker (guest crashed/panicked)
#   98 guest setup (mounts, cgroup2 +cpu) failed
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD="$HERE/build"
MARK_EXIT="ALLOT-VM-EXIT="
MARK_BOOT="ALLOT-VM-BOOTED"
MARK_FAIL="ALLOT-VM-INIT-FAILED:"

say() { printf 'vm: %s\n' "$*" >&2; }
die_usage() { say "usage error: $*"; exit 2; }
# A harness that cannot run fails loudly (never a silent pass/skip).
die_harness() { local code=$1; shift; say "HARNESS FAILURE: $*"; exit "$code"; }

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

# ---------------------------------------------------------------- arguments
ALLOT=""
SHELL_SCRIPT=""
HAVE_SHELL=0
ENVS=()
ADDS=()
KERNEL=bookworm
TIMEOUT=${ALLOT_VM_TIMEOUT:-1200}
SMP=${ALLOT_VM_SMP:-2}
MEM=${ALLOT_VM_MEM:-1024}
LOG="$BUILD/console.log"
STDOUT_FILE="$BUILD/stdout.txt"
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --allot) [ $# -ge 2 ] || die_usage "--allot needs a path"; ALLOT=$2; shift 2 ;;
    --allot=*) ALLOT=${1#*=}; shift ;;
    --shell) [ $# -ge 2 ] || die_usage "--shell needs a script"; SHELL_SCRIPT=$2; HAVE_SHELL=1; shift 2 ;;
    --env) [ $# -ge 2 ] || die_usage "--env needs K=V"; ENVS+=("$2"); shift 2 ;;
    --add) [ $# -ge 2 ] || die_usage "--add needs a path"; ADDS+=("$2"); shift 2 ;;
    --kernel) [ $# -ge 2 ] || die_usage "--kernel needs bookworm or sid"; KERNEL=$2; shift 2 ;;
    --timeout) [ $# -ge 2 ] || die_usage "--timeout needs seconds"; TIMEOUT=$2; shift 2 ;;
    --smp) [ $# -ge 2 ] || die_usage "--smp needs a number"; SMP=$2; shift 2 ;;
    --mem) [ $# -ge 2 ] || die_usage "--mem needs MiB"; MEM=$2; shift 2 ;;
    --log) [ $# -ge 2 ] || die_usage "--log needs a file"; LOG=$2; shift 2 ;;
    --stdout) [ $# -ge 2 ] || die_usage "--stdout needs a file"; STDOUT_FILE=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; ARGS=("$@"); break ;;
    *) die_usage "unknown option '$1' (program arguments go after --)" ;;
  esac
done
for n in "$TIMEOUT" "$SMP" "$MEM"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die_usage "not a positive integer: '$n'"
done
case "$KERNEL" in bookworm|sid) ;; *) die_usage "--kernel must be bookworm or sid, got '$KERNEL'" ;; esac
for a in ${ADDS[@]+"${ADDS[@]}"}; do
  [ -f "$a" ] && [ -x "$a" ] || die_harness 91 "--add $a: missing or not executable"
done
for e in ${ENVS[@]+"${ENVS[@]}"}; do
  [[ $e =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die_usage "--env wants NAME=VALUE, got '$e'"
done
if [ -z "$ALLOT" ] && [ "$HAVE_SHELL" = 0 ] && [ -x "$REPO/target/release/allot" ]; then
  ALLOT="$REPO/target/release/allot"
fi
if [ "$HAVE_SHELL" = 0 ] && [ -z "$ALLOT" ]; then
  die_usage "give --allot PATH (no target/release/allot found) or --shell SCRIPT"
fi
if [ -n "$ALLOT" ]; then
  [ -f "$ALLOT" ] && [ -x "$ALLOT" ] || die_harness 91 "allot binary '$ALLOT' missing or not executable"
  ALLOT=$(cd "$(dirname "$ALLOT")" && pwd)/$(basename "$ALLOT")
fi

# ---------------------------------------------------------------- host tools
export DEBIAN_FRONTEND=noninteractive
APT_UPDATED=0
apt_update() {
  if [ "$APT_UPDATED" = 0 ]; then
    say "apt-get update"
    apt-get update -q >/dev/null || die_harness 92 "apt-get update failed"
    APT_UPDATED=1
  fi
}
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

need_pkgs=()
command -v qemu-system-x86_64 >/dev/null || need_pkgs+=(qemu-system-x86)
pkg_installed busybox-static || need_pkgs+=(busybox-static)
command -v cpio >/dev/null || need_pkgs+=(cpio)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die_harness 92 "missing ${need_pkgs[*]} and not root: apt-get install -y ${need_pkgs[*]}"
  apt_update
  say "installing ${need_pkgs[*]}"
  apt-get install -y -q --no-install-recommends "${need_pkgs[@]}" >/dev/null \
    || die_harness 92 "apt-get install ${need_pkgs[*]} failed"
fi
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || die_harness 92 "no $BUSYBOX after installing busybox-static"
if ldd "$BUSYBOX" >/dev/null 2>&1; then
  die_harness 92 "$BUSYBOX is dynamically linked (want busybox-static's)"
fi

# ---------------------------------------------------------------- kernel
# Debian's cloud kernel: cgroup v2 cpu controller, CFS bandwidth, serial console,
# devtmpfs and gzip initramfs are all built in, so no modules are needed.
mkdir -p "$BUILD"
KDIR="$BUILD/kernel"
# sid: CONFIG_SCHED_CLASS_EXT and BTF too; a private apt configuration under the fetch's
# temporary folder (as tests/vm/systemd/build-image.sh fetches bookworm-backports')
[ "$KERNEL" = sid ] && KDIR="$BUILD/kernel-sid"
VMLINUZ="$KDIR/vmlinuz"
fetch_kernel() {
  local tmp meta kpkg deb cfg vmlinuz
  tmp=$(mktemp -d "$BUILD/kfetch.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" RETURN
  local A=(-q -o APT::Sandbox::User=root) extra=()
  if [ "$KERNEL" = sid ]; then
    mkdir -p "$tmp/apt/lists/partial" "$tmp/apt/cache/archives/partial"
    echo "deb http://deb.debian.org/debian sid main" > "$tmp/apt/sources.list"
    A+=(-o "Dir::Etc::sourcelist=$tmp/apt/sources.list" -o "Dir::Etc::sourceparts=-"
        -o "Dir::State::Lists=$tmp/apt/lists" -o "Dir::Cache=$tmp/apt/cache")
    say "apt-get update (sid, private lists)"
    apt-get "${A[@]}" update >/dev/null || die_harness 93 "apt-get update of sid failed"
    extra=(CONFIG_SCHED_CLASS_EXT CONFIG_DEBUG_INFO_BTF CONFIG_BPF_SYSCALL CONFIG_BPF_JIT)
  else
    apt_update
  fi
  # the metapackage names the current versioned image package
  ( cd "$tmp" && apt-get "${A[@]}" download linux-image-cloud-amd64 ) >/dev/null \
    || die_harness 93 "apt-get download linux-image-cloud-amd64 failed"
  meta=$(ls "$tmp"/linux-image-cloud-amd64_*.deb)
  kpkg=$(dpkg-deb -f "$meta" Depends | tr ',' '\n' | sed -n 's/^ *\(linux-image-[0-9][^ ]*\).*/\1/p' | head -n1)
  [ -n "$kpkg" ] || die_harness 93 "cannot find the image package in $(basename "$meta")'s Depends"
  say "downloading $kpkg"
  ( cd "$tmp" && apt-get "${A[@]}" download "$kpkg" ) >/dev/null \
    || die_harness 93 "apt-get download $kpkg failed"
  deb=$(ls "$tmp"/"$kpkg"_*.deb)
  dpkg-deb -x "$deb" "$tmp/x" || die_harness 93 "cannot extract $deb"
  # sid splits the image package: the kernel is in linux-binary-VER and its config in
  # linux-base-VER, both under /usr/lib/modules/VER/ (bookworm: /boot/vmlinuz-VER)
  local part
  for part in $(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed -n 's/^ *\(linux-\(binary\|base\)-[0-9][^ ]*\).*/\1/p'); do
    say "downloading $part"
    ( cd "$tmp" && apt-get "${A[@]}" download "$part" ) >/dev/null || die_harness 93 "apt-get download $part failed"
    dpkg-deb -x "$(ls "$tmp"/"$part"_*.deb)" "$tmp/x" || die_harness 93 "cannot extract $part"
  done
  cfg=$(ls "$tmp"/x/boot/config-* "$tmp"/x/usr/lib/modules/*/config 2>/dev/null | head -n1)
  vmlinuz=$(ls "$tmp"/x/boot/vmlinuz-* "$tmp"/x/usr/lib/modules/*/vmlinuz 2>/dev/null | head -n1)
  [ -n "$cfg" ] && [ -n "$vmlinuz" ] || die_harness 93 "no kernel image or config in $kpkg or its parts"
  local opt
  for opt in CONFIG_CGROUPS CONFIG_CGROUP_SCHED CONFIG_FAIR_GROUP_SCHED CONFIG_CFS_BANDWIDTH \
             CONFIG_DEVTMPFS CONFIG_SERIAL_8250_CONSOLE CONFIG_BLK_DEV_INITRD CONFIG_RD_GZIP \
             ${extra[@]+"${extra[@]}"}; do
    grep -qx "$opt=y" "$cfg" || die_harness 93 "$kpkg lacks built-in $opt"
  done
  rm -rf "$KDIR.new"
  mkdir -p "$KDIR.new"
  cp "$vmlinuz" "$KDIR.new/vmlinuz"
  cp "$cfg" "$KDIR.new/config"
  echo "$kpkg $(dpkg-deb -f "$deb" Version)" > "$KDIR.new/version"
  rm -rf "$KDIR"
  mv "$KDIR.new" "$KDIR"
}
(
  flock 9
  if [ ! -s "$VMLINUZ" ]; then fetch_kernel; fi
) 9>"$BUILD/.kernel.lock" || exit $?
[ -s "$VMLINUZ" ] || die_harness 93 "no kernel at $VMLINUZ"
KVER=$(cat "$KDIR/version" 2>/dev/null || true)

# ---------------------------------------------------------------- initramfs
WORK=$(mktemp -d "$BUILD/run.XXXXXX")
QEMU_PID=""
READER_PID=""
cleanup() {
  # only ever the processes this script started: the timeout wrapping qemu
  # (it passes the signal on to qemu) and the log reader
  if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then
    kill "$QEMU_PID" 2>/dev/null || true
    wait "$QEMU_PID" 2>/dev/null || true
  fi
  if [ -n "$READER_PID" ] && kill -0 "$READER_PID" 2>/dev/null; then
    kill "$READER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM HUP

ROOT="$WORK/root"
mkdir -p "$ROOT"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,home/allot-ta,home/allot-tb,var/tmp,usr/bin,usr/sbin}
cp "$BUSYBOX" "$ROOT/bin/busybox"
for applet in $("$BUSYBOX" --list); do
  [ "$applet" = busybox ] || ln -sf busybox "$ROOT/bin/$applet"
done

# copy a file (following symlinks) to the same absolute path inside the root
copy_in() { mkdir -p "$ROOT$(dirname "$1")"; cp -L "$1" "$ROOT$1"; }
# a program at /bin/NAME, with every library ldd names for it
add_program() {
  local src=$1 name=$2 ldd_out f
  cp "$src" "$ROOT/bin/$name"
  chmod 0755 "$ROOT/bin/$name"
  if ldd_out=$(ldd "$src" 2>&1); then
    # every absolute path ldd reports: libraries and the dynamic loader
    for f in $(printf '%s\n' "$ldd_out" | grep -o '/[^ ]*' | sort -u); do
      [ -e "$f" ] || die_harness 91 "ldd names $f for $src but it does not exist"
      copy_in "$f"
    done
  elif printf '%s' "$ldd_out" | grep -q 'not a dynamic executable'; then
    :   # static binary: nothing to add
  else
    die_harness 91 "ldd $src failed: $ldd_out"
  fi
}
if [ -n "$ALLOT" ]; then add_program "$ALLOT" allot; fi
# the lab beside the product (target/release/allot-lab), when it is there
LAB=""
if [ -n "$ALLOT" ] && [ -x "$(dirname "$ALLOT")/allot-lab" ]; then
  LAB="$(dirname "$ALLOT")/allot-lab"
  add_program "$LAB" allot-lab
fi
for a in ${ADDS[@]+"${ADDS[@]}"}; do add_program "$a" "$(basename "$a")"; done

cat > "$ROOT/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
allot-ta:x:2001:2001:allot test user a:/home/allot-ta:/bin/sh
allot-tb:x:2002:2002:allot test user b:/home/allot-tb:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat > "$ROOT/etc/group" <<'EOF'
root:x:0:
allot-ta:x:2001:
allot-tb:x:2002:
nogroup:x:65534:
EOF
cat > "$ROOT/etc/shadow" <<'EOF'
root:*:19000:0:99999:7:::
allot-ta:*:19000:0:99999:7:::
allot-tb:*:19000:0:99999:7:::
nobody:*:19000:0:99999:7:::
EOF
chmod 0600 "$ROOT/etc/shadow"
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files\n' > "$ROOT/etc/nsswitch.conf"
printf '127.0.0.1 localhost allot-vm\n::1 localhost ip6-localhost\n' > "$ROOT/etc/hosts"
echo allot-vm > "$ROOT/etc/hostname"
chmod 1777 "$ROOT/tmp" "$ROOT/var/tmp"

# sh single-quoting of one word
shq() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }
{
  printf 'set --'
  for a in ${ARGS[@]+"${ARGS[@]}"}; do printf ' %s' "$(shq "$a")"; done
  printf '\n'
  case "$KERNEL" in bookworm|sid) ;; *) die_usage "--kernel must be bookworm or sid, got '$KERNEL'" ;; esac
for a in ${ADDS[@]+"${ADDS[@]}"}; do
  [ -f "$a" ] && [ -x "$a" ] || die_harness 91 "--add $a: missing or not executable"
done
for e in ${ENVS[@]+"${ENVS[@]}"}; do printf 'export %s=%s\n' "${e%%=*}" "$(shq "${e#*=}")"; done
} > "$ROOT/etc/allot-vm-args"
if [ "$HAVE_SHELL" = 1 ]; then
  printf '%s\n' "$SHELL_SCRIPT" > "$ROOT/etc/allot-vm-script"
  RUN_LINE='sh /etc/allot-vm-script "$@"'
elif [ -n "$LAB" ]; then
  RUN_LINE='/bin/allot-lab "$@"'
else
  RUN_LINE='/bin/allot "$@"'
fi

cat > "$ROOT/init" <<EOF
#!/bin/sh
# PID 1 of the allot test VM (generated by tests/vm/run.sh)
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root TERM=dumb LANG=C.UTF-8
export ALLOT_VM=1 RUST_BACKTRACE=1
fail() { echo "${MARK_FAIL} \$*"; sync; poweroff -f; echo o > /proc/sysrq-trigger; sleep 30; }
mount -t proc proc /proc || fail "mount proc"
mount -t sysfs sysfs /sys || fail "mount sysfs"
mount -t devtmpfs devtmpfs /dev || fail "mount devtmpfs"
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup || fail "mount cgroup2"
grep -qw cpu /sys/fs/cgroup/cgroup.controllers || fail "no cpu in cgroup.controllers"
echo +cpu > /sys/fs/cgroup/cgroup.subtree_control || fail "cannot enable +cpu"
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
hostname allot-vm
chown 2001:2001 /home/allot-ta; chown 2002:2002 /home/allot-tb
stty -F /dev/ttyS1 raw -echo 2>/dev/null
echo "${MARK_BOOT} uptime=\$(cut -d' ' -f1 /proc/uptime)s kernel=\$(uname -r) cpus=\$(nproc) cgroup2=\$(cat /sys/fs/cgroup/cgroup.subtree_control)"
cd /
. /etc/allot-vm-args
# stdout goes live to the console and byte-exact to the second serial port
out=/dev/ttyS1; [ -c \$out ] || out=/dev/null
mkfifo /run/allot-vm.out
tee \$out </run/allot-vm.out &
teepid=\$!
( ${RUN_LINE} ) </dev/null >/run/allot-vm.out
rc=\$?
# the program is done: end whatever it left running (it may hold the output pipe)
left=""
for d in /proc/[0-9]*; do
  p=\${d#/proc/}
  [ "\$p" = 1 ] || [ "\$p" = "\$teepid" ] && continue
  readlink \$d/exe >/dev/null 2>&1 || continue   # kernel threads and zombies
  left="\$left \$p:\$(cat \$d/comm 2>/dev/null)"
  kill -9 \$p 2>/dev/null
done
[ -n "\$left" ] && echo "allot-vm: killed processes left running:\$left"
wait \$teepid
sync
echo "${MARK_EXIT}\$rc"
poweroff -f
echo o > /proc/sysrq-trigger
sleep 30
EOF
chmod 0755 "$ROOT/init"

INITRD="$WORK/initrd.gz"
( cd "$ROOT" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc -R +0:+0 --quiet ) \
  | gzip -1 > "$INITRD" || die_harness 94 "building the initramfs failed"

# ---------------------------------------------------------------- boot
mkdir -p "$(dirname "$LOG")" "$(dirname "$STDOUT_FILE")"
: > "$LOG"; : > "$STDOUT_FILE"
# ALLOT_VM_TCG_THREAD=single: one host thread for all vCPUs. tests/vm/scx asks for it:
# under multi-threaded TCG the sid kernel twice died of an int3 Oops in hrtick while
# sched_ext was switched on or off (static keys patched across vCPUs).
ACCEL="tcg,thread=${ALLOT_VM_TCG_THREAD:-multi}"
[ "$SMP" = 1 ] && ACCEL="tcg"
say "kernel ${KVER:-?}; initrd $(du -h "$INITRD" | cut -f1); accel $ACCEL; smp $SMP; mem ${MEM}M; timeout ${TIMEOUT}s"
if [ "$HAVE_SHELL" = 1 ]; then say "running shell script${ALLOT:+ (with /bin/allot)}"; else say "running: allot ${ARGS[*]-}"; fi
say "console log: $LOG"

START=$(date +%s.%N)
FIFO="$WORK/console.fifo"
mkfifo "$FIFO"
# qemu (under timeout) runs in the background so that a signal to this script is
# handled at once; cleanup() then stops exactly that timeout process (and so qemu).
timeout -k 10 "$TIMEOUT" qemu-system-x86_64 \
    -accel "$ACCEL" -cpu max -smp "$SMP" -m "$MEM" \
    -nographic -no-reboot -nodefaults -display none -monitor none \
    -serial stdio -serial "file:$STDOUT_FILE" \
    -kernel "$VMLINUZ" -initrd "$INITRD" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 cgroup_no_v1=all mitigations=off rdinit=/init" \
    </dev/null >"$FIFO" 2>&1 &
QEMU_PID=$!
# strip CRs and SeaBIOS's terminal escapes; show live and keep a log
sed -u 's/\r//g; s/\x1bc//g; s/\x1b\[[0-9;?]*[A-Za-z]//g' <"$FIFO" | tee "$LOG" &
READER_PID=$!
set +e
wait "$QEMU_PID"; QRC=$?
QEMU_PID=""
wait "$READER_PID"
READER_PID=""
set -e
END=$(date +%s.%N)
WALL=$(awk -v a="$START" -v b="$END" 'BEGIN{printf "%.1f", b-a}')

if [ "$QRC" = 124 ] || [ "$QRC" = 137 ]; then
  die_harness 95 "VM timed out after ${TIMEOUT}s (log: $LOG)"
fi
if grep -aq "${MARK_FAIL}" "$LOG"; then
  die_harness 98 "VM setup failed: $(grep -a -o -m1 "${MARK_FAIL}.*" "$LOG") (log: $LOG)"
fi
if ! grep -aq "${MARK_BOOT}" "$LOG"; then
  die_harness 96 "VM never reached /init (qemu exit $QRC, ${WALL}s; log: $LOG)"
fi
code=$(grep -a -o "${MARK_EXIT}[0-9]\+" "$LOG" | tail -n1 | cut -d= -f2 || true)
if [ -z "$code" ]; then
  die_harness 97 "no ${MARK_EXIT} marker: the VM died or crashed mid-run (qemu exit $QRC, ${WALL}s; log: $LOG)"
fi
if [ "$QRC" != 0 ]; then
  say "note: qemu exited $QRC after the marker"
fi
sed -i 's/\r$//' "$STDOUT_FILE" 2>/dev/null || true
say "program exit $code; VM wall time ${WALL}s; stdout: $STDOUT_FILE"
exit "$code"
