#!/bin/bash
# allot installed from its Debian package on a systemd host (issues: parts 7 and 8), run
# inside the systemd VM (bash packaging/deb/build.sh makes the package first):
#   tests/vm/systemd/run.sh --file target/debian/allot_0.1.0-1_amd64.deb:/root/allot.deb \
#     --file target/release/allot-lab:/usr/local/bin/allot-lab --script tests/vm/systemd/allot.sh
# (the lab is not in the package: its selftest and benchmark come in beside it, and run
# the installed /usr/bin/allot through ALLOT_BIN).
# Asserts: `dpkg -i` installs the binary, unit, man pages and completions and starts the
# service (Type=notify); enforcement as the selftest measures it (ratio, insulation, hard
# cap, background) in systemd mode; a probe job among hog jobs boosted (explain, cpu.weight);
# funding is the user slice's CPUWeight, and its audit record a journal entry with fields
# (MESSAGE_ID, ALLOT_UID, ALLOT_REQUEST); `allot run` in a login session leaves the session
# whole; a delegated service of a uid >= 1000 (a stand-in container) is never touched;
# daemon-reload and a restart keep every job, setting and process; `dpkg --remove` stops
# the daemon and lets go without stopping a running job, whose scope ends with it;
# the unit scores <= 4.5 in `systemd-analyze security`; `systemctl reload` fails on a bad
# config and a refused reload shows in status; a client that comes while the daemon is
# stopped is held by allot.socket and served by the daemon it starts; login-session processes
# meet rules, the boost and the plan (sessions.sh); `dpkg --purge` leaves no file, unit,
# process or cgroup of allot's: the root's subtree_control and every cgroup (allot's
# excepted only while it runs) are byte-identical before and after.
set -euo pipefail
. "$ALLOT_VM_LIB"
A=/usr/bin/allot
L=/usr/local/bin/allot-lab
export ALLOT_BIN=$A
[ -x "$L" ] || { echo "allot.sh: $L is missing: pass --file target/release/allot-lab:$L" >&2; exit 1; }

# Logins first: they switch the cpu controller on along user.slice (systemd does so when
# the first user@.service starts), so the "before" snapshot sees the steady tree.
pa=$(login_session allot-ta sleep 3000)
pb=$(login_session allot-tb sleep 3000)
sa=$(session_of "$pa")
# Units that come and go with the test itself; allot's own are not excluded: after the
# purge nothing of allot's may be left.
EXCL=('user.slice/user-*.slice/session-*.scope' 'user.slice/user-*.slice/user@*.service' 'system.slice/allot-vm-test.service' 'system.slice/fake-container.service')
cgroup_snapshot "${EXCL[@]}" > /tmp/before
cp /sys/fs/cgroup/cgroup.subtree_control /tmp/root-before

check "dpkg -i installs the package" dpkg -i /root/allot.deb
check "the service is enabled" systemctl is-enabled --quiet allot
check "allot.service is active (READY=1 came)" systemctl is-active --quiet allot
# This image excludes /usr/share/man and /usr/share/doc from dpkg (path-exclude), as
# minimal images do: what the package carries is read from the package itself.
check "the package carries man pages and the example config" sh -c 'dpkg-deb -c /root/allot.deb | grep -q "man1/allot-run.1.gz" && dpkg-deb -c /root/allot.deb | grep -q "man5/allot.toml.5.gz" && dpkg-deb -c /root/allot.deb | grep -q "examples/allot.toml"'
check "the man page names the command" sh -c 'dpkg-deb --fsys-tarfile /root/allot.deb | tar -xO ./usr/share/man/man1/allot-run.1.gz | zcat | grep -q "allot run"'
check "completions and the copyright are installed" sh -c 'test -s /usr/share/bash-completion/completions/allot && test -s /usr/share/zsh/vendor-completions/_allot && test -s /usr/share/doc/allot/copyright'
check "status: systemd owns the tree" sh -c "$A status | grep -q \"systemd's\""
$A status >&2

# Enforcement, measured by the selftest's private daemon (in systemd mode too).
check "selftest: ratio, insulation, hard cap, background" $L selftest --window 5
# The boost in systemd mode: a probe job (10 ms sleep, 0.2 ms work: well below half its
# entitlement, 0.35 CPU here, even as slowly as TCG runs it) among four CPU-hog jobs of the
# same user is boosted: `allot explain` says so and its job's cpu.weight is raised above
# its tickets' (a hog job's is printed). That is the decision and its application;
# the wake-up latency it buys is measured on the host (`allot-lab bench policy latency` in
# scripts/test, docs/policy.md). Under TCG no policy's latency can be told apart: against
# the same hogs a SCHED_FIFO probe's p99 was 19.6 ms and a plain one's 20.2 ms (2026-11-27,
# docs/policy.md, "The boost under emulation"), so this run prints the boosted probe's
# p99 beside a SCHED_FIFO probe's, for the record, and checks neither.
rm -f /tmp/boost.hogs /tmp/boost.pid /tmp/boost.json /tmp/boost.err
cat > /tmp/boostjobs.sh <<BOOST
#!/bin/sh
for i in 1 2 3 4; do $A run -- sh -c 'echo \$\$ >> /tmp/boost.hogs; exec $L workload cpu' > /dev/null 2>> /tmp/boost.err & done
sleep 2
$A run -- sh -c 'echo \$\$ > /tmp/boost.pid; exec $A probe -i 10 -w 200 -d 15 --json' > /tmp/boost.json.part 2>> /tmp/boost.err
mv /tmp/boost.json.part /tmp/boost.json
wait
BOOST
chmod 0755 /tmp/boostjobs.sh
login_session allot-tb /tmp/boostjobs.sh > /dev/null || true
wait_for -t 30 sh -c 'test -s /tmp/boost.pid && [ "$(wc -l < /tmp/boost.hogs)" = 4 ]' || cat /tmp/boost.err >&2 || true
bp=$(cat /tmp/boost.pid 2> /dev/null || echo 0)
# The decision is read until it is taken, for up to 15 s after the probe started: a job
# is judged once it has been observed twice, and under emulation on a loaded host the
# first seconds' readings may vary (this check read once, 3 s in, until a CI run of this
# script failed on 2026-11-27 without naming its check; in three runs after, it passed,
# each boosted at that reading). Each reading not boosted is shown on stderr.
boosted() {
  $A --json explain "$bp" > /tmp/boost.explain 2>&1 || true
  python3 -c "
import json, sys
e = json.load(open('/tmp/boost.explain'))
b = [r for r in e['reasons'] if r['state'] == 'boost']
sys.exit(0 if b and b[0]['on'] else 1)" 2> /dev/null && return 0
  echo "boost: not yet boosted $(( $(date +%s) - t0 )) s in: $(tr -s ' \n' ' ' < /tmp/boost.explain | cut -c1-600)" >&2
  return 1
}
t0=$(date +%s)
wait_for -t 15 boosted || true
bwf="/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/$bp/cgroup 2> /dev/null)/cpu.weight"
# the weight is written in the tick that decided it, or the next
wait_for -t 3 sh -c "test \"\$(cat $bwf)\" -gt 100" 2> /dev/null || true
bw=$(cat "$bwf" 2> /dev/null || echo 0)
hw=$(cat "/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/$(head -1 /tmp/boost.hogs)/cgroup 2> /dev/null)/cpu.weight" 2> /dev/null || echo 0)
echo "boost: the probe job's cpu.weight $bw, a hog job's $hw, $(( $(date +%s) - t0 )) s after the probe started" >&2
check "allot explain says the probe job among hog jobs is boosted" python3 -c "
import json
e = json.load(open('/tmp/boost.explain'))
b = [r for r in e['reasons'] if r['state'] == 'boost']
print(b[0]['because'] if b else e)
assert b and b[0]['on']"
check "the boosted job's cpu.weight is above its tickets' 100 ($bw)" test "$bw" -gt 100
wait_for -t 60 test -s /tmp/boost.json || true
chrt -f 50 $A probe -i 10 -w 200 -d 8 --json > /tmp/fifo.json 2> /dev/null || true
python3 -c "
import json
b, f = json.load(open('/tmp/boost.json')), json.load(open('/tmp/fifo.json'))
print('latency under TCG (printed, not checked): boosted job p50 %.0f p99 %.0f us; SCHED_FIFO 50 p50 %.0f p99 %.0f us, against 4 hog jobs' % (b['lateness_us']['p50'], b['lateness_us']['p99'], f['lateness_us']['p50'], f['lateness_us']['p99']))" >&2 || true
for h in $(cat /tmp/boost.hogs 2> /dev/null); do kill "$h" 2> /dev/null || true; done

# Funding is the user slice's CPUWeight, visible to systemctl.
check "fund allot-ta 300" $A fund allot-ta 300
check "user-2001.slice CPUWeight=300" wait_for -t 10 sh -c 'systemctl show user-2001.slice -p CPUWeight | grep -qx CPUWeight=300'
# The fund's audit record is a journal entry with fields (docs/operate.md, the audit trail).
check "the journal has fund's audit record by MESSAGE_ID and ALLOT_UID" wait_for -t 10 sh -c "journalctl -o json MESSAGE_ID=c81de62656cb47ff982946831ed4cdbe ALLOT_UID=0 | grep -q '\"ALLOT_REQUEST\" *: *\"fund '"

# allot run inside a login session: the job leaves the session scope through systemd; the
# session keeps its leader.
shell=$(login_session allot-ta sh -c "$A run -t 300 -- sleep 3000 & echo \$! > /tmp/job.pid; wait")
ss=$(session_of "$shell")
wait_for test -s /tmp/job.pid
job=$(cat /tmp/job.pid)
wait_for sh -c "grep -q 'allot:user-2001.scope' /proc/$job/cgroup"
check "the job is in allot's scope in allot-ta's slice" sh -c "cgroup_of() { grep -m1 '^0::' /proc/\$1/cgroup; }; cgroup_of $job | grep -q 'user-2001.slice/allot:user-2001.scope/j'"
check "the login session is still there, with its own processes" sh -c "loginctl session-status $ss | grep -q 'sh -c'"
check "the first session is untouched" sh -c "loginctl session-status $sa | grep -q 'sleep 3000'"
check "allot-ta's job has 300 tickets" sh -c "$A --json show | grep -q '\"tickets\": 300'"
# `allot metrics` and `allot top` read each job's throttling and pressure in the scope
# systemd made for it (their THROTTLED and PSI columns, the alert rules' series).
# Tickets against the user's own session (docs/concepts.md): jobs of 300 and 100 tickets
# beside one busy login session of the same user, all on CPU 1, divide it 0.6 / 0.2 / 0.2,
# as jobs beside a default job would: allot weighs its scope as its active jobs' tickets
# together (systemd's default weights would give 0.375 / 0.125 / 0.5).
cat > /tmp/tix.sh <<TIX
#!/bin/sh
taskset -c 1 sh -c 'echo \$\$ > /tmp/tix.s; while :; do :; done' &
$A run -t 300 -- taskset -c 1 sh -c 'echo \$\$ > /tmp/tix.300; while :; do :; done' &
$A run -t 100 -- taskset -c 1 sh -c 'echo \$\$ > /tmp/tix.100; while :; do :; done' &
wait
TIX
chmod 0755 /tmp/tix.sh; rm -f /tmp/tix.s /tmp/tix.300 /tmp/tix.100
login_session allot-ta /tmp/tix.sh > /dev/null
wait_for -t 30 sh -c 'test -s /tmp/tix.s && test -s /tmp/tix.300 && test -s /tmp/tix.100' || true
sleep 4
tix=$(python3 - <<'PY'
import time
pids = {k: int(open(f"/tmp/tix.{k}").read()) for k in ("300", "100", "s")}
def cpu(p):
    f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])
a = {k: cpu(p) for k, p in pids.items()}
time.sleep(8)
b = {k: cpu(p) - a[k] for k, p in pids.items()}
t = sum(b.values()) or 1
print(" ".join(f"{k}={b[k] / t:.3f}" for k in ("300", "100", "s")))
PY
) || tix="unmeasured"
echo "one CPU divided between allot-ta's jobs of 300 and 100 tickets and its session: $tix" >&2
check "jobs of 300 and 100 tickets and a busy session of the same user: 0.6 / 0.2 / 0.2 (+-0.06)" python3 -c "
import sys
v = dict(x.split('=') for x in '$tix'.split() if '=' in x)
w = {'300': 0.6, '100': 0.2, 's': 0.2}
sys.exit(0 if all(k in v and abs(float(v[k]) - w[k]) <= 0.06 for k in w) else 1)"
for f in /tmp/tix.s /tmp/tix.300 /tmp/tix.100; do [ -s "$f" ] && kill "$(cat "$f")" 2> /dev/null || true; done
sleep 6
check "metrics read throttling and pressure in systemd's scopes" sh -c "$A metrics > /tmp/m && grep -q '^allot_job_throttled_periods_total{' /tmp/m && grep -q '^allot_job_pressure_cpu_waiting_seconds_total{' /tmp/m"

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

# The request socket is systemd's (allot.socket): a client that comes while the daemon is
# stopped or restarting waits in its queue and is served by the daemon the connection
# starts, never run unmanaged.
check "allot.socket is enabled and listening" sh -c 'systemctl is-enabled --quiet allot.socket && systemctl is-active --quiet allot.socket'
check "the daemon serves the socket systemd passed it" sh -c "journalctl -u allot.service --no-pager | grep -q 'passed by the service manager'"
systemctl stop allot.service
check "with the daemon stopped, the socket stays" sh -c 'systemctl is-active --quiet allot.socket && test -S /run/allot/allot.sock && ! systemctl is-active --quiet allot.service'
# allot-ta, in a login session, runs a command while no daemon runs.
rm -f /tmp/act.cg /tmp/act.err /tmp/act.done
login_session allot-ta sh -c "$A run -- cat /proc/self/cgroup > /tmp/act.cg 2> /tmp/act.err; echo \$? > /tmp/act.done; sleep 3000" > /dev/null
wait_for -t 60 test -s /tmp/act.done || true
cat /tmp/act.cg /tmp/act.err >&2 || true
check "a run while the daemon is stopped starts it and is placed by it" sh -c "test \"\$(cat /tmp/act.done)\" = 0 && grep '^0::' /tmp/act.cg | grep -q 'allot:user-2001.scope' && ! grep -qi 'warning' /tmp/act.err"
check "the connection started the daemon" systemctl is-active --quiet allot.service

# The unit's hardening as systemd scores it (lower is safer; 9.6 before it was hardened):
# the daemon did all of the above under it.
systemd-analyze security allot.service --no-pager > /tmp/security 2>&1 || true
grep -v '^✓' /tmp/security >&2 || true
score=$(grep -o 'allot.service: [0-9.]*' /tmp/security | cut -d' ' -f2)
echo "systemd-analyze security allot.service: ${score:-none}" >&2
check "the unit is hardened: exposure ${score:-?} <= 4.5" awk -v s="${score:-99}" 'BEGIN { exit !(s <= 4.5) }'

# Reloads: `systemctl reload` checks the file first, so a bad file fails it visibly and
# the daemon keeps running the config in force; a file the daemon itself refuses (a
# SIGHUP without the check) shows in `allot status` and systemd's status line.
mkdir -p /etc/allot
printf 'default_funding = 0\n' > /etc/allot/allot.toml
check "allot config check fails, naming the file and line" sh -c "! $A config check >/tmp/cc 2>&1 && grep -q '/etc/allot/allot.toml:1' /tmp/cc"
check "systemctl reload fails on a bad file" sh -c '! systemctl reload allot'
check "the daemon runs on after the failed reload" systemctl is-active --quiet allot
kill -HUP "$(systemctl show -p MainPID --value allot)"
check "a reload the daemon refused shows in allot status" wait_for -t 10 sh -c "$A status | grep -q 'last reload.*REFUSED.*allot.toml:1'"
check "and in systemctl's status line" sh -c "systemctl show -p StatusText --value allot | grep -q 'reload REFUSED'"
rm /etc/allot/allot.toml
check "systemctl reload with no file (the defaults) succeeds" systemctl reload allot
check "allot status says the reload was taken" wait_for -t 10 sh -c "$A status | grep -q 'last reload.*taken'"

# Funding from the first login: allot-tb is logged in (since the start) and has no job;
# its slice carries the config's funding from the tick after a reload, and with
# funding_authority = "config" an earlier `allot fund` gives way to the config's value.
tb_weight() { systemctl show user-2002.slice -p CPUWeight --value; }
printf '[funding]\nallot-tb = 250\n' > /etc/allot/allot.toml
systemctl reload allot
check "a logged-in user with no job carries the config's funding" wait_for -t 10 sh -c '[ "$(systemctl show user-2002.slice -p CPUWeight --value)" = 250 ]'
$A fund allot-tb 400
check "allot fund reaches a job-less slice" wait_for -t 10 sh -c '[ "$(systemctl show user-2002.slice -p CPUWeight --value)" = 400 ]'
printf 'funding_authority = "config"\n[funding]\nallot-tb = 250\n' > /etc/allot/allot.toml
systemctl reload allot
check "with the config the authority, its funding replaces allot fund's" wait_for -t 10 sh -c '[ "$(systemctl show user-2002.slice -p CPUWeight --value)" = 250 ]'
echo "user-2002.slice CPUWeight=$(tb_weight)" >&2
rm /etc/allot/allot.toml
systemctl reload allot
rmdir /etc/allot

# A currency's hard cap on a systemd host is the user's slice's CPUQuota=, set through
# systemd (runtime), and taken off again with --cap none (nothing left set).
check "allot fund --cap gives allot-tb's slice CPUQuota=50%" sh -c "$A fund allot-tb 100 --cap 0.5! && [ \"\$(systemctl show user-2002.slice -p CPUQuotaPerSecUSec --value)\" = 500ms ]"
# The cap holds the user's whole slice, whatever they run: two hogs in a login session,
# no allot job, measured from the slice's own cpu.stat over 6 s.
cat > /tmp/capped.sh <<CAPPED
#!/bin/sh
sh -c 'echo \$\$ > /tmp/capped.1; while :; do :; done' &
sh -c 'echo \$\$ > /tmp/capped.2; while :; do :; done' &
wait
CAPPED
chmod 0755 /tmp/capped.sh; rm -f /tmp/capped.1 /tmp/capped.2
login_session allot-tb /tmp/capped.sh > /dev/null
wait_for -t 30 sh -c 'test -s /tmp/capped.1 && test -s /tmp/capped.2' || true
sleep 2
slice_usec() { sed -n 's/^usage_usec //p' /sys/fs/cgroup/user.slice/user-2002.slice/cpu.stat; }
u0=$(slice_usec); t0=$(date +%s%N); sleep 6; u1=$(slice_usec); t1=$(date +%s%N)
capped=$(awk -v a="$u0" -v b="$u1" -v s="$t0" -v e="$t1" 'BEGIN { printf "%.3f", (b - a) * 1000 / (e - s) }')
echo "allot-tb's slice under a cap of 0.5! with two hogs in a session: $capped CPU" >&2
check "a currency cap of 0.5! holds the whole slice at 0.5 CPU (+-0.03): $capped" awk -v c="$capped" 'BEGIN { exit !(c >= 0.47 && c <= 0.53) }'
for f in /tmp/capped.1 /tmp/capped.2; do [ -s "$f" ] && kill "$(cat "$f")" 2> /dev/null || true; done
check "allot fund --cap none unsets it" sh -c "$A fund allot-tb --cap none && [ \"\$(systemctl show user-2002.slice -p CPUQuotaPerSecUSec --value)\" = infinity ]"

# Reach and logout (sessions.sh: reach_checks, logout_checks), then login-session processes
# meet rules, the boost and the plan (tests/vm/systemd/sessions.sh, put in the guest with
# --file tests/vm/systemd/sessions.sh:/root/sessions.sh).
check "the session checks are in the guest" test -s /root/sessions.sh
if [ -s /root/sessions.sh ]; then
  . /root/sessions.sh
  reach_checks
  logout_checks
  sessions_all
fi

# Leave it as found: funding back, the stand-in container gone, then the package removed
# while a job still runs: the job runs on, nothing of allot's outlives it.
$A fund allot-ta 100
$A fund allot-tb 100
systemctl stop fake-container
check "dpkg --remove stops allot and lets go" dpkg --remove allot
check "the daemon is stopped" sh -c '! systemctl is-active --quiet allot'
check "the running job was not stopped" kill -0 "$job"
check "no holder is left" sh -c '! pgrep -x allot-holder'
kill "$job" "$shell" || true
check "the job's scope ended with it" wait_for -t 20 sh -c '! systemctl list-units --all --plain --no-legend "allot:*" "allot_*" | grep -q .'
check "dpkg --purge removes the state" dpkg --purge allot
check "no file of allot's is left" sh -c 'test ! -e /var/lib/allot && test ! -e /usr/bin/allot && test ! -e /lib/systemd/system/allot.service && test ! -e /lib/systemd/system/allot.socket && test ! -e /etc/systemd/system/multi-user.target.wants/allot.service && test ! -e /etc/systemd/system/sockets.target.wants/allot.socket && test ! -e /run/allot/allot.sock'
settled_snapshot /tmp/before /tmp/after 30 "${EXCL[@]}" || true
check "every cgroup is byte-identical (nothing of allot's left)" same /tmp/before /tmp/after
check "the root's subtree_control is byte-identical" same /tmp/root-before /sys/fs/cgroup/cgroup.subtree_control
kill "$pa" "$pb" || true
checks_done
