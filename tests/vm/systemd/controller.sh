#!/bin/bash
# allot-linux's systemd controller (SystemdTree) on a real systemd host, through the
# example crates/allot-linux/examples/systemd_tree.rs (each call a fresh process, as a
# restarted daemon), and packaging/systemd/allot.service with that example standing in
# for the daemon:
#   cargo build --release -p allot-linux --example systemd_tree
#   sudo bash tests/vm/systemd/run.sh \
#     --file target/release/examples/systemd_tree:/usr/local/bin/systemd_tree \
#     --file packaging/systemd/allot.service:/etc/systemd/system/ \
#     --script tests/vm/systemd/controller.sh
# Every cgroup outside allot's units is byte-identical before and after.
set -euo pipefail
# shellcheck source=tests/vm/systemd/guest-lib.sh
. "$ALLOT_VM_LIB"

T() { systemd_tree allot "$@"; }
# On a failure, the console gets what systemd and logind were doing.
trap 'rc=$?; if [ $rc != 0 ]; then { echo "--- journal"; journalctl -b --no-pager -n 80 -o short-monotonic; echo "--- jobs"; systemctl list-jobs; echo "--- sessions"; loginctl list-sessions; } >&2; fi' EXIT
CG=/sys/fs/cgroup
U=user.slice/user-2001.slice
S=$CG/$U/allot:user-2001.scope
B=$CG/allot_background.slice/allot:background.scope
command -v systemd_tree >/dev/null || { echo "FAIL systemd_tree is not installed (--file ...:/usr/local/bin/systemd_tree)"; exit 1; }
echo "# $(systemctl --version | head -n1)"

spid=$(login_session allot-ta sleep 1000)
snap() { cgroup_snapshot "$U" user.slice/user-allot_ci.slice allot_background.slice; }
slice_knobs() { for f in cgroup.subtree_control cpu.weight cpu.max cpu.idle; do echo "$f $(cat "$CG/$U/$f")"; done; }
before=$(mktemp); after=$(mktemp)
snap > "$before"; slice_knobs > "$before.slice"

# ---- a currency: its scope starts with a holder, job leaves inside
T create user-2001/j1-u2001 user-2001/j2-u2001
check "allot:user-2001.scope is active" systemctl is-active --quiet allot:user-2001.scope
check "its cgroup is in user-2001.slice (ControlGroup)" \
  test "$(systemctl show -p ControlGroup --value allot:user-2001.scope)" = "/$U/allot:user-2001.scope"
check "Delegate=cpu memory only (memory for a job's memory cap; no other controller enabled above it)" \
  test "$(systemctl show -p Delegate -p DelegateControllers --value allot:user-2001.scope | tr '\n' ' ')" = "yes cpu memory "
hp=$(cat "$S/.holder/cgroup.procs")
echo "# holder: pid $hp comm $(cat "/proc/$hp/comm") ppid $(ps -o ppid= -p "$hp" | tr -d ' ') cmdline $(tr '\0' ' ' < "/proc/$hp/cmdline")"
check "one holder, named allot-holder, re-parented (not the tool's child)" \
  test "$(wc -l < "$S/.holder/cgroup.procs")/$(cat "/proc/$hp/comm")/$(ps -o ppid= -p "$hp" | tr -d ' ')" = "1/allot-holder/1"
check "the scope distributes cpu to its job leaves" grep -qw cpu "$S/cgroup.subtree_control"
T weight user-2001/j1-u2001 300 >/dev/null
T max user-2001/j2-u2001 25000 >/dev/null
check "job weight and hard cap written in the leaves" test "$(cat "$S/j1-u2001/cpu.weight")/$(cat "$S/j2-u2001/cpu.max")" = "300/25000 100000"

# ---- processes: from a session through systemd, then within allot's scopes directly
T move user-2001/j1-u2001 "$spid"
check "a session's process moved into job j1 (AttachProcessesToUnit)" test "$(cgroup_of "$spid")" = "$U/allot:user-2001.scope/j1-u2001"
T move user-2001/j2-u2001 "$spid" >/dev/null
check "and on to j2 (cgroup.procs inside the delegation)" test "$(cgroup_of "$spid")" = "$U/allot:user-2001.scope/j2-u2001"
spid2=$(login_session allot-ta sleep 1000)
T where "$spid" > "$after.w1"; T where "$spid2" > "$after.w2"
cat "$after.w1" "$after.w2" | grep -v '^connected' | sed 's/^/# /'
check "rel_of maps the job's cgroup back; it is in no session now" \
  bash -c "grep -qx 'rel_of $spid user-2001/j2-u2001' '$after.w1' && grep -qx 'session_of $spid -' '$after.w1'"
check "a session process: outside allot, in its session as logind says" \
  bash -c "grep -qx 'rel_of $spid2 -' '$after.w2' && grep -q '^session_of $spid2 c[0-9]* uid 2001 session-c[0-9]*.scope$' '$after.w2'"

# ---- funding: the slice's CPUWeight over D-Bus, at most one call a second
busctl monitor --match "type='method_call',interface='org.freedesktop.systemd1.Manager',member='SetUnitProperties'" > "$after.mon" 2>/dev/null &
mon=$!
sleep 1
T weight user-2001 150 160 170 180 190 200 | grep -v '^connected' | sed 's/^/# /'
sleep 0.5; kill "$mon"; wait "$mon" 2>/dev/null || true
calls=$(grep -c 'Member=SetUnitProperties' "$after.mon" || true)
echo "# six weights in 300 ms: $calls SetUnitProperties call(s)"
check "six weights within 300 ms make 2 D-Bus calls (the first, then the latest)" test "$calls" = 2
check "systemctl show user-2001.slice -p CPUWeight says 200" test "$(systemctl show -p CPUWeight --value user-2001.slice)" = 200
check "and cpu.weight of the slice is 200" test "$(cat "$CG/$U/cpu.weight")" = 200

# ---- a named currency: its own slice beside the users'
T create ci/j5-u2001 >/dev/null
check "allot:ci.scope lives in user-allot_ci.slice in user.slice" \
  test "$(systemctl show -p ControlGroup --value allot:ci.scope)" = /user.slice/user-allot_ci.slice/allot:ci.scope
T weight ci 300 >/dev/null
check "its funding is user-allot_ci.slice's CPUWeight" test "$(systemctl show -p CPUWeight --value user-allot_ci.slice)" = 300

# ---- the background class
T create background/user-2001/j3-u2001 >/dev/null
T idle | grep -v '^connected' | sed 's/^/# /'
check "allot_background.slice is at the top, CPUWeight=idle, cpu.idle=1" \
  test "$(systemctl show -p ControlGroup --value allot_background.slice) $(systemctl show -p CPUWeight --value allot_background.slice) $(cat $CG/allot_background.slice/cpu.idle)" = "/allot_background.slice idle 1"
T move background/user-2001/j3-u2001 "$spid" >/dev/null
check "a job's process moves between allot's scopes (user-2001 -> background)" \
  test "$(cgroup_of "$spid")" = allot_background.slice/allot:background.scope/user-2001/j3-u2001
T move background/user-2001/j3-u2001 "$spid2" >/dev/null
check "a session's process moves into a background job" test "$(cgroup_of "$spid2")" = allot_background.slice/allot:background.scope/user-2001/j3-u2001

# ---- usage: the sum of allot's currency scopes
u0=$(T show | sed -n 's/^usage_ns //p')
# One process, no child: bash's $SECONDS ends the loop (a move takes the process, not
# children it had before). A script file, not `bash -c`: su would take that -c as its own
# option and run the loop without login_session's pid-file wrapper.
printf '#!/bin/bash\nwhile [ $SECONDS -lt 6 ]; do :; done\n' > /run/allot-vm/busy.sh
chmod 755 /run/allot-vm/busy.sh
busy=$(login_session allot-ta /run/allot-vm/busy.sh)
T move user-2001/j1-u2001 "$busy" >/dev/null
wait_for -t 20 bash -c "! kill -0 $busy 2>/dev/null"
u1=$(T show | sed -n 's/^usage_ns //p')
echo "# usage_ns(\"\") before and after a job busy for up to 6 s: $u0 $u1"
check "usage_ns(\"\") counts a job's CPU (over 0.5 s more)" test $((u1 - u0)) -gt 500000000

# ---- what a restarted daemon finds
T show > "$after.show"; grep -v '^connected' "$after.show" | sed 's/^/# /'
check "a new controller finds every currency, job and background job" bash -c "
  grep -qx 'currencies ci user-2001' '$after.show' && grep -qx 'jobs user-2001 j1-u2001 j2-u2001' '$after.show' &&
  grep -qx 'jobs ci j5-u2001' '$after.show' && grep -qx 'background user-2001 j3-u2001' '$after.show'"
inside() {
  for d in "$S" "$CG/user.slice/user-allot_ci.slice/allot:ci.scope" "$B"; do
    find "$d" -type d | sort | while read -r x; do
      echo "$x $(cat "$x/cgroup.procs" | tr '\n' ' ') $(cat "$x/cpu.weight" 2>/dev/null) $(cat "$x/cpu.max" 2>/dev/null)"
    done
  done
  systemctl show -p CPUWeight --value user-2001.slice user-allot_ci.slice allot_background.slice | tr '\n' ' '
}
inside > "$after.in0"
systemctl daemon-reload
inside > "$after.in1"
check "daemon-reload moves nothing and changes no knob" same "$after.in0" "$after.in1"

# ---- a holder killed by hand is replaced through systemd
kill -9 "$hp"
T create user-2001/j1-u2001 >/dev/null
hp2=$(cat "$S/.holder/cgroup.procs")
check "the scope got a new holder in .holder ($hp -> $hp2)" test -n "$hp2" -a "$hp2" != "$hp" -a "$(cat "/proc/$hp2/comm")" = allot-holder

# ---- allot.service, with the example standing in for the daemon
mkdir -p /etc/systemd/system/allot.service.d
cat > /etc/systemd/system/allot.service.d/test.conf <<'EOF'
[Service]
ExecStart=
ExecStart=/usr/local/bin/systemd_tree allot daemon
Environment=ALLOT_TEST_UID=2001
WatchdogSec=4s
EOF
systemctl daemon-reload
holders() { cat "$S/.holder/cgroup.procs" "$B/.holder/cgroup.procs" "$CG/user.slice/user-allot_ci.slice/allot:ci.scope/.holder/cgroup.procs" | tr '\n' ' '; }
h0=$(holders)
check "allot.service starts (Type=notify: READY=1 arrived)" systemctl start allot.service
echo "# allot.service: $(systemctl show -p ActiveState -p SubState -p StatusText -p MainPID allot.service | tr '\n' ' ')"
check "its status line came through sd_notify" bash -c "systemctl show -p StatusText --value allot.service | grep -qx 'managing 2 scope(s): ci, user-2001'"
check "its cgroup holds the daemon only" test "$(wc -l < $CG/system.slice/allot.service/cgroup.procs)" = 1
sleep 6
check "the watchdog is fed (active after 6 s with WatchdogSec=4s)" test "$(systemctl show -p ActiveState --value allot.service)/$(systemctl show -p NRestarts --value allot.service)" = active/0
systemctl reload allot.service
check "reload (ExecReload=kill -HUP) keeps it active" test "$(systemctl show -p ActiveState --value allot.service)" = active
systemctl restart allot.service
check "restart: holders and jobs stay" test "$(holders)/$(cgroup_of "$spid")" = "$h0/allot_background.slice/allot:background.scope/user-2001/j3-u2001"
pid=$(systemctl show -p MainPID --value allot.service)
kill -9 "$pid"
check "a crash (kill -9) is restarted (Restart=on-failure)" \
  wait_for -t 30 bash -c "[ \"\$(systemctl show -p NRestarts --value allot.service)\" = 1 ] && systemctl is-active --quiet allot.service"
check "after the crash, holders and jobs stay" test "$(holders)/$(cgroup_of "$spid")" = "$h0/allot_background.slice/allot:background.scope/user-2001/j3-u2001"
systemctl stop allot.service
check "stop: holders, scopes and jobs stay" test "$(holders)/$(systemctl is-active allot:user-2001.scope allot:ci.scope allot:background.scope | tr '\n' ' ')" = "$h0/active active active "
rm -r /etc/systemd/system/allot.service.d; systemctl daemon-reload

# ---- taking it all down: leaves, then scopes; funding unset; the rest as before
kill "$spid" "$spid2"
wait_for bash -c "[ -z \"\$(cat $B/user-2001/j3-u2001/cgroup.procs)\" ]"
T remove user-2001/j1-u2001 user-2001/j2-u2001 ci/j5-u2001 background/user-2001/j3-u2001 background/user-2001 user-2001 ci background | grep -v '^connected' | sed 's/^/# /'
check "allot's units are gone" bash -c "! systemctl is-active --quiet allot:user-2001.scope allot:ci.scope allot:background.scope allot_background.slice"
check "user-2001.slice's CPUWeight is unset again" test "$(systemctl show -p CPUWeight --value user-2001.slice)" = "[not set]"
keep=$(login_session allot-ta sleep 1000)
snap > "$after"; slice_knobs > "$after.slice"
check "every cgroup outside allot's units is byte-identical before and after" same "$before" "$after"
diff "$before" "$after" >&2 || true
check "user-2001.slice's own knobs are as before" same "$before.slice" "$after.slice"
diff "$before.slice" "$after.slice" >&2 || true
kill "$keep" 2>/dev/null || true
checks_done
