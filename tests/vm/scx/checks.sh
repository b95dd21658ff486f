# Guest script for tests/vm/scx/run.sh (busybox sh in the sid VM). Every hog is a busy
# loop pinned to CPU 1; each job is a cgroup; allot-scx loads allot's sched_ext scheduler
# for the jobs. A hog's CPU time is the first field of /proc/PID/schedstat (ns on CPU),
# read after WARM s and again WINDOW s later. Prints SCX-RESULT lines (checks) and
# SCX-MEASURE lines (measured, not checked); daemon.sh follows it and exits 1 if any
# check of either failed. SCX_ONLY without "checks" skips these and runs daemon.sh's or
# ebs.sh's alone.
#   ratio       tickets 3:2:1 in one currency: shares within 0.02 of 1/2, 1/3, 1/6
#   insulation  currencies alice and bob funded alike; alice 1 hog, bob 5 hogs in one job:
#               alice's hog within 0.02 of 1/2, each of bob's within 0.02 of 1/10
#   sleepers    as insulation, but bob's job is 1 hog and 4 tasks waking every 50 ms:
#               each job's CPU (its cgroup's cpu.stat) within 0.05 of 1/2 (a job's share
#               goes to its runnable tasks). Wider than the others: each wake forks a
#               sleep, which costs the TCG guest milliseconds, and the job's share moved
#               0.4856, 0.5050, 0.5290, 0.5277 and 0.5188 over five runs on 2026-11-26 (0.5290 failed
#               a 0.02 bound in CI), and up to 0.5604 with a pass per task alone (the
#               sleepers' CPU was not charged to their job; 0.5001 with the job's pass,
#               2026-11-27, docs/scx.md "A job's pass"); a scheduler that shorts a job
#               for its sleepers, as an early version did, gave it 0.252
#   outside     ratio's jobs and one hog allot does not manage (fair class): measured
#   outside-all the same with every task scheduled (--all): allot's jobs together weigh
#               as the outside hog ([outside] weight 100): 1/4, 1/6, 1/12 and 1/2
#   sysrq       sysrq-S ejects the scheduler: the loader sees it within 2 s and names it
#   and after each: no task is SCHED_EXT and sched_ext is disabled.
set -u
# only PART: whether this run holds PART's checks. SCX_ONLY is a comma-separated set of
# checks (the loader's, in this file), ebs, boost, sim, storm, lottery, focus, daemon and bench;
# unset, every part but bench (run.sh --only).
only() { case ",${SCX_ONLY:-checks,ebs,boost,sim,storm,lottery,focus,daemon}," in *",$1,"*) return 0 ;; esac; return 1; }
WARM=${SCX_WARM:-5}
WINDOW=${SCX_WINDOW:-20}
fail=0
HOGS=""
echo "SCX-KERNEL $(uname -r) state=$(cat /sys/kernel/sched_ext/state)"

# hog CGROUP: one busy loop on CPU 1 in the cgroup (made if needed)
hog() {
  mkdir -p /sys/fs/cgroup/$1
  taskset -c 1 sh -c 'while :; do :; done' &
  echo $! > /sys/fs/cgroup/$1/cgroup.procs
  HOGS="$HOGS $!"
}
stop_hogs() {
  [ -n "$HOGS" ] && kill $HOGS 2>/dev/null
  for p in $HOGS; do wait $p 2>/dev/null; done
  HOGS=""
  for d in /sys/fs/cgroup/*/; do [ -f $d/cgroup.procs ] && rmdir $d 2>/dev/null; done
}
# ns PID|CGROUP-DIR: CPU time so far, ns (a process: schedstat; a job: its cgroup's
# cpu.stat usage_usec, every task it held included)
ns() {
  case $1 in
    /*) awk '/^usage_usec/ {printf "%.0f\n", $2 * 1000}' $1/cpu.stat ;;
    *) cut -d' ' -f1 /proc/$1/schedstat ;;
  esac
}
# measure NAME ID:WANT... (ID a pid or a cgroup directory; WANT "-" measures only):
# shares of the window, each checked within TOL (default 0.02)
measure() {
  name=$1; shift
  before=""; for pw in "$@"; do before="$before $(ns ${pw%%:*})"; done
  sleep $WINDOW
  after=""; for pw in "$@"; do after="$after $(ns ${pw%%:*})"; done
  echo "$* | $before | $after" | awk -v name=$name -v w=$WINDOW -v tol=${TOL:-0.02} '{
    split($0, part, "|"); n = split(part[1], pw, " "); split(part[2], a, " "); split(part[3], b, " ")
    t = 0; for (i = 1; i <= n; i++) { d[i] = b[i] - a[i]; t += d[i] }
    if (t <= 0) { print "SCX-RESULT " name ": no CPU time measured"; exit 1 }
    m = 0; got = ""; want = ""; checked = 0
    for (i = 1; i <= n; i++) {
      split(pw[i], x, ":"); s = d[i] / t; got = got sprintf(" %.4f", s); want = want " " x[2]
      if (x[2] != "-") { e = s - x[2]; if (e < 0) e = -e; if (e > m) m = e; checked = 1 }
    }
    if (checked) {
      printf "SCX-RESULT %s: shares%s (want%s) max error %.4f (allowed %s); CPU 1 busy %.3f of the %d s window\n", name, got, want, m, tol, t / (w * 1e9), w
      exit (m <= tol ? 0 : 1)
    }
    printf "SCX-MEASURE %s: shares%s; CPU 1 busy %.3f of the %d s window\n", name, got, t / (w * 1e9), w
  }'
}
# after: nothing left in sched_ext
after() {
  ext=""; n=0
  for d in /proc/[0-9]*; do
    pol=$(awk '/^policy/ {print $3}' $d/sched 2>/dev/null)
    [ -n "$pol" ] || continue
    n=$((n + 1))
    [ "$pol" = 7 ] && ext="$ext ${d#/proc/}"
  done
  st=$(cat /sys/kernel/sched_ext/state)
  if [ -n "$ext" ] || [ "$st" != disabled ]; then
    echo "SCX-RESULT $1 after unload: sched_ext $st; tasks still SCHED_EXT:${ext:- none}"; fail=1
  else
    echo "SCX-RESULT $1 after unload: all $n tasks out of sched_ext (no policy 7), sched_ext disabled"
  fi
}
loader() { allot-scx run "$@" --for $((WARM + WINDOW + 3)) & LP=$!; sleep $WARM; }

# The loader's checks (only when SCX_ONLY holds "checks", or is unset).
loader_done() { wait $LP; lrc=$?; [ $lrc = 0 ] || { echo "SCX-RESULT $1: loader exit $lrc"; fail=1; }; }
loader_checks() {

# ---- ratio
hog j1; hog j2; hog j3; set -- $HOGS
loader --job /sys/fs/cgroup/j1=3 --job /sys/fs/cgroup/j2=2 --job /sys/fs/cgroup/j3=1
echo "SCX-STATE ratio: sched_ext $(cat /sys/kernel/sched_ext/state); hog policy $(awk '/^policy/ {print $3}' /proc/$1/sched)"
measure ratio $1:0.5 $2:0.3333 $3:0.1667 || fail=1
loader_done ratio; stop_hogs; after ratio

# ---- insulation
hog a1; hog b1; hog b1; hog b1; hog b1; hog b1; set -- $HOGS
loader --job /sys/fs/cgroup/a1=1:alice --job /sys/fs/cgroup/b1=1:bob --funding alice=100 --funding bob=100
measure insulation $1:0.5 $2:0.1 $3:0.1 $4:0.1 $5:0.1 $6:0.1 || fail=1
loader_done insulation; stop_hogs; after insulation

# ---- sleepers: bob's job also holds 4 tasks that wake every 50 ms (each wake forks a
# sleep, which costs a TCG guest much CPU); a job's share goes to its runnable tasks, so
# bob's job as a whole (cgroup cpu.stat) gets half against alice's hog
hog a1; hog b1
for i in 1 2 3 4; do
  taskset -c 1 sh -c 'while :; do sleep 0.05; done' &
  echo $! > /sys/fs/cgroup/b1/cgroup.procs
  HOGS="$HOGS $!"
done
loader --job /sys/fs/cgroup/a1=1:alice --job /sys/fs/cgroup/b1=1:bob --funding alice=100 --funding bob=100
TOL=0.05
measure sleepers /sys/fs/cgroup/a1:0.5 /sys/fs/cgroup/b1:0.5 || fail=1
unset TOL
loader_done sleepers; stop_hogs; after sleepers

# ---- outside: a hog allot does not manage stays in the fair class
hog j1; hog j2; hog j3; hog outside; set -- $HOGS
loader --job /sys/fs/cgroup/j1=3 --job /sys/fs/cgroup/j2=2 --job /sys/fs/cgroup/j3=1
measure outside $1:- $2:- $3:- $4:-
wait $LP; echo "SCX-MEASURE outside: loader exit $? (0: ran its time; 3: the kernel ejected it)"
stop_hogs; after outside

# ---- outside-all: the same with every task the scheduler's (--all); the hog allot does
# not manage weighs as one nice-0 task, as much as allot's three jobs together
hog j1; hog j2; hog j3; hog outside; set -- $HOGS
loader --job /sys/fs/cgroup/j1=3 --job /sys/fs/cgroup/j2=2 --job /sys/fs/cgroup/j3=1 --all
echo "SCX-STATE outside-all: sched_ext $(cat /sys/kernel/sched_ext/state), switch_all $(cat /sys/kernel/sched_ext/switch_all)"
measure outside-all $1:0.25 $2:0.1667 $3:0.0833 $4:0.5 || fail=1
loader_done outside-all; stop_hogs; after outside-all

# ---- sysrq-S: the kernel ejects the scheduler; the loader notices and says why
hog j1; hog j2; hog j3
allot-scx run --job /sys/fs/cgroup/j1=3 --job /sys/fs/cgroup/j2=2 --job /sys/fs/cgroup/j3=1 --for 60 > /tmp/sysrq.out 2>&1 &
LP=$!
sleep 3
t0=$(cut -d' ' -f1 /proc/uptime)
echo S > /proc/sysrq-trigger
wait $LP; lrc=$?
t1=$(cut -d' ' -f1 /proc/uptime)
cat /tmp/sysrq.out
secs=$(awk -v a=$t0 -v b=$t1 'BEGIN {printf "%.1f", b - a}')
if [ $lrc = 3 ] && grep -q "sysrq-S (67)" /tmp/sysrq.out && awk -v s=$secs 'BEGIN {exit !(s <= 2)}'; then
  echo "SCX-RESULT sysrq: the loader saw the ejection (sysrq-S, kind 67) and exited 3 after ${secs} s"
else
  echo "SCX-RESULT sysrq: loader exit $lrc after ${secs} s, wanted exit 3 naming sysrq-S within 2 s"; fail=1
fi
stop_hogs; after sysrq
}
if only checks; then loader_checks; fi
