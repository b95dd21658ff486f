#!/bin/bash
# Two builds of allot's daemon against one load, in one boot of the systemd VM: user A
# (allot-ta) in a login session with one hog against user B's (allot-tb) `allot run` job of
# 4 hogs, as sessions.sh's sessions_plan_counts_sessions sets it up, with two idle sessions
# each and an `allot run -t 300 -- sleep 3000` job of A's beside them (as allot.sh leaves
# them). Each build in turn (before, after, before, after) is installed as /usr/bin/allot
# and restarted; then for 10 s, quiet: A's share of the two users' CPU, the daemon's CPU
# and read calls; then 5 s under strace -c (its syscalls by kind); then 8 s with the
# daemon stopped (the baseline). Measures, checks nothing; prints one line per phase.
# Phases are the script's arguments (after `--` on run.sh's command line).
#   bash packaging/deb/build.sh --binary OLD/allot      # the "before" build, installed first
#   tests/vm/systemd/run.sh --timeout 2400 --file target/debian/allot_0.1.0-1_amd64.deb:/root/allot.deb \
#     --file OLD/allot:/root/allot-before --file target/release/allot:/root/allot-after \
#     --file /usr/bin/strace:/usr/local/bin/strace \
#     --file /lib/x86_64-linux-gnu/libunwind-ptrace.so.0:/usr/lib/x86_64-linux-gnu/ \
#     --file /lib/x86_64-linux-gnu/libunwind-x86_64.so.8:/usr/lib/x86_64-linux-gnu/ \
#     --file /lib/x86_64-linux-gnu/libunwind.so.8:/usr/lib/x86_64-linux-gnu/ \
#     --script tests/vm/systemd/pace-ab.sh
# (strace and its libraries from a Debian 12 host, as the guest is; without them the
# strace phase prints nothing.)
set -euo pipefail
. "$ALLOT_VM_LIB"
A=/usr/bin/allot
dpkg -i /root/allot.deb > /dev/null
$A fund allot-ta 100 > /dev/null
$A fund allot-tb 100 > /dev/null
login_session allot-ta sleep 3000 > /dev/null
login_session allot-tb sleep 3000 > /dev/null
login_session allot-ta sh -c "$A run -t 300 -- sleep 3000 & echo \$! > /tmp/sleeper.pid; wait" > /dev/null
rm -f /tmp/ahog.pid /tmp/bjob.pids
printf '#!/bin/sh\nfor i in 1 2 3 4; do sh -c '"'"'echo $$ >> /tmp/bjob.pids; while :; do :; done'"'"' & done\nwait\n' > /tmp/bjob.sh
chmod 0755 /tmp/bjob.sh
login_session allot-ta sh -c 'echo $$ > /tmp/ahog.pid; while :; do :; done' > /dev/null
login_session allot-tb sh -c "$A run -- /tmp/bjob.sh & wait" > /dev/null
wait_for -t 60 sh -c 'test -s /tmp/ahog.pid && [ "$(wc -l < /tmp/bjob.pids)" = 4 ]'
usec() { sed -n 's/^usage_usec //p' "/sys/fs/cgroup/user.slice/user-$1.slice/cpu.stat"; }
share() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (a + b) ? a / (a + b) : 0 }'; }
phase() {
  local build=$1 dpid a0 b0 a1 b1 d0 d1 r0 r1
  systemctl stop allot
  install -m 0755 "/root/allot-$build" $A
  systemctl start allot
  sleep 4
  dpid=$(systemctl show -p MainPID --value allot)
  d0=$(systemctl show -p CPUUsageNSec --value allot); r0=$(sed -n 's/^syscr: //p' "/proc/$dpid/io")
  a0=$(usec 2001); b0=$(usec 2002)
  sleep 10
  a1=$(usec 2001); b1=$(usec 2002)
  d1=$(systemctl show -p CPUUsageNSec --value allot); r1=$(sed -n 's/^syscr: //p' "/proc/$dpid/io")
  echo "pace-ab $build: running: A's share $(share $((a1 - a0)) $((b1 - b0))); daemon $(awk -v a="$d0" -v b="$d1" 'BEGIN { printf "%.3f", (b - a) / 1e9 / 10 }') CPU, $(( (r1 - r0) / 10 )) read calls/s"
  if command -v strace > /dev/null; then
    timeout -s INT 5 strace -c -S calls -f -p "$dpid" -o /tmp/strace.txt > /dev/null 2>&1 || true
    echo "pace-ab $build: strace 5 s: $(awk '$NF == "total" { print $4 }' /tmp/strace.txt) syscalls; by calls: $(awk 'NR > 2 && $1 ~ /^[0-9.]+$/ && $NF != "total" { print $NF "=" $4 }' /tmp/strace.txt | head -10 | tr '\n' ' ')"
    # The files it opens, by path (numbers as N), over 5 s.
    timeout -s INT 5 strace -f -e trace=openat -p "$dpid" -o /tmp/opens.txt > /dev/null 2>&1 || true
    echo "pace-ab $build: opens in 5 s by path: $(grep -o '"[^"]*"' /tmp/opens.txt | sed 's/[0-9]\{2,\}/N/g' | sort | uniq -c | sort -rn | head -14 | awk '{ print $2 "x" $1 }' | tr '\n' ' ')"
  fi
  systemctl stop allot
  sleep 2
  a0=$(usec 2001); b0=$(usec 2002); sleep 8; a1=$(usec 2001); b1=$(usec 2002)
  echo "pace-ab $build: stopped: A's share $(share $((a1 - a0)) $((b1 - b0)))"
  systemctl start allot
}
# ARGS: the phases in order (default: before after before after); `drop-sleeper` ends A's
# sleeping job (boosted while asleep, it is read every tick_ms between slow ticks).
[ $# -gt 0 ] || set -- before after before after
for b in "$@"; do
  case $b in
    drop-sleeper) kill "$(cat /tmp/sleeper.pid)"; sleep 4; echo "pace-ab: A's sleeping job ended" ;;
    *) phase "$b" ;;
  esac
done
_ps=$(cat /tmp/ahog.pid); kill "$_ps" 2> /dev/null || true
while read -r q; do kill "$q" 2> /dev/null || true; done < /tmp/bjob.pids
