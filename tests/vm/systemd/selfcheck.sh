#!/bin/bash
# Self-check of the systemd VM harness, and an example test script:
#   bash tests/vm/systemd/run.sh --script tests/vm/systemd/selfcheck.sh
# Runs inside the guest as root. Prints "ok"/"FAIL" lines and facts ("#" lines) on
# stdout; exits 1 if any check failed.
set -euo pipefail
# shellcheck source=tests/vm/systemd/guest-lib.sh
. "$ALLOT_VM_LIB"

T0=$(vm_uptime)
echo "# boot to script: ${ALLOT_VM_BOOT_UPTIME}s (guest uptime when the runner saw the boot complete)"
echo "# kernel $(uname -r); $(systemctl --version | head -n1); $(nproc) CPUs"
kv=$(uname -r); kv=${kv%%[-+]*}
check "kernel $kv is 6.12 or newer (EEVDF slices, SO_PEERPIDFD)" \
  bash -c "printf '6.12\n%s\n' '$kv' | sort -V -C"
check "test tools: python3, cyclictest, loginctl, systemd-run" \
  bash -c 'for t in python3 cyclictest loginctl systemd-run; do command -v $t >/dev/null || exit 1; done'

# ---- PID 1
pid1=$(readlink /proc/1/exe)
echo "# PID 1: $pid1 ($(cat /proc/1/comm))"
check "PID 1 is systemd" test "$(cat /proc/1/comm)" = systemd -a "${pid1##*/}" = systemd

# ---- cgroup v2 only
check "/sys/fs/cgroup is cgroup2" test "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs
check "no cgroup v1 hierarchy is mounted" test "$(awk '$3 == "cgroup"' /proc/mounts | wc -l)" = 0
check "cpu controller is available at the root" grep -qw cpu /sys/fs/cgroup/cgroup.controllers
echo "# root cgroup.subtree_control at start: $(cat /sys/fs/cgroup/cgroup.subtree_control)"

# ---- the boot
state=$(systemctl is-system-running || true)
failed=$(systemctl --failed --no-legend --plain | cut -d' ' -f1 | tr '\n' ' ')
echo "# system state: $state${failed:+; failed units: $failed}"
check "systemctl is-system-running is running or degraded" \
  test "$state" = running -o "$state" = degraded

# ---- the script's own cgroup
own=$(cgroup_of $$)
echo "# this script runs in cgroup $own"
check "the script runs in system.slice/allot-vm-test.service" test "$own" = system.slice/allot-vm-test.service

# ---- a real logind session for allot-ta
t=$(vm_uptime)
pid=$(login_session allot-ta sleep 600)
echo "# login_session took $(awk -v a="$t" -v b="$(vm_uptime)" 'BEGIN{printf "%.1f", b-a}')s (starts user@2001.service)"
sid=$(session_of "$pid")
echo "# allot-ta's sleep: pid $pid, cgroup $(cgroup_of "$pid"), session $sid"
check "the session's process is in user-2001.slice/session-$sid.scope" \
  test "$(cgroup_of "$pid")" = "user.slice/user-2001.slice/session-$sid.scope"
check "loginctl list-sessions lists allot-ta's session $sid" \
  bash -c "loginctl list-sessions --no-legend | awk '\$1 == \"$sid\" && \$3 == \"allot-ta\"' | grep -q ."
info=$(loginctl show-session "$sid" -p Class -p Type -p State -p Scope -p Service -p Leader | tr '\n' ' ')
echo "# session $sid: $info"
check "the session is active, class user" \
  test "$(loginctl show-session "$sid" -p Class --value)/$(loginctl show-session "$sid" -p State --value)" = user/active
check "the session's leader (su) is in the same scope" \
  test "$(cgroup_of "$(loginctl show-session "$sid" -p Leader --value)")" = "user.slice/user-2001.slice/session-$sid.scope"
check "user@2001.service is running" systemctl is-active --quiet user@2001.service
check "cpu is enabled for user slices (root, user.slice, user-2001.slice subtree_control)" \
  bash -c 'for d in /sys/fs/cgroup /sys/fs/cgroup/user.slice /sys/fs/cgroup/user.slice/user-2001.slice; do grep -qw cpu $d/cgroup.subtree_control || exit 1; done'
echo "# root cgroup.subtree_control now: $(cat /sys/fs/cgroup/cgroup.subtree_control)"

# ---- a second session of the other user, run to completion
out=$(in_session allot-tb bash -c 'echo "$(id -un) $(cat /proc/self/cgroup)"')
echo "# in_session allot-tb: $out"
tb_in_session() { [[ $out == "allot-tb 0::/user.slice/user-2002.slice/session-"*.scope ]]; }
check "in_session runs allot-tb in user-2002.slice/session-*.scope" tb_in_session

# ---- slices via systemd
w=$(systemctl show user-2001.slice -p CPUWeight)
echo "# systemctl show user-2001.slice -p CPUWeight: $w"
check "systemctl show user-2001.slice -p CPUWeight works" test "$w" = "CPUWeight=[not set]"
before=$(mktemp); after=$(mktemp)
cgroup_snapshot 'user.slice/user-2001.slice' 'user.slice/user-2002.slice' > "$before"
echo "# cgroup_snapshot: $(wc -l < "$before") lines, e.g. $(grep -m1 '^user.slice cpu.weight' "$before")"
systemctl set-property --runtime user-2001.slice CPUWeight=300
check "CPUWeight=300 on user-2001.slice reaches cpu.weight" \
  test "$(cat /sys/fs/cgroup/user.slice/user-2001.slice/cpu.weight)" = 300
cgroup_snapshot 'user.slice/user-2001.slice' 'user.slice/user-2002.slice' > "$after"
check "nothing outside user-2001.slice changed (cgroup_snapshot before = after)" same "$before" "$after"
cgroup_snapshot > "$after"
check "cgroup_snapshot without exclusions sees the change" \
  grep -qx 'user.slice/user-2001.slice cpu.weight 300' "$after"
systemctl set-property --runtime user-2001.slice CPUWeight=
rm -f "$before" "$after"

# ---- the session ends with its process
kill "$pid"
check "allot-ta's session goes away when its process ends" \
  wait_for -t 60 bash -c "! loginctl list-sessions --no-legend | awk '{print \$1}' | grep -qx '$sid'"

echo "# the checks took $(awk -v a="$T0" -v b="$(vm_uptime)" 'BEGIN{printf "%.1f", b-a}')s"
checks_done
