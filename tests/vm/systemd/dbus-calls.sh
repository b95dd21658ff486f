#!/bin/bash
# The D-Bus calls allot's systemd mode relies on, proven with busctl and systemctl on the
# guest's systemd (docs/systemd.md), before any allot code runs:
#   sudo bash tests/vm/systemd/run.sh --script tests/vm/systemd/dbus-calls.sh
# A delegated scope in a user's slice kept alive by a holder; sub-cgroups and knobs
# inside it; a login session's process attached into it (AttachProcessesToUnit); a user
# slice's CPUWeight set at runtime; an idle top-level slice (CPUWeight=idle, cpu.idle=1);
# the unit lookups (GetUnitByPID, GetUnitByControlGroup, ListUnitsByPatterns,
# GetSessionByPID); all of it unchanged by daemon-reload and daemon-reexec. Every cgroup
# outside these units is byte-identical before and after.
set -euo pipefail
# shellcheck source=tests/vm/systemd/guest-lib.sh
. "$ALLOT_VM_LIB"

SD=(busctl call org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager)
LOGIN=(busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager)
CG=/sys/fs/cgroup
SCOPE='allot-t:user-2001.scope'
# A dash nests slices (a-b.slice is in a.slice): allot escapes the root's dashes.
BGSLICE='allot\x2dt_background.slice'
BGSCOPE='allot-t:background.scope'
echo "# $(systemctl --version | head -n1); kernel $(uname -r)"

# A login session first: it starts user@2001.service, which enables cpu along /,
# user.slice and user-2001.slice (Debian's user@.service has Delegate=pids memory cpu).
spid=$(login_session allot-ta sleep 1000)
sid=$(session_of "$spid")
# Outside allot's units: everything but user-2001.slice's subtree (allot's scope lives
# there; its own knobs are compared separately) and allot's background slice.
snap() { cgroup_snapshot 'user.slice/user-2001.slice' "$BGSLICE"; }
slice_knobs() { for f in cgroup.subtree_control cpu.weight cpu.max cpu.idle; do echo "$f $(cat "$CG/user.slice/user-2001.slice/$f")"; done; }
before=$(mktemp); after=$(mktemp)
snap > "$before"; slice_knobs > "$before.slice"
echo "# root cgroup.subtree_control: $(cat $CG/cgroup.subtree_control)"

# ---- a delegated scope in user-2001.slice, held by a process that blocks forever
setsid sleep infinity </dev/null >/dev/null 2>&1 &
hpid=$!
# DelegateControllers alone: it implies Delegate=yes. Delegate=true would delegate every
# controller first, and the list adds to that (checked below).
job=$("${SD[@]}" StartTransientUnit 'ssa(sv)a(sa(sv))' "$SCOPE" fail 5 \
  Description s "allot test: jobs of user-2001" Slice s user-2001.slice \
  DelegateControllers as 1 cpu PIDs au 1 "$hpid" TasksMax t 18446744073709551615 0)
echo "# StartTransientUnit $SCOPE: $job"
check "a scope named <root>:<currency>.scope starts, in user-2001.slice" wait_for -t 20 systemctl is-active --quiet "$SCOPE"
scg=$(systemctl show -p ControlGroup --value "$SCOPE")
echo "# $SCOPE ControlGroup=$scg; Delegate=$(systemctl show -p Delegate --value "$SCOPE") DelegateControllers=$(systemctl show -p DelegateControllers --value "$SCOPE") TasksMax=$(systemctl show -p TasksMax --value "$SCOPE")"
check "Delegate=yes with the cpu controller only" \
  test "$(systemctl show -p Delegate -p DelegateControllers --value "$SCOPE" | tr '\n' ' ')" = "yes cpu "
check "the holder left the test's service cgroup for the scope" test "$(cgroup_of "$hpid")" = "${scg#/}"
check "the scope's cgroup has the cpu controller" grep -qw cpu "$CG$scg/cgroup.controllers"
S=$CG$scg
mkdir "$S/.holder" && echo "$hpid" > "$S/.holder/cgroup.procs"
echo +cpu > "$S/cgroup.subtree_control"
mkdir "$S/j1" "$S/j2"
echo 300 > "$S/j1/cpu.weight"
echo "50000 100000" > "$S/j2/cpu.max"
check "inside the delegation: holder in .holder, cpu for the children, knobs written" \
  test "$(cat "$S/.holder/cgroup.procs")/$(cat "$S/j1/cpu.weight")/$(cat "$S/j2/cpu.max")" = "$hpid/300/50000 100000"

# ---- AttachProcessesToUnit: a login session's process into a job leaf
out=$("${SD[@]}" AttachProcessesToUnit ssau "$SCOPE" /j1 1 "$spid" 2>&1) || true
echo "# AttachProcessesToUnit $SCOPE /j1 $spid: ${out:-(no output)}"
check "a session's process is attached into the scope's /j1" test "$(cgroup_of "$spid")" = "${scg#/}/j1"
out=$("${SD[@]}" AttachProcessesToUnit ssau "$SCOPE" j2 1 "$spid" 2>&1) && rc=0 || rc=$?
echo "# a relative sub-cgroup (j2): rc=$rc $out"
check "the sub-cgroup must be absolute (j2 refused, process stays in /j1)" \
  test "$rc/$(cgroup_of "$spid")" = "1/${scg#/}/j1"
spid2=$(login_session allot-ta sleep 1000)
sid2=$(session_of "$spid2")
out=$("${SD[@]}" AttachProcessesToUnit ssau "session-$sid.scope" / 1 "$spid2" 2>&1) && rc=0 || rc=$?
echo "# into a session scope (not delegated): rc=$rc $out"
check "a non-delegated unit refuses AttachProcessesToUnit" test "$rc/$(cgroup_of "$spid2")" = "1/user.slice/user-2001.slice/session-$sid2.scope"
systemd-run --quiet --unit=allot-t-svc.service sleep 1000
wait_for systemctl is-active --quiet allot-t-svc.service
svpid=$(systemctl show -p MainPID --value allot-t-svc.service)
out=$("${SD[@]}" AttachProcessesToUnit ssau "$SCOPE" /j2 1 "$svpid" 2>&1) && rc=0 || rc=$?
echo "# a service's main process into the scope: rc=$rc ${out:-(no output)}; it is now in $(cgroup_of "$svpid")"
systemctl stop allot-t-svc.service 2>/dev/null || true
kill "$svpid" 2>/dev/null || true

# ---- lookups
u=$("${SD[@]}" GetUnitByPID u "$spid")
check "GetUnitByPID of the attached process is the scope ($u)" test "$u" = 'o "/org/freedesktop/systemd1/unit/allot_2dt_3auser_2d2001_2escope"'
u=$("${SD[@]}" GetUnitByControlGroup s "$scg/j1" 2>&1) || true
echo "# GetUnitByControlGroup $scg/j1: $u"
check "GetUnitByControlGroup maps a sub-cgroup to the scope" test "$u" = 'o "/org/freedesktop/systemd1/unit/allot_2dt_3auser_2d2001_2escope"'
l=$("${SD[@]}" ListUnitsByPatterns asas 0 1 'allot-t:*.scope')
echo "# ListUnitsByPatterns allot-t:*.scope: $l"
check "ListUnitsByPatterns finds the scope by glob" grep -q "\"$SCOPE\"" <<<"$l"
s=$("${LOGIN[@]}" GetSessionByPID u "$spid2")
check "GetSessionByPID of a session process: $s" grep -q "/org/freedesktop/login1/session/" <<<"$s"
out=$("${LOGIN[@]}" GetSessionByPID u "$spid" 2>&1) && rc=0 || rc=$?
echo "# GetSessionByPID of the process now in the scope: rc=$rc $out"
check "a process moved into allot's scope is in no session" test "$rc" = 1

# ---- funding: a user slice's CPUWeight, at runtime
"${SD[@]}" SetUnitProperties 'sba(sv)' user-2001.slice true 1 CPUWeight t 300
check "systemctl show user-2001.slice -p CPUWeight says 300" test "$(systemctl show -p CPUWeight --value user-2001.slice)" = 300
check "user-2001.slice's cpu.weight is 300" test "$(cat $CG/user.slice/user-2001.slice/cpu.weight)" = 300
echo "# runtime drop-in: $(ls /run/systemd/system.control/user-2001.slice.d/ 2>&1 | tr '\n' ' ')"
# An admin's persistent set-property lands in /etc/systemd/system.control, which outranks
# /run/systemd/system.control (systemd.unit(5)): allot's runtime value holds only until
# the next daemon-reload. (docs/systemd.md: the daemon should notice, not fight.)
systemctl set-property user-2001.slice CPUWeight=50
"${SD[@]}" SetUnitProperties 'sba(sv)' user-2001.slice true 1 CPUWeight t 300
w1=$(cat $CG/user.slice/user-2001.slice/cpu.weight)
systemctl daemon-reload
w2=$(cat $CG/user.slice/user-2001.slice/cpu.weight)
echo "# admin's persistent CPUWeight=50, then allot's runtime 300: $w1; after daemon-reload: $w2"
check "an admin's persistent CPUWeight outranks allot's runtime one at daemon-reload" test "$w1/$w2" = 300/50
systemctl revert user-2001.slice >/dev/null
"${SD[@]}" SetUnitProperties 'sba(sv)' user-2001.slice true 1 CPUWeight t 300
check "after systemctl revert, allot's runtime value holds again" test "$(systemctl show -p CPUWeight --value user-2001.slice)" = 300

# ---- the background class: an idle top-level slice with a delegated scope
"${SD[@]}" StartTransientUnit 'ssa(sv)a(sa(sv))' "$BGSLICE" fail 2 \
  Description s "allot test: background" CPUWeight t 0 0 >/dev/null
check "a transient top-level slice with CPUWeight=idle starts" wait_for systemctl is-active --quiet "$BGSLICE"
bcg=$(systemctl show -p ControlGroup --value "$BGSLICE")
check "with its dash escaped, it is at the top ($bcg)" test "$bcg" = "/$BGSLICE"
check "systemctl show says CPUWeight=idle" test "$(systemctl show -p CPUWeight --value "$BGSLICE")" = idle
check "its cpu.idle is 1" test "$(cat "$CG$bcg/cpu.idle")" = 1
setsid sleep infinity </dev/null >/dev/null 2>&1 &
bhpid=$!
"${SD[@]}" StartTransientUnit 'ssa(sv)a(sa(sv))' "$BGSCOPE" fail 3 Slice s "$BGSLICE" \
  DelegateControllers as 1 cpu PIDs au 1 "$bhpid" 0 >/dev/null
wait_for systemctl is-active --quiet "$BGSCOPE"
B=$CG$(systemctl show -p ControlGroup --value "$BGSCOPE")
mkdir "$B/.holder" && echo "$bhpid" > "$B/.holder/cgroup.procs" && echo +cpu > "$B/cgroup.subtree_control"
mkdir -p "$B/user-2001/j3" && echo +cpu > "$B/user-2001/cgroup.subtree_control" && echo 200 > "$B/user-2001/j3/cpu.weight"
check "the background scope holds a currency dir and a job leaf with cpu" test "$(cat "$B/user-2001/j3/cpu.weight")" = 200
out=$("${SD[@]}" StartTransientUnit 'ssa(sv)a(sa(sv))' 'allot-t@x.scope' fail 1 PIDs au 1 "$bhpid" 0 2>&1) && rc=0 || rc=$?
check "a transient scope named with '@' is refused (why allot's scopes use ':'): $out" test "$rc" = 1

# ---- nothing of it moves on daemon-reload or daemon-reexec
inside() {
  echo "scope $(systemctl is-active "$SCOPE") $(systemctl is-active "$BGSCOPE") $(systemctl is-active "$BGSLICE")"
  echo "subtree $(cat "$S/cgroup.subtree_control") / $(cat "$B/cgroup.subtree_control") / $(cat "$B/user-2001/cgroup.subtree_control")"
  echo "holders $(cat "$S/.holder/cgroup.procs") $(cat "$B/.holder/cgroup.procs")"
  echo "j1 $(cat "$S/j1/cpu.weight") $(cat "$S/j1/cgroup.procs")"
  echo "j2 $(cat "$S/j2/cpu.max")"
  echo "bg $(cat "$B/user-2001/j3/cpu.weight") idle $(cat "$CG$bcg/cpu.idle") $(systemctl show -p CPUWeight --value "$BGSLICE")"
  echo "funding $(systemctl show -p CPUWeight --value user-2001.slice) $(cat $CG/user.slice/user-2001.slice/cpu.weight)"
}
inside > "$after.inside0"
systemctl daemon-reload
inside > "$after.inside1"
check "daemon-reload leaves scopes, holders, knobs, processes, funding and idle as they were" same "$after.inside0" "$after.inside1"
systemctl daemon-reexec
systemctl is-active --quiet "$SCOPE" || sleep 1
inside > "$after.inside2"
check "daemon-reexec leaves them as they were too" same "$after.inside0" "$after.inside2"
diff "$after.inside0" "$after.inside2" >&2 || true

# ---- clean up: the units go, the funding is unset, the rest is as before
kill "$spid" "$spid2" 2>/dev/null || true
for u in "$SCOPE" "$BGSCOPE" "$BGSLICE"; do systemctl stop "$u"; done
"${SD[@]}" SetUnitProperties 'sba(sv)' user-2001.slice true 1 CPUWeight t 18446744073709551615
check "the funding is unset again" test "$(systemctl show -p CPUWeight --value user-2001.slice)" = "[not set]"
check "stopping the scopes ended their holders" bash -c "! kill -0 $hpid 2>/dev/null && ! kill -0 $bhpid 2>/dev/null"
check "the scopes' cgroups are gone" bash -c "[ ! -e '$S' ] && [ ! -e '$B' ] && [ ! -e '$CG$bcg' ]"
# A new session keeps user-2001.slice (and its knobs) alive while we compare.
keep=$(login_session allot-ta sleep 1000)
snap > "$after"; slice_knobs > "$after.slice"
check "every cgroup outside allot's units is byte-identical before and after" same "$before" "$after"
diff "$before" "$after" >&2 || true
check "user-2001.slice's own knobs are as before" same "$before.slice" "$after.slice"
kill "$keep" 2>/dev/null || true
checks_done
