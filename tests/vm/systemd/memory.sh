#!/bin/bash
# Memory by share on a systemd host (docs/memory.md): funding 300:100 of allot-ta (2001)
# and allot-tb (2002) becomes their slices' MemoryLow= 3:1, set through systemd;
# user.slice carries the sum; a hard memory cap of 64M! is the slice's MemoryMax=; a
# slice's MemoryHigh= is what the other leaves it, at least its MemoryLow=; a cap taken away by a reload goes back to infinity; a
# process in an over-share user's login session is ranked first for the OOM killer
# (oom_score_adj by share) and one of a user within their share is not. A job's own
# memory cap (allot run --mem): bad sizes and another user's set refused; a 64M! job's
# hog is killed inside its job while the user's other job holds 96 MiB untouched; set
# --mem soft and none; --oom-group: a job's hog over its cap takes the job's other
# process with it; a background job's cap, and the background slice's IOWeight=1.
# A stop and `allot daemon --release` take back what was sent: every cgroup's cpu,
# memory and io knobs byte-identical to before.
#   cargo build --release -p allot --bin allot
#   bash tests/vm/systemd/run.sh --allot target/release/allot --script tests/vm/systemd/memory.sh
set -euo pipefail
# shellcheck source=tests/vm/systemd/guest-lib.sh
. "$ALLOT_VM_LIB"
trap 'rc=$?; if [ $rc != 0 ]; then { echo "--- journal"; journalctl -b --no-pager -n 60 -u allot-mem -o short-monotonic; } >&2; fi' EXIT
prop() { systemctl show "$1" -p "$2" --value; }
echo "# $(systemctl --version | head -n1); $(grep MemTotal /proc/meminfo | tr -s ' ')"
echo "# cgroup2 mount options: $(awk '$5 == "/sys/fs/cgroup" { print $NF }' /proc/self/mountinfo)"
# Logins first (as allot.sh): the "before" snapshot sees the steady tree.
CGROUP_SNAPSHOT_FILES=(cgroup.subtree_control cpu.weight cpu.max cpu.idle memory.low memory.high memory.max io.weight)
EXCL=('user.slice/user-*.slice/session-*.scope' 'user.slice/user-*.slice/user@*.service' 'system.slice/allot-vm-test.service' 'system.slice/allot-mem.service')
pa0=$(login_session allot-ta sleep 1000)
pb0=$(login_session allot-tb sleep 1000)
cgroup_snapshot "${EXCL[@]}" > /tmp/before
cp /sys/fs/cgroup/cgroup.subtree_control /tmp/root-before
echo "# subtree_control: root $(cat /tmp/root-before); user-2001.slice $(cat /sys/fs/cgroup/user.slice/user-2001.slice/cgroup.subtree_control)"
# job_of USER ARGS...: `allot run ARGS` started from a login session of USER (its shell
# waits on it); prints the job's pid once it runs in allot's tree (allot run execs the
# command, so the pid is the command's).
job_of() {
  local u=$1 f pid; shift
  f=$(mktemp -u /tmp/job.XXXXXX)
  # shellcheck disable=SC2016
  login_session "$u" sh -c 'allot run "$@" & echo $! > '"$f"'; wait' sh "$@" > /dev/null
  wait_for -t 60 test -s "$f"; pid=$(cat "$f"); rm -f "$f"
  wait_for -t 60 sh -c "grep -q allot /proc/$pid/cgroup" || true
  echo "$pid"
}
# in_user USER WORDS...: WORDS run as USER's command line in a login session of theirs
# (su would take the command's own options, --mem, for its own).
in_user() { local u=$1; shift; XDG_SESSION_CLASS=user su -l "$u" -c "$*" < /dev/null; }
mkdir -p /etc/allot
printf '[funding]\nallot-ta = 300\nallot-tb = { funding = 100, mem = "64M!" }\n' > /etc/allot/allot.toml
allot config check >&2
systemd-run --unit=allot-mem /usr/local/bin/allot daemon
wait_for -t 60 allot status > /dev/null
tap=$(job_of allot-ta -- sleep 1000)
wait_for -t 30 sh -c 'allot show | grep -q PROTECTED' || true
login_session allot-tb sleep 1000 > /dev/null
wait_for -t 30 sh -c '[ "$(systemctl show user-2002.slice -p MemoryLow --value)" != 0 ]' || true
a=$(prop user-2001.slice MemoryLow); b=$(prop user-2002.slice MemoryLow); u=$(prop user.slice MemoryLow)
echo "# MemoryLow=: user-2001.slice $a, user-2002.slice $b, user.slice $u"
check "funding 300:100 protects 3:1 (the slices' MemoryLow=: $a, $b)" python3 -c "import sys; a, b = $a, $b; sys.exit(not (b > 0 and abs(a / b - 3) < 0.02))"
check "user.slice's MemoryLow= is their sum (within 1 MiB): $u" python3 -c "import sys; sys.exit(not abs($u - $a - $b) <= 1 << 20)"
# Read together, until they agree: the daemon may send the slice a new MemoryLow= between
# two reads (what the machine has room for moves it; CI, 2026-11-28, read the two apart).
check "the kernel's memory.low is the value systemd was given ($(cat /sys/fs/cgroup/user.slice/user-2001.slice/memory.low), MemoryLow= $(prop user-2001.slice MemoryLow))" wait_for -t 15 sh -c '[ "$(cat /sys/fs/cgroup/user.slice/user-2001.slice/memory.low)" = "$(systemctl show user-2001.slice -p MemoryLow --value)" ]'
check "a hard memory cap of 64M! is user-2002.slice's MemoryMax=" test "$(prop user-2002.slice MemoryMax)" = 67108864
h=$(prop user-2001.slice MemoryHigh)
check "allot-ta's MemoryHigh= is what allot-tb leaves it, at least its MemoryLow= ($h)" python3 -c "import sys; h = '$h'; sys.exit(not (h.isdigit() and int(h) >= $a))"
allot status 2>&1 | grep -i memory >&2 || true
allot show >&2 || true
check "show has the memory table" sh -c 'allot show | grep -q PROTECTED'
# The cap taken away (reload), then allot-tb's session takes 600 MiB, over its 444 MiB share.
printf '[funding]\nallot-ta = 300\nallot-tb = 100\n' > /etc/allot/allot.toml
systemctl kill -s HUP allot-mem
check "a cap taken away by a reload is MemoryMax=infinity again" wait_for -t 15 sh -c '[ "$(systemctl show user-2002.slice -p MemoryMax --value)" = infinity ]'
printf 'import time\nb = bytearray(600 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nopen("/tmp/hog.ok", "w").write("1")\ntime.sleep(1000)\n' > /tmp/hog.py
rm -f /tmp/hog.ok
hog=$(login_session allot-tb python3 /tmp/hog.py)
wait_for -t 60 test -s /tmp/hog.ok || true
check "allot-tb's session process, over its share, is ranked first: oom_score_adj > 0" wait_for -t 15 sh -c "[ \$(cat /proc/$hog/oom_score_adj) -gt 0 ]"
echo "# oom_score_adj: allot-tb's hog $(cat /proc/$hog/oom_score_adj), allot-ta's job $(cat /proc/$tap/oom_score_adj)"
allot show 2>&1 | sed -n '/^CURRENCY  MEMORY/,/^$/p' >&2 || true
check "allot-ta's process, within its share, is not raised" test "$(cat /proc/$tap/oom_score_adj)" -le 0
kill "$hog"

# ---- A job's own memory cap: the job's directory in allot's scope (Delegate=cpu memory).
out=$(in_user allot-ta allot run --mem lots -- touch /tmp/ran 2>&1 || true); echo "# $out" >&2
check "a size that is not a number is refused naming it, the command not run" sh -c "printf '%s' \"\$1\" | grep -qF 'memory cap \"lots\" is invalid' && test ! -e /tmp/ran" _ "$out"
out=$(in_user allot-ta allot run --mem 2000T! -- touch /tmp/ran 2>&1 || true); echo "# $out" >&2
check "a huge size (2000T!) is refused naming it and the bound" sh -c "printf '%s' \"\$1\" | grep -qF 'memory cap \"2000T!\" is invalid: more than 1 PiB' && test ! -e /tmp/ran" _ "$out"
# grow.py MIB FILE [GO]: writes 0 to FILE, waits for GO to exist, then takes MIB MiB in
# 8 MiB steps (each page touched), writing what it holds to FILE, and sleeps.
printf 'import os, sys, time\nn, f = int(sys.argv[1]), sys.argv[2]\nopen(f, "w").write("0")\nwhile len(sys.argv) > 3 and not os.path.exists(sys.argv[3]): time.sleep(0.1)\nkeep = []\nfor i in range(n // 8):\n    b = bytearray(8 << 20)\n    for j in range(0, len(b), 4096): b[j] = 1\n    keep.append(b)\n    open(f, "w").write(str((i + 1) * 8))\ntime.sleep(1000)\n' > /tmp/grow.py
rm -f /tmp/other.mib /tmp/capped.mib /tmp/capped.go
other=$(job_of allot-ta -- python3 /tmp/grow.py 96 /tmp/other.mib)
wait_for -t 120 sh -c '[ "$(cat /tmp/other.mib 2>/dev/null)" = 96 ]' || true
capped=$(job_of allot-ta --mem 64M! -- python3 /tmp/grow.py 200 /tmp/capped.mib /tmp/capped.go)
wait_for -t 60 test -s /tmp/capped.mib || true
CG=/sys/fs/cgroup
cj=$CG/$(cgroup_of "$capped"); oj=$CG/$(cgroup_of "$other")
echo "# capped job $capped in ${cj#$CG/}; other job $other in ${oj#$CG/}"
check "the capped job is in allot's scope of allot-ta" test "${cj#$CG/}" != "${cj#$CG/user.slice/user-2001.slice/allot:user-2001.scope/}"
check "allot's scope delegates memory (systemctl show: DelegateControllers=cpu memory)" test "$(prop allot:user-2001.scope DelegateControllers)" = "cpu memory"
check "the job's memory.max is 64M, memory.high max" test "$(cat "$cj/memory.max")/$(cat "$cj/memory.high")" = "67108864/max"
check "the user's other job has no limit" test "$(cat "$oj/memory.max")/$(cat "$oj/memory.high")" = "max/max"
check "the scope and the slice carry no limit of the job's (MemoryMax=infinity)" test "$(prop allot:user-2001.scope MemoryMax)/$(prop user-2001.slice MemoryMax)" = "infinity/infinity"
rc=0; out=$(in_user allot-tb allot set "$capped" --mem 1G! 2>&1) || rc=$?; echo "# $out" >&2
rc2=0; in_user allot-tb allot set "$capped" --mem none >&2 2>&1 || rc2=$?
check "allot-tb may not cap allot-ta's job nor take its cap (exit $rc, $rc2), and nothing changes" test "$rc" != 0 -a "$rc2" != 0 -a "$(cat "$cj/memory.max")" = 67108864
ooms=$(awk '/^oom_kill / { print $2 }' "$CG/user.slice/user-2001.slice/memory.events")
touch /tmp/capped.go
check "the capped job's hog (200 MiB asked) is killed" wait_for -t 120 sh -c "! kill -0 $capped 2>/dev/null"
echo "# the hog held $(cat /tmp/capped.mib) MiB when it was killed" >&2
dmesg | grep -E "oom-kill:.*pid=$capped," >&2 || true
check "by the OOM killer inside its job (oom_memcg is the job's directory)" sh -c "dmesg | grep -E 'oom-kill:.*oom_memcg=/${cj#$CG/},.*pid=$capped,' >/dev/null"
check "the slice counted the kill (memory.events oom_kill grew)" test "$(awk '/^oom_kill / { print $2 }' "$CG/user.slice/user-2001.slice/memory.events")" -gt "$ooms"
echo "# the other job holds $(cat /tmp/other.mib) MiB by its count; its memory.current $(cat "$oj/memory.current")" >&2
check "the user's other job runs on, holding its 96 MiB" sh -c "kill -0 $other && test \$(cat $oj/memory.current) -ge $((90 << 20))"
# A job that must die whole (--oom-group): its hog over the job's 64M! cap takes the
# job's other process (a sleep) with it; the user's other job is not touched.
rm -f /tmp/whole.mib /tmp/whole.go /tmp/whole.sib
# shellcheck disable=SC2016
whole=$(job_of allot-ta --mem 64M! --oom-group -- sh -c 'sleep 1000 & echo $! > /tmp/whole.sib; exec python3 /tmp/grow.py 200 /tmp/whole.mib /tmp/whole.go')
wait_for -t 60 test -s /tmp/whole.sib || true
sib=$(cat /tmp/whole.sib 2>/dev/null || echo 0)
wj=$CG/$(cgroup_of "$whole")
echo "# whole job $whole (its sleep $sib) in ${wj#$CG/}" >&2
check "--oom-group is the job's memory.oom.group (1), the other job's 0" test "$(cat "$wj/memory.oom.group")/$(cat "$oj/memory.oom.group")" = 1/0
check "the sleep is in the same job" test "$(cgroup_of "$sib")" = "${wj#$CG/}"
touch /tmp/whole.go
check "the whole job's hog over its cap is killed" wait_for -t 120 sh -c "! kill -0 $whole 2>/dev/null"
check "and its sleep with it: the whole job" wait_for -t 30 sh -c "! kill -0 $sib 2>/dev/null"
dmesg | grep -E "oom-kill|Memory cgroup out of memory|Tasks in .* are going to be killed" | tail -n 4 >&2 || true
check "the user's other job runs on" kill -0 "$other"
in_user allot-ta allot set "$other" --mem 200M >&2 || true
check "set --mem 200M: a soft cap is the job's memory.high" test "$(cat "$oj/memory.high")/$(cat "$oj/memory.max")" = "209715200/max"
in_user allot-ta allot set "$other" --mem none >&2 || true
check "set --mem none takes it away" test "$(cat "$oj/memory.high")/$(cat "$oj/memory.max")" = "max/max"
bgj=$(job_of allot-ta --background --mem 32M! -- sleep 1000)
bj=$CG/$(cgroup_of "$bgj")
echo "# background job $bgj in ${bj#$CG/}"
check "a background job's cap is its directory's memory.max" test "$(cat "$bj/memory.max")" = 33554432
check "the background slice weighs the least: IOWeight=1" wait_for -t 15 sh -c '[ "$(systemctl show allot_background.slice -p IOWeight --value)" = 1 ]'
echo "# io.weight of the background slice: $(cat $CG/allot_background.slice/io.weight 2>/dev/null || echo none)"

# ---- Stop, release, and nothing of allot's is left. The foreground jobs end first (a
# slice whose scope outlives the release keeps its CPUWeight=, docs/systemd.md); the
# background job runs on through the release.
kill "$tap" "$other" 2>/dev/null || true
wait_for -t 30 sh -c '! systemctl is-active --quiet allot:user-2001.scope' || true
systemctl stop allot-mem
check "a stop takes back MemoryLow=" test "$(prop user-2001.slice MemoryLow)/$(prop user-2002.slice MemoryLow)/$(prop user.slice MemoryLow)" = 0/0/0
check "and MemoryMax=" test "$(prop user-2002.slice MemoryMax)" = infinity
check "and the background slice's IOWeight=1 ($(prop allot_background.slice IOWeight))" test "$(prop allot_background.slice IOWeight)" != 1
/usr/local/bin/allot daemon --release >&2
check "--release takes a running job's cap back" test "$(cat "$bj/memory.max")" = max
kill "$bgj" 2>/dev/null || true
check "allot's scopes end with their jobs" wait_for -t 30 sh -c '! systemctl list-units --all --plain --no-legend "allot:*" | grep -q .'
# Not fixed yet (docs/systemd.md, "The background class"): the background slice outlives a
# background job that ran on through --release. Said, and stopped here, so the check
# below still sees everything else.
if systemctl list-units --all --plain --no-legend "allot_*" | grep -q .; then
  echo "# known gap: $(systemctl list-units --all --plain --no-legend "allot_*" | awk '{ print $1 }' | tr '\n' ' ')is left after --release and its last job; stopped by the test"
  systemctl stop allot_background.slice
fi
settled_snapshot /tmp/before /tmp/after 30 "${EXCL[@]}" || true
check "every cgroup's cpu, memory and io knobs are byte-identical" same /tmp/before /tmp/after
check "the root's subtree_control is byte-identical" same /tmp/root-before /sys/fs/cgroup/cgroup.subtree_control
kill "$pa0" "$pb0" 2>/dev/null || true
checks_done
