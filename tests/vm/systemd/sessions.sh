# Login-session processes meet allot's policy in place, sourced by
# allot.sh while the daemon runs; uses its $A, check, wait_for and login_session. allot-ta
# (uid 2001) and allot-tb (2002) are logged in; both funded 100 here, so their slices
# weigh alike. Each check measures from /proc/PID/stat or the slices' cpu.stat.

# CPU seconds (utime + stime) of a pid.
_cpu_of() { awk '{ sub(/.*\) /, ""); print ($12 + $13) / 100 }' "/proc/$1/stat"; }
# Clock ticks (utime + stime) of pids together.
_ticks_of() { local p t=0; for p in "$@"; do t=$((t + $(awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2> /dev/null || echo 0))); done; echo "$t"; }
# VAR PID: the CPU a pid last ran on (field 39 of its stat) into VAR, with builtins only.
_psr_v() { local l; { read -r l < "/proc/$2/stat"; } 2> /dev/null || { printf -v "$1" '-'; return; }; set -- "$1" ${l##*) }; printf -v "$1" '%s' "${38}"; }
# A slice's usage_usec.
_slice_usec() { sed -n 's/^usage_usec //p' "/sys/fs/cgroup/user.slice/user-$1.slice/cpu.stat"; }
# VAR FILE: the usage_usec of a cpu.stat FILE into VAR (0 if none), with builtins only.
_usec_v() { local k v; printf -v "$1" 0; { while read -r k v; do if [ "$k" = usage_usec ]; then printf -v "$1" '%s' "$v"; break; fi; done < "$2"; } 2> /dev/null || true; }
# USEC SECS: CPUs used.
_per_s() { awk -v u="$1" -v s="$2" 'BEGIN { printf "%.3f", u / 1e6 / s }'; }
_kill_pidfiles() { for f in "$@"; do [ -s "$f" ] && kill "$(cat "$f")" 2> /dev/null || true; done; }

# A rule `background = true` matching a session process: SCHED_IDLE in its session scope;
# <= 5% of a CPU against a hog of its own session, and the whole CPU once it is idle.
# SCHED_IDLE is a per-task policy: it yields to tasks of the same cgroup only, so against
# another user's hog (another slice, weighed by systemd at the slice's weight) it is
# measured and reported, not checked (docs/systemd.md#login-sessions).
sessions_background_rule() {
  mkdir -p /etc/allot
  printf '[[rules]]\nname = "sess-bg"\ncomm = "bghog"\nbackground = true\n' > /etc/allot/allot.toml
  systemctl reload allot
  printf '#!/bin/sh\necho $$ > /tmp/bghog.pid\nwhile :; do :; done\n' > /tmp/bghog
  chmod 0755 /tmp/bghog; rm -f /tmp/bghog.pid /tmp/ahog2.pid /tmp/bhog.pid
  login_session allot-ta sh -c 'taskset -c 1 /tmp/bghog & taskset -c 1 sh -c "echo \$\$ > /tmp/ahog2.pid; while :; do :; done" & wait' > /dev/null || true
  wait_for -t 30 sh -c 'test -s /tmp/bghog.pid && test -s /tmp/ahog2.pid' || true
  local p; p=$(cat /tmp/bghog.pid 2> /dev/null || echo 0)
  check "a background rule makes a session process SCHED_IDLE" wait_for -t 10 sh -c "chrt -p $p | grep -q SCHED_IDLE"
  check "and it stays in its session scope" sh -c "grep -q '^0::/user.slice/user-2001.slice/session-.*\.scope\$' /proc/$p/cgroup"
  sleep 2
  local c0 c1 own other idle
  c0=$(_cpu_of "$p"); sleep 6; c1=$(_cpu_of "$p")
  own=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.3f", (b - a) / 6 }')
  echo "a session process under a background rule against a hog of its own session on one CPU: $own CPU" >&2
  check "it keeps <= 5% against a hog of its own session: $own" awk -v s="$own" 'BEGIN { exit !(s <= 0.05) }'
  _kill_pidfiles /tmp/ahog2.pid
  login_session allot-tb taskset -c 1 sh -c 'echo $$ > /tmp/bhog.pid; while :; do :; done' > /dev/null || true
  wait_for -t 30 test -s /tmp/bhog.pid || true
  sleep 2
  c0=$(_cpu_of "$p"); sleep 6; c1=$(_cpu_of "$p")
  other=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.3f", (b - a) / 6 }')
  echo "the same process against allot-tb's hog (another slice) on that CPU: $other CPU (measured, not checked)" >&2
  _kill_pidfiles /tmp/bhog.pid
  sleep 1
  c0=$(_cpu_of "$p"); sleep 4; c1=$(_cpu_of "$p")
  idle=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.3f", (b - a) / 4 }')
  echo "the same process with the CPU idle: $idle CPU" >&2
  check "it runs when the CPU is idle (>= 0.8 CPU): $idle" awk -v s="$idle" 'BEGIN { exit !(s >= 0.8) }'
  rm /etc/allot/allot.toml
  systemctl reload allot
  check "with the rule gone (reload) it is SCHED_OTHER again" wait_for -t 10 sh -c "chrt -p $p | grep -q SCHED_OTHER"
  _kill_pidfiles /tmp/bghog.pid
}

# `[sessions] background = "job"`: the rule's session process is moved through systemd
# into a background job of allot's (allot_background.slice, CPUWeight=idle) tied to its
# session, so it yields to another user's hog (<= 5%), runs when the CPU is idle, and ends
# when logind stops its session (`loginctl terminate-session`).
sessions_background_job() {
  mkdir -p /etc/allot
  printf '[sessions]\nbackground = "job"\n[[rules]]\nname = "sess-bg"\ncomm = "bghog"\nbackground = true\n' > /etc/allot/allot.toml
  systemctl reload allot
  rm -f /tmp/bghog.pid /tmp/bhog.pid
  local spid sid p leaf
  spid=$(login_session allot-ta sh -c 'taskset -c 1 /tmp/bghog & wait') || true
  sid=$(session_of "${spid:-0}" 2> /dev/null || echo none)
  wait_for -t 30 test -s /tmp/bghog.pid || true
  p=$(cat /tmp/bghog.pid 2> /dev/null || echo 0)
  check "a background rule under sessions.background = \"job\" moves the session process into allot's background slice" \
    wait_for -t 10 sh -c "grep -q '^0::/allot_background.slice/allot:background.scope/user-2001/j[0-9]*-u2001\$' /proc/$p/cgroup"
  sed -n 1p "/proc/$p/cgroup" >&2 || true
  leaf=$(sed -n 's#^0::.*/##p' "/proc/$p/cgroup" 2> /dev/null) || true
  systemctl show -p PartOf,ActiveState "allot_logout_$leaf.scope" >&2 || true
  check "its job is tied to session $sid (PartOf=)" sh -c "systemctl show -p PartOf allot_logout_$leaf.scope | grep -qx 'PartOf=session-$sid.scope'"
  check "its session's shell stays in the session" test "$(session_of "${spid:-0}" 2> /dev/null)" = "$sid"
  login_session allot-tb taskset -c 1 sh -c 'echo $$ > /tmp/bhog.pid; while :; do :; done' > /dev/null || true
  wait_for -t 30 test -s /tmp/bhog.pid || true
  sleep 2
  local c0 c1 other idle
  c0=$(_cpu_of "$p"); sleep 6; c1=$(_cpu_of "$p")
  other=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.3f", (b - a) / 6 }')
  echo "a background rule's session process moved into a background job, against allot-tb's hog on its CPU: $other CPU" >&2
  check "it keeps <= 5% against another user's hog: $other" awk -v s="$other" 'BEGIN { exit !(s <= 0.05) }'
  _kill_pidfiles /tmp/bhog.pid
  sleep 1
  c0=$(_cpu_of "$p"); sleep 4; c1=$(_cpu_of "$p")
  idle=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.3f", (b - a) / 4 }')
  echo "the same process with the CPU idle: $idle CPU" >&2
  check "it runs when the CPU is idle (>= 0.8 CPU): $idle" awk -v s="$idle" 'BEGIN { exit !(s >= 0.8) }'
  local t0 ms
  t0=$(date +%s%N)
  loginctl terminate-session "$sid" || true
  wait_for -t 10 sh -c "! kill -0 $p 2> /dev/null" || true
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "loginctl terminate-session $sid: the moved process gone after $ms ms" >&2
  check "stopping its session ends the moved process" sh -c "! kill -0 $p 2> /dev/null"
  _kill_pidfiles /tmp/bghog.pid
  rm /etc/allot/allot.toml
  systemctl reload allot
}

# Nice 19 in allot-ta's session against allot-tb's nice-0 hog on one CPU: Petrou et al.
# 1999 §3.4's threshold gives the niced currency at most 10^((20 - 19)/20 + 1) = 11.2
# base tickets against a default 100, so allot-ta gets 11.2/111.2 = 0.101 of the CPU
# (the raw tree's nice emulation; allot-model nice.rs, base_ticket_threshold).
sessions_nice() {
  rm -f /tmp/nhog.pid /tmp/bhog.pid
  login_session allot-ta taskset -c 1 nice -n 19 sh -c 'echo $$ > /tmp/nhog.pid; while :; do :; done' > /dev/null || true
  login_session allot-tb taskset -c 1 sh -c 'echo $$ > /tmp/bhog.pid; while :; do :; done' > /dev/null || true
  wait_for -t 30 sh -c 'test -s /tmp/nhog.pid && test -s /tmp/bhog.pid' || true
  sleep 4
  local a0 b0 a1 b1 share
  a0=$(_slice_usec 2001); b0=$(_slice_usec 2002); sleep 8; a1=$(_slice_usec 2001); b1=$(_slice_usec 2002)
  share=$(awk -v a="$((a1 - a0))" -v b="$((b1 - b0))" 'BEGIN { printf "%.3f", (a + b) ? a / (a + b) : 0 }')
  echo "nice 19 in allot-ta's session against allot-tb's nice-0 hog on one CPU: allot-ta's share $share (slice weights $(cat /sys/fs/cgroup/user.slice/user-2001.slice/cpu.weight) / $(cat /sys/fs/cgroup/user.slice/user-2002.slice/cpu.weight)); the threshold predicts 0.101" >&2
  check "nice 19 across users gets the nice threshold's share (0.071..0.131): $share" awk -v s="$share" 'BEGIN { exit !(s >= 0.071 && s <= 0.131) }'
  _kill_pidfiles /tmp/nhog.pid /tmp/bhog.pid
}

# A session process that sleeps 5 ms and works 0.5 ms, against allot-tb's hogs on its CPU:
# the boost reaches it (explain says so), and its wake-up latency is measured with the
# boost and with `policy.boost = false`.
_probe_p99() {   # SECONDS OUTFILE: runs in allot-ta's session, writes "PID P99_MS"
  cat > /tmp/probe.py <<'PY'
import os, sys, time
secs, out = float(sys.argv[1]), sys.argv[2]
open(out + ".pid", "w").write(str(os.getpid()))
lat, end = [], time.monotonic() + secs
while time.monotonic() < end:
    t = time.perf_counter(); time.sleep(0.005)
    lat.append(time.perf_counter() - t - 0.005)
    w = time.perf_counter()
    while time.perf_counter() - w < 0.0005: pass
lat = sorted(lat[len(lat) // 5:])
open(out, "w").write("%.3f\n" % (lat[int(len(lat) * 0.99)] * 1000))
PY
  chmod 0644 /tmp/probe.py; rm -f "$2" "$2.pid"
  login_session allot-ta taskset -c 1 python3 /tmp/probe.py "$1" "$2" > /dev/null || true
}

sessions_boost() {
  rm -f /tmp/bh1.pid /tmp/bh2.pid
  login_session allot-tb sh -c 'taskset -c 1 sh -c "echo \$\$ > /tmp/bh1.pid; while :; do :; done" & taskset -c 1 sh -c "echo \$\$ > /tmp/bh2.pid; while :; do :; done" & wait' > /dev/null || true
  wait_for -t 30 sh -c 'test -s /tmp/bh1.pid && test -s /tmp/bh2.pid' || true
  _probe_p99 12 /tmp/probe.on
  wait_for -t 30 test -s /tmp/probe.on.pid || true
  sleep 4
  local p; p=$(cat /tmp/probe.on.pid 2> /dev/null || echo 0)
  $A --json explain "$p" > /tmp/probe.explain 2>&1 || true
  check "allot explain says the sleeping/waking session process is boosted" python3 -c "
import json
e = json.load(open('/tmp/probe.explain'))
b = [r for r in e['reasons'] if r['state'] == 'boost']
print(b[0]['because'] if b else e)
assert b and b[0]['on'] and 'slice' in b[0]['because']"
  sed -n '1,40p' /tmp/probe.explain >&2
  wait_for -t 30 test -s /tmp/probe.on || true
  mkdir -p /etc/allot
  printf '[policy]\nboost = false\n' > /etc/allot/allot.toml
  systemctl reload allot
  sleep 1
  _probe_p99 12 /tmp/probe.off
  wait_for -t 40 test -s /tmp/probe.off || true
  echo "session probe p99 wake-up latency against 2 hogs of allot-tb on its CPU: boost $(cat /tmp/probe.on 2> /dev/null) ms, boost off $(cat /tmp/probe.off 2> /dev/null) ms" >&2
  rm /etc/allot/allot.toml
  systemctl reload allot
  _kill_pidfiles /tmp/bh1.pid /tmp/bh2.pid
}

# User A in a session with one hog against user B's `allot run` job of 4 hogs: A keeps half
# the machine with the daemon running, and B's CPU-bound job is not boosted (the plan
# counts A's session: B's job is entitled to 1 CPU of 2, not to the machine).
sessions_plan_counts_sessions() {
  rm -f /tmp/ahog.pid /tmp/bjob.pids
  printf '#!/bin/sh\nfor i in 1 2 3 4; do sh -c '"'"'echo $$ >> /tmp/bjob.pids; while :; do :; done'"'"' & done\nwait\n' > /tmp/bjob.sh
  chmod 0755 /tmp/bjob.sh
  login_session allot-ta sh -c 'echo $$ > /tmp/ahog.pid; while :; do :; done' > /dev/null || true
  # The session's shell stays in its scope; `allot run` takes only itself into a job.
  login_session allot-tb sh -c "$A run -- /tmp/bjob.sh & wait" > /dev/null || true
  wait_for -t 30 sh -c 'test -s /tmp/ahog.pid && [ "$(wc -l < /tmp/bjob.pids)" = 4 ]' || true
  sleep 3
  local a0 b0 a1 b1 share boosted
  local d0 d1 r0 r1 jobw w n quiet qboost dpid placed
  # Quiet: nothing but the loads and this shell (a `show` a sample costs a process start
  # and a request, much CPU under emulation); B's job is boosted when its cpu.weight is
  # above its tickets (the boost's weight), read from the cgroup file every 0.25 s.
  jobw=$(for f in /sys/fs/cgroup/user.slice/user-2002.slice/allot:user-2002.scope/j*-u2002; do if grep -q . "$f/cgroup.procs" 2> /dev/null; then echo "$f/cpu.weight"; break; fi; done) || true
  local s0 s1 bus sys0 sys1 e0 e1 svcs svc0 svc1 i nap apid c q bpids secs attempt
  # A TCG guest's timing follows the host's load, and the kernel alone gave A 0.472-0.493
  # here: a miss is measured once more, said, and that measurement's verdict stands (as
  # scripts/test does for a missed VM run). The line is 0.45: with the host building
  # beside the VM (2026-11-27) A held 0.459 and 0.466, B's hogs visiting A's CPU in 4 of 8
  # seconds, where a daemon blind to sessions left A 0.359-0.419 (docs/systemd.md).
  for attempt in 1 2; do
    dpid=$(systemctl show -p MainPID --value allot)
    bus=$(systemctl show -p MainPID --value dbus)
    s0=$(_ticks_of 1 "$bus")
    d0=$(systemctl show -p CPUUsageNSec --value allot); r0=$(sed -n 's/^syscr: //p' "/proc/$dpid/io" || true)
    svcs=(/sys/fs/cgroup/system.slice/*/); svc0=(); svc1=()
    for i in "${!svcs[@]}"; do _usec_v "svc0[$i]" "${svcs[$i]}cpu.stat"; done
    _usec_v sys0 /sys/fs/cgroup/system.slice/cpu.stat; e0=$EPOCHREALTIME
    _usec_v a0 /sys/fs/cgroup/user.slice/user-2001.slice/cpu.stat; _usec_v b0 /sys/fs/cgroup/user.slice/user-2002.slice/cpu.stat
    qboost=0; n=0; placed=""
    # The pause is a `read -t` on a fifo nobody writes and the CPUs are read into variables:
    # the checker starts no process while it measures (with a `sleep` each read and a `cat`
    # and subshells each second, system.slice used 0.398 CPU under emulation on 2026-11-27,
    # out of whichever user's CPU it ran on).
    rm -f /tmp/nap.fifo; mkfifo /tmp/nap.fifo; exec {nap}<> /tmp/nap.fifo; rm -f /tmp/nap.fifo
    read -r apid < /tmp/ahog.pid; mapfile -t bpids < /tmp/bjob.pids
    while [ $n -lt 32 ]; do
      { read -r w < "$jobw"; } 2> /dev/null || w=0
      if [ "${w:-0}" -gt 100 ]; then qboost=$((qboost + 1)); fi
      # Every second: the CPU A's hog and B's hogs were last on (builtins only: no process).
      if [ $((n % 4)) = 0 ]; then _psr_v c "$apid"; placed="$placed A:$c B:"; for q in "${bpids[@]}"; do _psr_v c "$q"; placed="$placed$c"; done; fi
      n=$((n + 1)); read -r -t 0.25 -u "$nap" _ || true
    done
    exec {nap}<&-
    _usec_v a1 /sys/fs/cgroup/user.slice/user-2001.slice/cpu.stat; _usec_v b1 /sys/fs/cgroup/user.slice/user-2002.slice/cpu.stat
    e1=$EPOCHREALTIME; _usec_v sys1 /sys/fs/cgroup/system.slice/cpu.stat
    for i in "${!svcs[@]}"; do _usec_v "svc1[$i]" "${svcs[$i]}cpu.stat"; done
    s1=$(_ticks_of 1 "$bus")
    d1=$(systemctl show -p CPUUsageNSec --value allot); r1=$(sed -n 's/^syscr: //p' "/proc/$dpid/io" || true)
    quiet=$(awk -v a="$((a1 - a0))" -v b="$((b1 - b0))" 'BEGIN { printf "%.3f", (a + b) ? a / (a + b) : 0 }')
    echo "quiet: allot-ta's share $quiet (allot-ta $(( (a1 - a0) / 1000 )) ms, allot-tb $(( (b1 - b0) / 1000 )) ms); allot-tb's job ($jobw) boosted in $qboost of 32 reads; the daemon $(awk -v a="$d0" -v b="$d1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }') CPU s, $((${r1:-0} - ${r0:-0})) read calls; systemd and dbus-daemon $((s1 - s0)) ticks of 10 ms; sessions: $(ls -d /sys/fs/cgroup/user.slice/*/session-*.scope | wc -l), their threads: $(cat /sys/fs/cgroup/user.slice/*/session-*.scope/cgroup.threads | wc -l)" >&2
    # The policy's part is checked: A's share of what the two users got (both slices weigh
    # 100). What the daemon itself and the rest of the system took over the same seconds is
    # printed beside it (under emulation the daemon's own CPU comes out of whichever user's
    # CPU it ran on): CPU over the phase of the daemon, of system.slice (the daemon included)
    # and of its four busiest units.
    secs=$(awk -v a="${e0/,/.}" -v b="${e1/,/.}" 'BEGIN { printf "%.3f", b - a }')
    echo "quiet, over $secs s: allot-ta $(_per_s $((a1 - a0)) "$secs") CPU, allot-tb $(_per_s $((b1 - b0)) "$secs") CPU, the daemon $(awk -v a="$d0" -v b="$d1" -v s="$secs" 'BEGIN { printf "%.3f", (b - a) / 1e9 / s }') CPU, system.slice $(_per_s $((sys1 - sys0)) "$secs") CPU (of 2 CPUs); in system.slice:$(for i in "${!svcs[@]}"; do u=${svcs[$i]%/}; printf ' %s %s\n' "$(_per_s $(( ${svc1[$i]:-0} - ${svc0[$i]:-0} )) "$secs")" "${u##*/}"; done | sort -rn -k1 | head -n 4 | tr '\n' ',')" >&2
    awk -v s="$quiet" 'BEGIN { exit !(s >= 0.45 && s <= 0.55) }' && break
    [ "$attempt" = 1 ] && echo "quiet: allot-ta's share $quiet is outside 0.45..0.55; measured once more" >&2
  done
  check "A in a session keeps 0.45..0.55 of what the users got against B's job of 4 hogs, the daemon running: $quiet" awk -v s="$quiet" 'BEGIN { exit !(s >= 0.45 && s <= 0.55) }'
  echo "CPUs (A's hog, B's four hogs) each second of the quiet phase:$placed" >&2
  check "B's job's weight file was found ($jobw)" test -n "$jobw"
  check "B's CPU-bound job is never boosted ($qboost of 32 reads of its weight)" test -n "$jobw" -a "$qboost" = 0
  d0=$(systemctl show -p CPUUsageNSec --value allot)
  a0=$(_slice_usec 2001); b0=$(_slice_usec 2002)
  boosted=0
  for _ in $(seq 16); do
    $A --json show 2> /dev/null | python3 -c "
import json, sys
v = json.load(sys.stdin)
w = lambda u: open('/sys/fs/cgroup/user.slice/user-%d.slice/cpu.weight' % u).read().strip()
for j in v['jobs']:
    if j['uid'] == 2002 and j['active']:
        print('  sample: allot-tb job', j['id'], 'entitlement', j['entitlement'], 'usage', j['usage'], 'recent', j['recent'], 'runnable', j['runnable'], 'boost', j['boost'], 'weight', j['weight'], 'slice weights', w(2001), w(2002), file=sys.stderr)
sys.exit(1 if any(j['uid'] == 2002 and j['active'] and j['boost'] for j in v['jobs']) else 0)" || boosted=$((boosted + 1))
    sleep 0.5
  done
  a1=$(_slice_usec 2001); b1=$(_slice_usec 2002)
  d1=$(systemctl show -p CPUUsageNSec --value allot)
  echo "the daemon's own CPU over those samples: $(awk -v a="$d0" -v b="$d1" 'BEGIN { printf "%.3f", (b - a) / 1e9 / 8 }') CPU" >&2
  share=$(awk -v a="$((a1 - a0))" -v b="$((b1 - b0))" 'BEGIN { printf "%.3f", (a + b) ? a / (a + b) : 0 }')
  $A --json show > /tmp/plan.show 2>&1 || true
  echo "allot-ta's session hog against allot-tb's job of 4 hogs: allot-ta's share $share (allot-ta $(( (a1 - a0) / 8000 )) ms/s, allot-tb $(( (b1 - b0) / 8000 )) ms/s); allot-tb's job boosted in $boosted of 16 samples" >&2
  python3 -c "
import json
v = json.load(open('/tmp/plan.show'))
for j in v['jobs']:
    if j['uid'] == 2002 and j['active']: print('allot-tb job', j['id'], 'entitlement', j['entitlement'], 'usage', j['usage'], 'boost', j['boost'], 'weight', j['weight'])
print('outside', v.get('outside'))" >&2 || true
  # With a `show` every 0.5 s (what each sample costs the guest disturbs the shares):
  # printed for the record; the quiet phase above is checked.
  echo "with show samples: A in a session against B's job of 4 hogs: $share; B's job boosted in $boosted of 16 samples" >&2
  # The same load with the daemon stopped (its jobs stay where they are): the baseline.
  systemctl stop allot
  sleep 2
  a0=$(_slice_usec 2001); b0=$(_slice_usec 2002); sleep 8; a1=$(_slice_usec 2001); b1=$(_slice_usec 2002)
  echo "the same with the daemon stopped: allot-ta's share $(awk -v a="$((a1 - a0))" -v b="$((b1 - b0))" 'BEGIN { printf "%.3f", (a + b) ? a / (a + b) : 0 }') (allot-ta $(( (a1 - a0) / 8000 )) ms/s, allot-tb $(( (b1 - b0) / 8000 )) ms/s)" >&2
  systemctl start allot
  _kill_pidfiles /tmp/ahog.pid
  [ -s /tmp/bjob.pids ] && while read -r q; do kill "$q" 2> /dev/null || true; done < /tmp/bjob.pids
}

# Reach (docs/systemd.md): a process that becomes a human user outside a login session of
# its own joins that user's currency through systemd within a second. cron's shape (this
# image has no cron): a root service whose child becomes the user; su and sudo -u from
# root's login session. Timed by a watcher started before each (_reach_watch: one python
# process polling every 5 ms, so no process is started while it times) from the moment the
# new user's first command wrote its pid file to the moment /proc/PID/cgroup names allot's
# scope; the daemon's journal says how long after the kernel's report it moved it, and how
# much of that the report waited for the daemon's loop. (The first timing, from before
# su and sudo started, gave 1328 and 1579 ms; the second, from a `date` run by the new user
# to a poll of `grep` and `sleep 0.01` started after a 0.2 s wait for the pid file, counted
# the checker's own process starts: 485-759 ms quiet, 1047-1935 ms under host load.)
_reach_watch() {   # TAG SCOPE: in the background; writes the ms (or "never") to /tmp/reach.TAG.ms
  rm -f "/tmp/reach.$1.pid" "/tmp/reach.$1.ms" "/tmp/reach.$1.ready"
  python3 - "$1" "$2" <<'PY' &
import os, sys, time
tag, scope = sys.argv[1], sys.argv[2]
pidf, out = "/tmp/reach.%s.pid" % tag, "/tmp/reach.%s.ms" % tag
def done(v):
    open(out + ".tmp", "w").write(v + "\n"); os.rename(out + ".tmp", out); sys.exit()
open("/tmp/reach.%s.ready" % tag, "w").close()
end = time.monotonic() + 60
while not (os.path.exists(pidf) and os.path.getsize(pidf)):
    if time.monotonic() > end: done("never")
    time.sleep(0.005)
t0 = time.monotonic()
pid = open(pidf).read().strip()
first = True
while time.monotonic() < t0 + 10:
    try: cg = open("/proc/%s/cgroup" % pid).read()
    except OSError: done("never")
    if "/%s/" % scope in cg:
        done("%d%s" % ((time.monotonic() - t0) * 1000, " (already there at the first look)" if first else ""))
    first = False
    time.sleep(0.005)
done("never")
PY
  wait_for -t 60 test -e "/tmp/reach.$1.ready" || true
}
_reach_ms() {   # TAG: the watcher's result, once it has one
  wait_for -t 70 test -s "/tmp/reach.$1.ms" || { echo never; return; }
  cat "/tmp/reach.$1.ms"
}
# The daemon's own line for a pid: how long after the kernel's report it was moved.
_reach_journal() { journalctl -b -u allot --no-pager -o cat | grep -E "process $1 (changed user|became uid)" | tail -n 2 | tr '\n' ' '; }
reach_checks() {
  cat > /tmp/reach-job.sh <<'JOB'
#!/bin/sh
# TAG USER: like cron's child, become USER and run the job; its first command records its pid.
exec setpriv --reuid="$(id -u "$2")" --regid="$(id -g "$2")" --init-groups sh -c 'echo $$ > /tmp/reach.'"$1"'.pid; exec sleep 3000'
JOB
  chmod 0755 /tmp/reach-job.sh
  local ms pid
  _reach_watch cron allot:user-2001.scope
  systemd-run --quiet --unit=reach-cron sh -c '/tmp/reach-job.sh cron allot-ta & wait'
  ms=$(_reach_ms cron); pid=$(cat /tmp/reach.cron.pid 2> /dev/null || echo 0)
  echo "a cron-shaped job of allot-ta (root service, child becomes the user): in allot:user-2001.scope after $ms ms; the daemon: $(_reach_journal "$pid")" >&2
  check "a cron-shaped job joins allot-ta's currency within a second ($ms ms)" test "${ms%% *}" != never -a "$(m=${ms%% *}; echo "${m/never/9999}")" -lt 1000
  check "the cron-shaped service's own process stays in its service" sh -c "grep -q 'reach-cron.service' /proc/$(systemctl show -p MainPID --value reach-cron)/cgroup"
  check "allot show lists it in allot-ta's default job" sh -c "$A --json show | python3 -c 'import json,sys; v=json.load(sys.stdin); sys.exit(0 if any(j[\"id\"] == \"allot-ta/default\" and $pid in (j[\"pids\"] or []) for j in v[\"jobs\"]) else 1)'"
  local root root2
  # Script files: su would take a `-c` after the user as its own (see Surprises). One at a
  # time, so each is timed alone (the daemon takes uid changes in turn: a sudo started
  # with an su waited behind the su's new scope, 1362 ms in one run).
  cat > /tmp/reach-root-su.sh <<'ROOT'
#!/bin/sh
su allot-tb -s /bin/sh -c 'echo $$ > /tmp/reach.su.pid; exec sleep 3000'
ROOT
  cat > /tmp/reach-root-sudo.sh <<'ROOT'
#!/bin/sh
sudo -u allot-ta sh -c 'echo $$ > /tmp/reach.sudo.pid; exec sleep 3000'
ROOT
  chmod 0755 /tmp/reach-root-su.sh /tmp/reach-root-sudo.sh
  _reach_watch su allot:user-2002.scope
  root=$(login_session root /tmp/reach-root-su.sh)
  ms=$(_reach_ms su); pid=$(cat /tmp/reach.su.pid 2> /dev/null || echo 0)
  echo "su allot-tb -c from root's login session: in allot:user-2002.scope after $ms ms; the daemon: $(_reach_journal "$pid")" >&2
  check "su into allot-tb from root's session joins her currency within a second ($ms ms)" test "${ms%% *}" != never -a "$(m=${ms%% *}; echo "${m/never/9999}")" -lt 1000
  _reach_watch sudo allot:user-2001.scope
  root2=$(login_session root /tmp/reach-root-sudo.sh)
  ms=$(_reach_ms sudo); pid=$(cat /tmp/reach.sudo.pid 2> /dev/null || echo 0)
  echo "sudo -u allot-ta from root's login session: in allot:user-2001.scope after $ms ms; the daemon: $(_reach_journal "$pid")" >&2
  check "sudo -u allot-ta from root's session joins his currency within a second ($ms ms)" test "${ms%% *}" != never -a "$(m=${ms%% *}; echo "${m/never/9999}")" -lt 1000
  check "root's own session process stays in its session" sh -c "grep -q 'user-0.slice/session-' /proc/$root/cgroup"
  for f in /tmp/reach.cron.pid /tmp/reach.su.pid /tmp/reach.sudo.pid; do [ -s "$f" ] && kill "$(cat "$f")" 2> /dev/null || true; done
  kill "$root" "$root2" 2> /dev/null || true
  systemctl stop reach-cron 2> /dev/null || true
  # root's session and slice go (the byte-identical check at the end must not see them).
  wait_for -t 60 sh -c "! test -d $(units_root)/user.slice/user-0.slice" || { echo "user-0.slice still there:" >&2; _slice_holders 0; }
}

# What holds a user's slice after its user logged out: the units in it (user@UID.service
# included: `user-UID*` does not match it), the processes in each of its cgroups, logind's
# view of the user, and what logind and the user's manager logged.
_slice_holders() {   # UID
  systemctl list-units --all --plain --no-legend "user-$1*" "user@$1.service" "user-runtime-dir@$1.service" "allot*$1*" >&2 || true
  systemctl show -p ActiveState,SubState,Job,ActiveEnterTimestamp,InactiveEnterTimestamp "user@$1.service" >&2 || true
  find "$(units_root)/user.slice/user-$1.slice" -name cgroup.procs -exec sh -c 'for f; do printf "%s: %s\n" "$f" "$(tr "\n" " " < "$f")"; done' sh {} + >&2 || true
  loginctl show-user "$1" >&2 || true
  journalctl -b -o short-precise --no-pager -u systemd-logind -u "user@$1.service" -u "user-runtime-dir@$1.service" -u "user-$1.slice" | tail -n 40 >&2 || true
}

# Logout (docs/systemd.md): a job started with `allot run` in a login session is tied to
# the session by a PartOf= tether, so it ends when logind stops the session (logout under
# KillUserProcesses=yes, terminate-user) and runs on when logind only abandons it
# (Debian's default KillUserProcesses=no), as a nohup'd process of the session would.
logout_checks() {
  id allot-tc > /dev/null 2>&1 || useradd -m -u 2003 -s /bin/bash allot-tc
  cat > /tmp/lo-job.sh <<JOB
#!/bin/sh
# TAG SECONDS: start a job, record its pid, log out after SECONDS.
$A run -- sh -c 'echo \$\$ > /tmp/lo.'"\$1"'.pid; exec sleep 3000' &
sleep "\$2"
JOB
  chmod 0755 /tmp/lo-job.sh; rm -f /tmp/lo.*
  # gone_after TAG: ms from the end of the session until the job's process is gone.
  gone_after() {
    local pid=$1 sid=$2 t0 i
    wait_for -t 30 sh -c "! loginctl show-session $sid > /dev/null 2>&1" || { echo "session-stays"; return; }
    t0=$(date +%s%N)
    for i in $(seq 1 1500); do
      if ! kill -0 "$pid" 2> /dev/null; then echo $((($(date +%s%N) - t0) / 1000000)); return; fi
      sleep 0.01
    done
    echo never
  }
  local s pid ms
  # 1. KillUserProcesses=no: logind abandons the session; the job runs on.
  s=$(login_session allot-ta /tmp/lo-job.sh keep 3)
  wait_for -t 20 test -s /tmp/lo.keep.pid; pid=$(cat /tmp/lo.keep.pid)
  local sid; sid=$(session_of "$s" 2> /dev/null || echo none)
  check "the job from the session has a tether PartOf its session" sh -c "systemctl list-units --plain --no-legend 'allot_logout_*.scope' | grep -q . && systemctl show -p PartOf 'allot_logout_*.scope' | grep -q 'session-$sid.scope'"
  wait_for -t 30 sh -c "! loginctl show-session $sid > /dev/null 2>&1" || true
  sleep 3
  check "KillUserProcesses=no: the job outlives its logout" kill -0 "$pid"
  kill "$pid" 2> /dev/null || true
  # 2. loginctl terminate-user (a forced stop, whatever KillUserProcesses says).
  s=$(login_session allot-tc /tmp/lo-job.sh term 3000)
  wait_for -t 20 test -s /tmp/lo.term.pid; pid=$(cat /tmp/lo.term.pid); sid=$(session_of "$s" 2> /dev/null || echo none)
  # Under emulation the user's manager may still be starting here (logind asks for its
  # stop as the session's): its state is printed, for the slice check below.
  echo "before terminate-user: user@2003.service $(systemctl show -p ActiveState,SubState,Job --value user@2003.service | tr '\n' ' ')" >&2
  loginctl terminate-user allot-tc
  ms=$(gone_after "$pid" "$sid")
  echo "loginctl terminate-user: the job gone $ms ms after its session" >&2
  check "loginctl terminate-user ends the user's allot job ($ms ms after the session)" test "$ms" != never -a "$ms" != session-stays
  # allot-tc's slice goes once logind's stop of user@2003.service is done, and logind
  # forgets the user (its /run/systemd/users/2003) a moment later. logind must not be
  # restarted before that (step 3 restarts it): a logind that starts while a user's record
  # is still there starts that user's manager again (manager_startup calls user_start for
  # every user it loads) and then, with no session left, drops the record without stopping
  # the manager, which runs on and holds the slice. Seen in the VM on 2026-11-27: the slice
  # gone 247 ms after the job, logind restarted 0.7 s later, "Created slice
  # user-2003.slice" and user@2003.service started by the new logind, and `loginctl
  # show-user` then "not logged in or lingering" with the manager still running.
  local t0; t0=$(date +%s%N)
  if wait_for -t 90 sh -c "! test -d $(units_root)/user.slice/user-2003.slice && ! test -e /run/systemd/users/2003"; then
    echo "after terminate-user: user-2003.slice and logind's record of allot-tc gone $((($(date +%s%N) - t0) / 1000000)) ms after the job" >&2
  else
    echo "after terminate-user: user-2003.slice or logind's record of allot-tc still there after 90 s:" >&2
    _slice_holders 2003
  fi
  check "after terminate-user allot-tc's slice goes (nothing of allot's holds it)" sh -c "! test -d $(units_root)/user.slice/user-2003.slice"
  # 3. KillUserProcesses=yes: the logout itself ends the job.
  mkdir -p /etc/systemd/logind.conf.d
  printf '[Login]\nKillUserProcesses=yes\n' > /etc/systemd/logind.conf.d/zz-allot-test.conf
  systemctl restart systemd-logind; wait_for -t 30 systemctl is-active --quiet systemd-logind
  s=$(login_session allot-ta /tmp/lo-job.sh kill 3)
  wait_for -t 20 test -s /tmp/lo.kill.pid; pid=$(cat /tmp/lo.kill.pid); sid=$(session_of "$s" 2> /dev/null || echo none)
  ms=$(gone_after "$pid" "$sid")
  echo "KillUserProcesses=yes: the job gone $ms ms after its session ended" >&2
  check "KillUserProcesses=yes: after logout the job does not survive ($ms ms after the session)" test "$ms" != never -a "$ms" != session-stays
  rm -f /etc/systemd/logind.conf.d/zz-allot-test.conf
  systemctl restart systemd-logind; wait_for -t 30 systemctl is-active --quiet systemd-logind
  journalctl -b -u allot --no-pager | grep -E 'login session|tied to|session ended' | tail -n 8 >&2 || true
  # Whatever a failed check above left running goes, so the checks after it stand alone.
  for f in /tmp/lo.keep.pid /tmp/lo.term.pid /tmp/lo.kill.pid; do [ -s "$f" ] && kill "$(cat "$f")" 2> /dev/null || true; done
  check "the ties of the ended jobs are let go" wait_for -t 20 sh -c "! systemctl list-units --all --plain --no-legend 'allot_logout_*-u2003.scope' | grep -q ."
  if ! wait_for -t 60 sh -c "! test -d $(units_root)/user.slice/user-2003.slice"; then
    echo "user-2003.slice still there:" >&2
    _slice_holders 2003
  fi
}

sessions_all() {
  $A fund allot-ta 100 > /dev/null
  $A fund allot-tb 100 > /dev/null
  sessions_background_rule
  sessions_background_job
  sessions_nice
  sessions_boost
  sessions_plan_counts_sessions
  rmdir /etc/allot 2> /dev/null || true
}
