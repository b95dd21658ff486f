#!/bin/bash
# allot installed as a service on a systemd host (issue: part 7), run inside the systemd VM:
#   tests/vm/systemd/run.sh --allot target/release/allot \
#     --file target/release/allot:/usr/bin/allot \
#     --file packaging/systemd/allot.service:/etc/systemd/system/ \
#     --script tests/vm/systemd/allot.sh
# Asserts: the service starts (Type=notify); enforcement as the selftest measures it
# (ratio, insulation, hard cap, background) in systemd mode; boosted latency below the
# latency without allot; funding is the user slice's CPUWeight; `allot run` in a login
# session leaves the session whole; a delegated service of a uid >= 1000 (a stand-in
# container) is never touched; daemon-reload and a restart keep every job, setting and
# process; the root's subtree_control and every cgroup outside allot's units are
# byte-identical before and after.
set -euo pipefail
. "$ALLOT_VM_LIB"
A=/usr/bin/allot

# Logins first: they switch the cpu controller on along user.slice (systemd does so when
# the first user@.service starts), so the "before" snapshot sees the steady tree.
pa=$(login_session allot-ta sleep 3000)
pb=$(login_session allot-tb sleep 3000)
sa=$(session_of "$pa")
EXCL=('*allot*' 'user.slice/user-*.slice/session-*.scope' 'user.slice/user-*.slice/user@*.service' 'system.slice/allot-vm-test.service' 'system.slice/allot.service' 'system.slice/fake-container.service')
cgroup_snapshot "${EXCL[@]}" > /tmp/before
cp /sys/fs/cgroup/cgroup.subtree_control /tmp/root-before

systemctl daemon-reload
systemctl enable --now allot
check "allot.service is active (READY=1 came)" systemctl is-active --quiet allot
check "status: systemd owns the tree" sh -c "$A status | grep -q \"systemd's\""
$A status >&2

# Enforcement, measured by the selftest's private daemon (in systemd mode too).
check "selftest: ratio, insulation, hard cap, background" $A selftest --window 5
check "latency: boosted below no allot" $A bench policy latency --quick --check

# Funding is the user slice's CPUWeight, visible to systemctl.
check "fund allot-ta 300" $A fund allot-ta 300
check "user-2001.slice CPUWeight=300" wait_for -t 10 sh -c 'systemctl show user-2001.slice -p CPUWeight | grep -qx CPUWeight=300'

# allot run inside a login session: the job leaves the session scope through systemd; the
# session keeps its leader.
job=$(login_session allot-ta "$A" run -t 300 -- sleep 3000)
check "the job is in allot's scope in allot-ta's slice" sh -c "cgroup_of() { grep -m1 '^0::' /proc/\$1/cgroup; }; cgroup_of $job | grep -q 'user-2001.slice/allot:user-2001.scope/j'"
check "the login session is still there, with its own process" sh -c "loginctl session-status $sa | grep -q 'sleep 3000'"
check "allot-ta's job has 300 tickets" sh -c "$A --json show | grep -q '\"tickets\": 300'"

# A stand-in container: a delegated service running as a uid >= 1000.
systemd-run --quiet --unit=fake-container -p Delegate=yes -p User=allot-tb sleep 3000
cpid=$(systemctl show -p MainPID --value fake-container)
cg0=$(cgroup_of "$cpid")
sleep 3
check "a delegated service's process is never placed" test "$(cgroup_of "$cpid")" = "$cg0"
check "its owner cannot take it out" sh -c "! su allot-tb -s /bin/sh -c '$A set $cpid -t 5'"

# daemon-reload and a restart: every job, setting and process stays.
key() { $A --json show | python3 -c 'import json,sys; v=json.load(sys.stdin); print(sorted((j["id"],j["tickets"],j["cap"],j["background"],tuple(sorted(j["pids"] or []))) for j in v["jobs"]))'; }
k1=$(key)
systemctl daemon-reload
check "after daemon-reload: same jobs" test "$(key)" = "$k1"
systemctl restart allot
wait_for -t 60 systemctl is-active --quiet allot
check "after restart: same jobs, settings, processes" test "$(key)" = "$k1"
check "after restart: funding kept" sh -c 'systemctl show user-2001.slice -p CPUWeight | grep -qx CPUWeight=300'

# Leave it as found: funding back, the stand-in container and the job gone, allot stopped.
$A fund allot-ta 100
systemctl stop fake-container
kill "$job" || true
systemctl stop allot
sleep 1
cgroup_snapshot "${EXCL[@]}" > /tmp/after
check "every cgroup outside allot's units is byte-identical" diff -u /tmp/before /tmp/after
check "the root's subtree_control is byte-identical" cmp /tmp/root-before /sys/fs/cgroup/cgroup.subtree_control
kill "$pa" "$pb" || true
checks_done
