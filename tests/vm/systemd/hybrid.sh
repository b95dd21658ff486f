#!/bin/bash
# allot on a systemd host whose cgroups are v1 or hybrid (the Ubuntu 20.04 and RHEL 8
# layouts), run inside the systemd VM booted with `run.sh --cgroup hybrid` (or v1):
#   tests/vm/systemd/run.sh --cgroup hybrid --file "$DEB:/root/allot.deb" \
#     --file tests/vm/systemd/sessions.sh:/root/sessions.sh --script tests/vm/systemd/hybrid.sh
# (`--cgroup v1` runs the same checks: there the plan reads a login session's load from
# its threads, systemd's name=systemd hierarchy keeping none.)
# There systemd owns every hierarchy, and allot works through systemd's API as on cgroup
# v2 (docs/systemd.md, hybrid and v1 hosts): its scopes (Delegate=cpu) and slices exist in
# the v1 cpu,cpuacct hierarchy, its jobs are directories inside its scopes there, a
# currency's funding is its slice's CPUWeight= (systemd writes cpu.shares). Asserts: the
# layout is what was asked; the installed service starts; an `allot run` job lands in
# allot's scope in the cpu hierarchy with its tickets as cpu.shares; jobs of 300 and 100
# tickets divide a CPU 0.75 / 0.25; a hard cap holds; a background job yields and runs
# alone; a job from a login session is placed, and the plan sees the session;
# logout ends a session's allot jobs as on v2 (sessions.sh's logout_checks), leaving no
# cgroup of the user's behind; `allot fund` reaches a user's slice; no tree of allot's own is at the root of any
# hierarchy; after the purge every cgroup outside allot's units that was there before
# (cpu knobs included) is byte-identical, and the ones systemd made meanwhile hold the
# kernel's defaults.
set -euo pipefail
. "$ALLOT_VM_LIB"
A=/usr/bin/allot
CPU=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/ { print $2; exit }' /proc/mounts)

# Every cgroup directory of every mounted hierarchy, with its cpu knobs, except allot's
# own units (its scopes allot:*, its slices allot_*, its service) and the test's service
# (it runs this script). Sessions that come and go are new cgroups: only the ones still
# there after must hold the kernel's defaults.
snap() {
  local m d f
  for m in $(awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/mounts | sort -u); do
    find "$m" -type d -not -path '*allot-vm-test.service*' -not -path '*/allot:*' -not -path '*/allot_*' -not -path '*/allot.service*' | sort | while read -r d; do
      echo "$d"
      for f in cpu.shares cpu.cfs_quota_us cpu.cfs_period_us cpu.rt_runtime_us cpu.weight cpu.max cpu.idle cgroup.subtree_control; do
        if [ -e "$d/$f" ]; then printf '  %s %s\n' "$f" "$(tr '\n' ' ' < "$d/$f" 2> /dev/null || echo '?')"; fi
      done
    done
  done
}

layout=$(stat -fc %T /sys/fs/cgroup)
echo "cgroup layout: /sys/fs/cgroup is $layout; cpu hierarchy $CPU; mounts: $(awk '$3 ~ /^cgroup/ { print $2 }' /proc/mounts | tr '\n' ' ')" >&2
check "/sys/fs/cgroup is not cgroup2 (v1 or hybrid, as booted)" test "$layout" != cgroup2fs
check "a v1 cpu hierarchy is mounted" test -n "$CPU"
# allot-ta logged in before anything is installed (their slice exists throughout).
sess=$(login_session allot-ta sleep 100000)
snap > /tmp/before

dpkg -i /root/allot.deb > /tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log >&2; }
check "the package is installed" sh -c "dpkg -s allot | grep -q 'Status: install ok installed'"
check "allot.service is active" wait_for -t 60 systemctl is-active --quiet allot
journalctl -b -u allot --no-pager | tail -n 20 >&2 || true
$A status >&2 || true
check "status: systemd owns the tree, cgroup v1" sh -c "$A status | grep -q \"systemd's\" && $A --json status | grep -q '\"cgroup_version\": \"v1\"'"

# cpus, near, loop, pid_of and stop_pids are guest-lib.sh's.
# The cpu hierarchy's cgroup of a pid.
cpu_cg() { sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}cpu\(,[^:]*\)\{0,1\}://p' "/proc/$1/cgroup"; }

# One job: in a job directory of allot's scope in root's slice, in the cpu hierarchy
# (this script runs in a service of its own: --force lets root's job leave it).
rm -f /tmp/j1
$A run --force -t 300 -- bash -c "loop /tmp/j1" &
wait_for -t 30 test -s /tmp/j1
j1=$(pid_of /tmp/j1)
wait_for -t 30 sh -c "grep -q 'allot:user-0.scope/j' /proc/$j1/cgroup" || true
grep . /proc/"$j1"/cgroup >&2
jcg=$(cpu_cg "$j1")
check "the job is in a job directory of allot's scope in the cpu hierarchy" sh -c "echo '$jcg' | grep -q '^/user.slice/user-0.slice/allot:user-0.scope/j'"
check "its tickets are its cpu.shares (300 -> 3072), written by allot" sh -c "[ \"\$(cat '$CPU$jcg/cpu.shares')\" = 3072 ]"
check "systemd tracks it in allot's scope" sh -c "systemctl status $j1 --no-pager | grep -q 'allot:user-0.scope'"
check "allot show lists it with 300 tickets" sh -c "$A --json show | grep -q '\"tickets\": 300'"

# Tickets 3:1 on one CPU: a second job of 100 tickets beside it.
rm -f /tmp/j2
$A run --force -t 100 -- bash -c "loop /tmp/j2" &
wait_for -t 30 test -s /tmp/j2
j2=$(pid_of /tmp/j2)
wait_for -t 30 sh -c "grep -q 'allot:user-0.scope/j' /proc/$j2/cgroup" || true
sleep 3
r=$(cpus 10 t300=/tmp/j1 t100=/tmp/j2)
share=$(python3 -c "v = dict(x.split('=') for x in '$r'.split()); a, b = float(v['t300']), float(v['t100']); print(f'{a / (a + b):.3f}')")
echo "one CPU between jobs of 300 and 100 tickets: $r; the 300's share $share (cpu.shares $(cat "$CPU$(cpu_cg "$j1")/cpu.shares") / $(cat "$CPU$(cpu_cg "$j2")/cpu.shares"))" >&2
check "jobs of 300 and 100 tickets divide one CPU 0.75 / 0.25 (+-0.03)" near "s=$share" s 0.75 0.03
stop_pids /tmp/j2

# A hard cap: 0.3 CPU held on a CPU nobody else wants (cfs quota in the job's directory).
$A set "$j1" --cap '0.3!' >&2 || true
sleep 3
jcg=$(cpu_cg "$j1")
echo "capped job: cpu.cfs_quota_us $(cat "$CPU$jcg/cpu.cfs_quota_us") per $(cat "$CPU$jcg/cpu.cfs_period_us")" >&2
r=$(cpus 8 capped=/tmp/j1)
echo "a job capped at 0.3! alone on CPU 1: $r" >&2
check "a hard cap of 0.3! holds it at 0.3 CPU (+-0.03)" near "$r" capped 0.3 0.03
$A set "$j1" --cap none >&2 || true

# Background: the background slice weighs the smallest cpu.shares (2, what systemd makes
# of CPUWeight=idle on v1), so a background job yields to a foreground one on its CPU.
rm -f /tmp/bg
$A run --force --background -- bash -c "loop /tmp/bg" &
wait_for -t 60 test -s /tmp/bg || { journalctl -b -u allot --no-pager | tail -n 30 >&2; systemctl status --no-pager allot_background.slice 'allot:background.scope' >&2 || true; }
bg=$(pid_of /tmp/bg)
wait_for -t 30 sh -c "grep -q 'allot:background.scope' /proc/$bg/cgroup" || true
bgcg=$(cpu_cg "$bg")
echo "background job in $bgcg; allot_background.slice cpu.shares $(cat "$CPU/allot_background.slice/cpu.shares" 2> /dev/null)" >&2
check "the background job is in the background scope" sh -c "echo '$bgcg' | grep -q '^/allot_background.slice/allot:background.scope/'"
check "the background slice has cpu.shares 2 (CPUWeight=idle on v1)" sh -c "[ \"\$(cat $CPU/allot_background.slice/cpu.shares)\" = 2 ]"
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

# The plan sees login sessions (read in systemd's own hierarchy, where each session has
# its scope: their cpu.stat on hybrid, their threads' schedstat on v1): allot-ta's session hog against allot-tb's `allot run` job of 4 hogs on 2
# CPUs. allot-tb's CPU-bound job is entitled to 1 CPU of 2, never more, so it is never
# boosted. allot-ta's share is printed, not checked (tests/vm/systemd/sessions.sh checks it
# on v2, in a phase where the checker starts no process: one thread against four unpinned
# ones in a slice of the same weight can get less than half).
rm -f /tmp/ahog /tmp/bjob.pids
printf '#!/bin/sh\nfor i in 1 2 3 4; do sh -c '"'"'echo $$ >> /tmp/bjob.pids; while :; do :; done'"'"' & done\nwait\n' > /tmp/bjob.sh
chmod 0755 /tmp/bjob.sh
ahog_sess=$(login_session allot-ta sh -c 'echo $$ > /tmp/ahog; while :; do :; done') || ahog_sess=0
bsess=$(login_session allot-tb sh -c "$A run -- /tmp/bjob.sh & wait") || bsess=0
tail -n 5 /var/log/allot-vm/session-allot-tb.log >&2 || true
wait_for -t 30 sh -c 'test -s /tmp/ahog && [ "$(wc -l < /tmp/bjob.pids)" = 4 ]' || true
sleep 4
r=$(python3 - <<'PY'
import json, subprocess, time
pids = [int(open("/tmp/ahog").read())] + [int(x) for x in open("/tmp/bjob.pids").read().split()]
def cpu(p):
    f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])
a = [cpu(p) for p in pids]
boosted, samples, ent = 0, 0, []
for _ in range(12):
    v = json.loads(subprocess.run(["/usr/bin/allot", "--json", "show"], capture_output=True, text=True).stdout)
    for j in v["jobs"]:
        if j["uid"] == 2002 and j["active"]:
            samples += 1; boosted += bool(j["boost"]); ent.append(j["entitlement"])
    time.sleep(0.5)
b = [cpu(p) - x for p, x in zip(pids, a)]
print(f"a={b[0] / (sum(b) or 1):.3f} boosted={boosted} samples={samples} entitlement={max(ent) if ent else -1}")
PY
) || r="a=-1 boosted=-1 samples=0 entitlement=-1"
echo "allot-ta's session hog against allot-tb's job of 4 hogs: $r" >&2
echo "measured, not checked: allot-ta's session hog's share of the machine against allot-tb's job of 4: $r" >&2
check "allot-tb's CPU-bound job is never boosted, and entitled to at most 1.1 CPU of 2" python3 -c "
v = dict(x.split('=') for x in '$r'.split()); assert int(v['samples']) > 0 and int(v['boosted']) == 0 and float(v['entitlement']) <= 1.1, v"
kill "$ahog_sess" 2> /dev/null || true
stop_pids /tmp/ahog
for q in $(cat /tmp/bjob.pids 2> /dev/null); do kill "$q" 2> /dev/null || true; done
kill "$bsess" 2> /dev/null || true

# Logout. Here a job is a directory of allot's in the cpu hierarchy, which v1 cannot kill
# whole (no cgroup.kill), so the daemon signals each process, and another user's process
# takes CAP_KILL, which allot.service does not grant. By default, then, a job from a
# session survives terminate-user, and the daemon says why.
check "status: without CAP_KILL a session's job is not ended with the session" sh -c "$A status | grep -q 'cgroup v1 without CAP_KILL'"
id allot-tc > /dev/null 2>&1 || useradd -m -u 2003 -s /bin/bash allot-tc
rm -f /tmp/nocap.pid
login_session allot-tc sh -c "$A run -- sh -c 'echo \$\$ > /tmp/nocap.pid; exec sleep 3000' & exec sleep 3000" > /dev/null || true
wait_for -t 20 test -s /tmp/nocap.pid || true
nocap=$(cat /tmp/nocap.pid 2> /dev/null || echo 0)
loginctl terminate-user allot-tc
sleep 4
check "without CAP_KILL a job from a session outlives terminate-user" kill -0 "$nocap"
check "and the daemon says why (CAP_KILL)" sh -c "journalctl -b -u allot --no-pager | grep -q 'was not ended with its login session.*CAP_KILL'"
journalctl -b -u allot --no-pager | grep 'login session' | tail -n 3 >&2 || true
kill "$nocap" 2> /dev/null || true
wait_for -t 60 sh -c "! test -d $(units_root)/user.slice/user-2003.slice" || echo "user-2003.slice still there after the job" >&2

# With CAP_KILL (the drop-in docs/systemd.md gives), sessions.sh's logout checks, as on
# v2 (put in the guest with --file tests/vm/systemd/sessions.sh:/root/sessions.sh): a job
# from a login session is tied to it by a PartOf= tether; KillUserProcesses=no lets it
# run on, terminate-user and a logout under KillUserProcesses=yes end it. The user's
# slice must go from every hierarchy afterwards: a directory allot left in the cpu
# hierarchy would hold it there.
mkdir -p /etc/systemd/system/allot.service.d
printf '[Service]\nCapabilityBoundingSet=CAP_KILL\n' > /etc/systemd/system/allot.service.d/kill.conf
systemctl daemon-reload
systemctl restart allot
check "allot.service runs with CAP_KILL (bit 5 of CapEff)" wait_for -t 30 sh -c 'systemctl is-active --quiet allot && python3 -c "import sys; e = [l for l in open(\"/proc/%s/status\" % sys.argv[1]) if l.startswith(\"CapEff:\")][0].split()[1]; sys.exit(0 if int(e, 16) >> 5 & 1 else 1)" $(systemctl show -p MainPID --value allot)'
check "status: with it, nothing about CAP_KILL" sh -c "! $A status | grep -q 'CAP_KILL'"
check "the session checks are in the guest" test -s /root/sessions.sh
if [ -s /root/sessions.sh ]; then
  . /root/sessions.sh
  logout_checks
  check "allot-tc's slice is gone from the cpu hierarchy too" wait_for -t 30 sh -c "! test -d $CPU/user.slice/user-2003.slice"
  ls -d "$CPU"/user.slice/user-2003.slice/* >&2 2> /dev/null || true
fi
rm -rf /etc/systemd/system/allot.service.d
systemctl daemon-reload

# Funding a logged-in user's slice: CPUWeight= through systemd, cpu.shares on v1.
check "allot fund allot-ta 300" $A fund allot-ta 300
check "user-2001.slice has CPUWeight=300" wait_for -t 10 sh -c '[ "$(systemctl show user-2001.slice -p CPUWeight --value)" = 300 ]'
check "systemd wrote cpu.shares 3072 for it" wait_for -t 10 sh -c "[ \"\$(cat $CPU/user.slice/user-2001.slice/cpu.shares)\" = 3072 ]"
$A status > /tmp/status 2>&1 || true
cat /tmp/status >&2
check "status: no failed writes" grep -q ' 0 failed writes' /tmp/status
grep -q ' 0 failed writes' /tmp/status || journalctl -b -u allot --no-pager -p warning | tail -n 20 >&2 || true
# allot's own tree would be <mount>/allot and <mount>/allot-background (its raw backend's):
# on a systemd host there is none; allot_background.slice is systemd's unit, as on v2.
check "no tree of allot's own at the root of any hierarchy" sh -c "! find \$(awk '\$3 ~ /^cgroup/ { print \$2 }' /proc/mounts) -maxdepth 1 -type d \\( -name allot -o -name allot-background \\) | grep -q ."
check "at the root of the cpu hierarchy only systemd's units" sh -c "! find $CPU -mindepth 1 -maxdepth 1 -type d -not -name '*.slice' -not -name '*.scope' -not -name '*.mount' -not -name '*.service' | grep ."
wait 2> /dev/null || true

# Leave it as found: allot-ta's funding back to the default, then the package removed.
$A fund allot-ta 100 >&2
check "dpkg --purge removes it" dpkg --purge allot
sleep 2
snap > /tmp/after
# Every cgroup that was there before is byte-identical. systemd realizes the cpu
# controller for the siblings of a unit that uses it (allot's slices at the top and in
# user.slice): those cgroups are new, made by systemd, and hold the kernel's defaults.
python3 - /tmp/before /tmp/after > /tmp/snapdiff <<'PY'
import sys
def parse(f):
    d, cur = {}, None
    for l in open(f):
        if l.startswith("/"):
            cur = l.strip(); d[cur] = []
        else:
            d[cur].append(l.rstrip("\n"))
    return d
b, a = parse(sys.argv[1]), parse(sys.argv[2])
for k in sorted(b):
    if k not in a: print(f"gone: {k}")
    elif a[k] != b[k]: print(f"changed: {k}: {b[k]} -> {a[k]}")
defaults = {"cpu.shares 1024 ", "cpu.cfs_quota_us -1 ", "cpu.cfs_period_us 100000 ", "cpu.idle 0 ", "cpu.rt_runtime_us 0 "}
new = [k for k in sorted(a) if k not in b]
for k in new:
    odd = [x.strip() for x in a[k] if x.strip() + " " not in defaults]
    if odd: print(f"new, not the kernel's defaults: {k}: {odd}")
print(f"# {len(b)} cgroups before, {len(new)} new since (systemd's, the kernel's defaults): {' '.join(new)}", file=sys.stderr)
PY
cat /tmp/snapdiff >&2
check "every cgroup outside allot's units is byte-identical; new ones hold the defaults" test ! -s /tmp/snapdiff
check "no unit of allot's is left" sh -c "! systemctl list-units --all --no-legend 'allot:*' 'allot_*' | grep -q ."
kill "$sess" 2> /dev/null || true
checks_done
