#!/bin/bash
# allot's .deb on an older systemd: run inside the systemd VM with Debian 11's userspace
# (systemd 247, glibc 2.31; the kernel is the usual 6.12, cgroup v2 only):
#   DEB=$(bash packaging/deb/build.sh)      # packaging/binary.sh's binary: glibc 2.28
#   tests/vm/systemd/run.sh --suite bullseye --file "$DEB:/root/allot.deb" \
#     --script tests/vm/systemd/oldsd.sh
# Asserts: the guest is what was asked (systemd 247, glibc older than 2.34, cgroup2); the
# package installs with its dependencies met and the service starts; jobs of 300 and 100
# tickets divide one CPU 0.75 / 0.25; a hard cap of 0.3! holds; the background slice has
# CPUWeight=1 (systemd before 252 has no CPUWeight=idle: docs/systemd.md) and a
# background job yields to a foreground one and runs alone; `allot fund` gives a
# logged-in user's slice CPUWeight=300; after the purge that slice's CPUWeight= is what it
# was, every cgroup that was there is byte-identical and the root's subtree_control too.
set -euo pipefail
. "$ALLOT_VM_LIB"
A=/usr/bin/allot
CG=/sys/fs/cgroup

sdv=$(systemctl --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p')
glibc=$(getconf GNU_LIBC_VERSION | cut -d' ' -f2)
echo "guest: $(. /etc/os-release && echo "$PRETTY_NAME"); systemd $sdv; glibc $glibc; kernel $(uname -r); /sys/fs/cgroup is $(stat -fc %T $CG)" >&2
check "systemd is older than 252 (247 on Debian 11)" test "${sdv:-999}" -lt 252
check "glibc is older than 2.34 (the host build's need)" sh -c "[ \"\$(printf '%s\n2.34\n' '$glibc' | sort -V | head -n1)\" = '$glibc' ] && [ '$glibc' != 2.34 ]"
check "/sys/fs/cgroup is cgroup2" test "$(stat -fc %T $CG)" = cgroup2fs

# Logins first: they switch the cpu controller on along user.slice, so the "before"
# snapshot sees the steady tree (as tests/vm/systemd/allot.sh does).
pa=$(login_session allot-ta sleep 3000)
EXCL=('user.slice/user-*.slice/session-*.scope' 'user.slice/user-*.slice/user@*.service' 'system.slice/allot-vm-test.service')
cgroup_snapshot "${EXCL[@]}" > /tmp/before
cp $CG/cgroup.subtree_control /tmp/root-before
w_before=$(systemctl show user-2001.slice -p CPUWeight --value)

dpkg -i /root/allot.deb > /tmp/dpkg.log 2>&1 || true
cat /tmp/dpkg.log >&2
check "dpkg -i installs the package, its dependencies met" sh -c "dpkg -s allot | grep -q 'Status: install ok installed'"
dpkg-deb -f /root/allot.deb Depends >&2
check "allot.service is active" wait_for -t 60 systemctl is-active --quiet allot
check "the binary runs on this glibc" $A --version
journalctl -b -u allot --no-pager | tail -n 15 >&2 || true
$A status > /tmp/status 2>&1 || true
cat /tmp/status >&2
check "status: systemd owns the tree" grep -q "systemd's" /tmp/status

# cpus, near, loop, pid_of and stop_pids are guest-lib.sh's.
cg() { sed -n 's/^0:://p' "/proc/$1/cgroup"; }

# Tickets 3:1 on one CPU (this script runs in a service of its own: --force lets root's
# jobs leave it).
rm -f /tmp/j1 /tmp/j2
$A run --force -t 300 -- bash -c "loop /tmp/j1" &
$A run --force -t 100 -- bash -c "loop /tmp/j2" &
wait_for -t 30 sh -c 'test -s /tmp/j1 && test -s /tmp/j2'
j1=$(pid_of /tmp/j1); j2=$(pid_of /tmp/j2)
wait_for -t 30 sh -c "grep -q 'allot:user-0.scope/j' /proc/$j1/cgroup && grep -q 'allot:user-0.scope/j' /proc/$j2/cgroup" || true
# `under PREFIX PATH...`: every PATH starts with PREFIX.
under() { local p=$1 x; shift; for x in "$@"; do [[ $x == "$p"* ]] || return 1; done; }
check "the jobs are in job cgroups of allot's scope" under /user.slice/user-0.slice/allot:user-0.scope/j "$(cg "$j1")" "$(cg "$j2")"
sleep 3
r=$(cpus 10 t300=/tmp/j1 t100=/tmp/j2)
share=$(python3 -c "v = dict(x.split('=') for x in '$r'.split()); a, b = float(v['t300']), float(v['t100']); print(f'{a / (a + b):.3f}')")
echo "one CPU between jobs of 300 and 100 tickets: $r; the 300's share $share (cpu.weight $(cat "$CG$(cg "$j1")/cpu.weight") / $(cat "$CG$(cg "$j2")/cpu.weight"))" >&2
check "jobs of 300 and 100 tickets divide one CPU 0.75 / 0.25 (+-0.03)" near "s=$share" s 0.75 0.03
stop_pids /tmp/j2

# A hard cap: 0.3 CPU held on a CPU nobody else wants (cpu.max in the job's cgroup).
$A set "$j1" --cap '0.3!' >&2 || true
sleep 3
echo "capped job: cpu.max $(cat "$CG$(cg "$j1")/cpu.max")" >&2
r=$(cpus 8 capped=/tmp/j1)
echo "a job capped at 0.3! alone on CPU 1: $r" >&2
check "a hard cap of 0.3! holds it at 0.3 CPU (+-0.03)" near "$r" capped 0.3 0.03
$A set "$j1" --cap none >&2 || true

# Background before systemd 252: the top-level background slice gets CPUWeight=1, the
# smallest weight, against user.slice's 100 (no cpu.idle).
rm -f /tmp/bg
$A run --force --background -- bash -c "loop /tmp/bg" &
wait_for -t 60 test -s /tmp/bg || journalctl -b -u allot --no-pager | tail -n 30 >&2
bg=$(pid_of /tmp/bg)
wait_for -t 30 sh -c "grep -q 'allot:background.scope' /proc/$bg/cgroup" || true
echo "background job in $(cg "$bg"); allot_background.slice: CPUWeight=$(systemctl show allot_background.slice -p CPUWeight --value), cpu.weight $(cat $CG/allot_background.slice/cpu.weight 2> /dev/null), cpu.idle $(cat $CG/allot_background.slice/cpu.idle 2> /dev/null)" >&2
check "the background job is in the background scope" under /allot_background.slice/allot:background.scope/ "$(cg "$bg")"
check "the background slice has CPUWeight=1 (cpu.weight 1, cpu.idle 0)" sh -c "[ \"\$(systemctl show allot_background.slice -p CPUWeight --value)\" = 1 ] && [ \"\$(cat $CG/allot_background.slice/cpu.weight)\" = 1 ] && [ \"\$(cat $CG/allot_background.slice/cpu.idle)\" = 0 ]"
sleep 2
r=$(cpus 8 fg=/tmp/j1 bg=/tmp/bg)
echo "a foreground job and a background job on CPU 1: $r" >&2
check "the background job keeps <= 0.05 CPU beside a foreground job" near "$r" bg 0 0.05
stop_pids /tmp/j1
sleep 2
r=$(cpus 6 bg=/tmp/bg)
echo "the background job alone on CPU 1: $r" >&2
check "alone, the background job runs (>= 0.8 CPU)" near "$r" bg 1 0.2
stop_pids /tmp/bg

# Funding a logged-in user's slice through systemd.
check "allot fund allot-ta 300" $A fund allot-ta 300
check "user-2001.slice has CPUWeight=300 (cpu.weight 300)" wait_for -t 10 sh -c "[ \"\$(systemctl show user-2001.slice -p CPUWeight --value)\" = 300 ] && [ \"\$(cat $CG/user.slice/user-2001.slice/cpu.weight)\" = 300 ]"
$A status > /tmp/status 2>&1 || true
cat /tmp/status >&2
check "status: no failed writes" grep -q ' 0 failed writes' /tmp/status
wait 2> /dev/null || true

# Leave it as found: the funding back to the default, then the package purged.
$A fund allot-ta 100 >&2
check "dpkg --purge removes it" dpkg --purge allot
check "no unit of allot's is left" wait_for -t 20 sh -c "! systemctl list-units --all --plain --no-legend 'allot:*' 'allot_*' | grep -q ."
sleep 1
cgroup_snapshot "${EXCL[@]}" > /tmp/after
echo "after the purge: $(diff /tmp/before /tmp/after | grep -c '^[<>]') snapshot lines differ; root's subtree_control: $(cat $CG/cgroup.subtree_control)" >&2
# The funding allot gave allot-ta's slice (a user with no job, so no scope of allot's
# whose removal unsets it) is a runtime CPUWeight= that --release does not take back;
# while it is set, systemd keeps the cpu controller on from the root down to it.
w_after=$(systemctl show user-2001.slice -p CPUWeight --value)
check "after the purge allot-ta's slice has the CPUWeight= it had before ($w_before; now $w_after)" test "$w_after" = "$w_before"
[ "$w_after" = "$w_before" ] || systemctl set-property --runtime user-2001.slice CPUWeight= >&2 || true
sleep 1
cgroup_snapshot "${EXCL[@]}" > /tmp/after2
diff /tmp/before /tmp/after2 >&2 || true
# Every cgroup that was there before is byte-identical; systemd 247 leaves a cgroup for
# each unit it realized while the cpu controller was on (finished services, mounts),
# and those hold no cpu file.
python3 - /tmp/before /tmp/after2 > /tmp/snapdiff <<'PY'
import sys
def parse(f):
    d = {}
    for l in open(f):
        cg, rest = l.rstrip("\n").split(" ", 1)
        d.setdefault(cg, []).append(rest)
    return d
b, a = parse(sys.argv[1]), parse(sys.argv[2])
for k in sorted(b):
    if k not in a: print(f"gone: {k}")
    elif a[k] != b[k]: print(f"changed: {k}: {b[k]} -> {a[k]}")
new = [k for k in sorted(a) if k not in b]
for k in new:
    odd = [x for x in a[k] if x not in ("cgroup.subtree_control ", "cpu.weight -", "cpu.max -", "cpu.max.burst -", "cpu.idle -")]
    if odd: print(f"new, with cpu files: {k}: {odd}")
print(f"# {len(b)} cgroups before, all byte-identical after; {len(new)} new (systemd's, no cpu file): {' '.join(new)}", file=sys.stderr)
PY
cat /tmp/snapdiff >&2
check "every cgroup that was there is byte-identical; the new ones (systemd's) hold no cpu file" test ! -s /tmp/snapdiff
check "the root's subtree_control is byte-identical" same /tmp/root-before $CG/cgroup.subtree_control
# Printed, not checked: the binary a plain `cargo build --release` makes on Debian 12,
# when given (--file target/release/allot:/root/allot-host).
if [ -x /root/allot-host ]; then
  echo "the host build's binary here: $(/root/allot-host --version 2>&1 | head -n 2 | tr '\n' ' ')" >&2
fi
kill "$pa" 2> /dev/null || true
checks_done
