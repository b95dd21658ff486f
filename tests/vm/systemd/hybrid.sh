#!/bin/bash
# allot on a systemd host whose cgroups are v1 or hybrid (the Ubuntu 20.04 and RHEL 8
# layouts), run inside the systemd VM booted with `run.sh --cgroup hybrid` (or v1):
#   tests/vm/systemd/run.sh --cgroup hybrid --file "$DEB:/root/allot.deb" \
#     --script tests/vm/systemd/hybrid.sh
# There systemd owns every hierarchy, and allot has no way yet to work through systemd's
# API on v1 units (docs/systemd.md): the daemon refuses to start, with one error that
# names why and what to do, and writes nothing. Asserts: the layout is what was asked; the
# installed service fails with that error; `allot daemon` run by hand says the same; no
# cgroup of allot's exists in any hierarchy; every cgroup of every hierarchy (cpu knobs
# included) is byte-identical before the install and after the purge.
set -euo pipefail
. "$ALLOT_VM_LIB"
A=/usr/bin/allot
MSG="not a cgroup2 mount"

# Every cgroup directory of every mounted hierarchy, with its cpu knobs; the test's own
# service is left out (it runs this script).
snap() {
  local m d f
  for m in $(awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/mounts | sort -u); do
    find "$m" -type d -not -path '*allot-vm-test.service*' | sort | while read -r d; do
      echo "$d"
      for f in cpu.shares cpu.cfs_quota_us cpu.cfs_period_us cpu.weight cpu.max cpu.idle cgroup.subtree_control; do
        if [ -e "$d/$f" ]; then printf '  %s %s\n' "$f" "$(tr '\n' ' ' < "$d/$f" 2> /dev/null || echo '?')"; fi
      done
    done
  done
}

layout=$(stat -fc %T /sys/fs/cgroup)
echo "cgroup layout: /sys/fs/cgroup is $layout; mounts: $(awk '$3 ~ /^cgroup/ { print $2 }' /proc/mounts | tr '\n' ' ')" >&2
check "/sys/fs/cgroup is not cgroup2 (v1 or hybrid, as booted)" test "$layout" != cgroup2fs
check "a v1 cpu hierarchy is mounted" sh -c "awk '\$3 == \"cgroup\" && \$4 ~ /(^|,)cpu(,|$)/' /proc/mounts | grep -q ."
snap > /tmp/before

dpkg -i /root/allot.deb > /tmp/dpkg.log 2>&1 || true
sleep 2
check "the package is installed" sh -c "dpkg -s allot | grep -q 'Status: install ok installed'"
check "allot.service did not start" sh -c '! systemctl is-active --quiet allot'
check "its journal names why (\"$MSG\")" wait_for -t 20 sh -c "journalctl -b -u allot --no-pager | grep -q '$MSG'"
journalctl -b -u allot --no-pager | grep -m1 "$MSG" >&2 || true
set +e
out=$($A daemon 2>&1); rc=$?
set -e
echo "allot daemon by hand: exit $rc: $out" >&2
check "allot daemon by hand refuses, exit non-zero, naming why" sh -c "[ $rc -ne 0 ] && printf '%s' \"\$1\" | grep -q '$MSG'" _ "$out"
check "no cgroup of allot's in any hierarchy" sh -c "! find \$(awk '\$3 ~ /^cgroup/ { print \$2 }' /proc/mounts) -type d -name 'allot*' -not -name 'allot.service' -not -path '*allot-vm-test*' | grep -q ."
check "dpkg --purge removes it" dpkg --purge allot
sleep 1
snap > /tmp/after
check "every cgroup of every hierarchy is byte-identical" diff -u /tmp/before /tmp/after
checks_done
