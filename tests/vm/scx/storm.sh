# Guest script, part five (after checks.sh, ebs.sh, boost.sh and sim.sh, sharing their
# helpers): many tasks in one job (docs/scx.md, "Many tasks"). On CPU 1, at equal tickets:
#   storm-threads  job t1, one process of STORM_THREADS CPU-bound threads (allot-lab
#                  workload cpu --threads, whose threads leave their start line together),
#                  against job a1, one hog: every thread of t1 ran in a window of the
#                  watchdog's 30 s, and the loader ran its whole time: the kernel's
#                  watchdog (which ejects a scheduler that leaves a runnable task unrun for
#                  timeout_ms) did not fire; and each job's CPU (its cgroup's cpu.stat)
#                  within 0.05 of half (the threads' job got 0.4852 and 0.4864 in two runs
#                  on 2026-11-27 with a task queued a quantum's stride after its job's pass
#                  at most: docs/scx.md, "A job's pass")
#   storm-fork     job f1, a fork storm (allot-lab workload fork: each child exits at once),
#                  against job a1, one hog: the loader ran its whole time (no stall), and
#                  each job's CPU within 0.05 of half (the storm's job got 0.4979 and 0.5008
#                  with that ceiling, 0.11-0.18 without it)
#   storm-jobs     20 jobs, each a hog under a hard cap with a boost entitlement, through
#                  allot-scx serve: each has an entry in the four maps the BPF side keeps
#                  per job; out of the table and its cgroup gone, none is left (a removed
#                  job whose cgroup remains keeps them until it goes)
#   and after each: no task is SCHED_EXT and sched_ext is disabled.
STORM_THREADS=${STORM_THREADS:-1000}
# ran_threads PID: "TID NS STATE" for every thread of PID: its CPU time so far and its
# state (R runnable, S asleep), read in one pass of one awk, not a process per thread (a
# process per thread under emulation read the last threads seconds later, after the
# loader had ended)
ran_threads() {
  awk '{ n = split(FILENAME, f, "/"); if (f[n] == "schedstat") ns[f[n - 1]] = $1; else st[f[n - 1]] = $3 }
    END { for (t in ns) print t, ns[t], st[t] }' /proc/$1/task/*/schedstat /proc/$1/task/*/stat 2>/dev/null
}
storm_checks() {
# ---- thousands of threads in one job
hog a1
mkdir -p /sys/fs/cgroup/t1
sh -c 'echo $$ > /sys/fs/cgroup/t1/cgroup.procs; exec taskset -c 1 allot-lab workload cpu --threads '$STORM_THREADS > /dev/null &
tp=$!; HOGS="$HOGS $tp"
# the threads start their work once all exist (up to 30 s under emulation)
i=0; while [ "$(ls /proc/$tp/task 2>/dev/null | wc -l)" -le "$STORM_THREADS" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
nt=$(ls /proc/$tp/task | wc -l)
# and leave their start line (one futex wake for all) before the scheduler takes them:
# until at most the main thread sleeps (it waits for the others), up to 60 s. (The start
# line was a std::sync::Barrier, which wakes its threads one after another, each by the
# one before: in a CI run on 2026-11-27 that chain was still under way at the attach, and
# 137 threads were still asleep at it 20 s later)
asleep() { cat /proc/$tp/task/*/stat 2>/dev/null | awk '$3 == "S" || $3 == "D" { n++ } END { print n + 0 }'; }
i=0; while [ "$(asleep)" -gt 1 ] && [ $i -lt 120 ]; do sleep 0.5; i=$((i + 1)); done
echo "SCX-STATE storm-threads: $(asleep) of $nt threads asleep at the attach, after $((i / 2)) s of waiting for the start line"
# the window is the kernel's watchdog timeout, 30 s (the scheduler's timeout_ms): the
# longest a runnable task may wait. A thread of 1000 waits about 8 s between turns
# (docs/scx.md, "Many tasks"), yet with every thread runnable from the attach one of them
# (nine once, with the host building beside the VM) waited past a 20 s window in five of
# six runs on 2026-11-27, and none past 30 s (the watchdog never fired)
window_was=$WINDOW; WINDOW=30
loader --job /sys/fs/cgroup/a1=1 --job /sys/fs/cgroup/t1=1
echo "SCX-STATE storm-threads: $nt threads in t1; sched_ext $(cat /sys/kernel/sched_ext/state)"
ran_threads $tp > /tmp/storm.t0
TOL=0.05
measure storm-threads /sys/fs/cgroup/a1:0.5 /sys/fs/cgroup/t1:0.5 || fail=1
unset TOL
ran_threads $tp > /tmp/storm.t1
# the process's main thread only waits for the others (it is not runnable): not counted
rm -f /tmp/storm.idle
idle=$(awk -v main=$tp 'NR == FNR { a[$1] = $2; s[$1] = $3; next } $1 != main && ($1 in a) && $2 == a[$1] { n++; print $1, s[$1], $3, $2, $1 - main > "/tmp/storm.idle" } END { print n + 0 }' /tmp/storm.t0 /tmp/storm.t1)
seen=$(($(wc -l < /tmp/storm.t1) - 1))
echo "SCX-MEASURE storm-threads: CPU each working thread had before the window: $(awk -v main=$tp '$1 != main { print $2 }' /tmp/storm.t0 | sort -n | awk '{ v[NR] = $1 } END { printf "min %d, median %d, max %d ns", v[1], v[int((NR + 1) / 2)], v[NR] }')"
# a thread that did not run and was asleep at the end slept the whole window (a task
# sleeps again only after it runs); one runnable at the end waited the whole window
slept=$(awk '$3 != "R" { n++ } END { print n + 0 }' /tmp/storm.idle 2>/dev/null || echo 0)
awk '{ print "SCX-MEASURE storm-threads: thread " $1 " (made " $5 "th) did not run: state " $2 " at the window start, " $3 " at its end; " $4 " ns on a CPU before" }' /tmp/storm.idle 2>/dev/null | head -20
if [ "$nt" -gt "$STORM_THREADS" ] && [ "$idle" = 0 ]; then
  echo "SCX-RESULT storm-threads-ran: all $seen working threads of t1 ran in the ${WINDOW} s window"
else
  echo "SCX-RESULT storm-threads-ran: $idle of $seen working threads of t1 did not run in the ${WINDOW} s window, $slept of them asleep at its end, $((idle - slept)) runnable ($nt threads at the start, the main one and $STORM_THREADS working)"; fail=1
fi
loader_done storm-threads
[ $lrc = 0 ] && echo "SCX-RESULT storm-threads-stall: the scheduler ran its whole $((WARM + WINDOW + 3)) s (the kernel's watchdog did not eject it)"
WINDOW=$window_was
stop_hogs; after storm-threads

# ---- a fork storm in one job
hog a1
mkdir -p /sys/fs/cgroup/f1
sh -c 'echo $$ > /sys/fs/cgroup/f1/cgroup.procs; exec taskset -c 1 allot-lab workload fork --duration '$((WARM + WINDOW + 5)) > /tmp/storm.fork &
HOGS="$HOGS $!"
loader --job /sys/fs/cgroup/a1=1 --job /sys/fs/cgroup/f1=1
TOL=0.05
measure storm-fork /sys/fs/cgroup/a1:0.5 /sys/fs/cgroup/f1:0.5 || fail=1
unset TOL
loader_done storm-fork
[ $lrc = 0 ] && echo "SCX-RESULT storm-fork-stall: the scheduler ran its whole $((WARM + WINDOW + 3)) s (the kernel's watchdog did not eject it)"
stop_hogs; after storm-fork
echo "SCX-MEASURE storm-fork: the storm's report: $(cat /tmp/storm.fork)"
jobs_checks
}

# ---- jobs that come and go (storm-jobs): what the BPF side keeps per job (its runnable
# count, pass, cap period and boost window: four hash maps of 65536 entries) goes once the
# job is out of the table and its cgroup is gone, and not before: a daemon that runs for
# months sees far more than 65536 jobs. allot-scx serve, driven here through a pipe.
maps() {   # N: the loader's answer to the (N+1)th `maps`
  echo maps >&7
  i=0; while [ $i -lt 50 ]; do
    if [ "$(grep -c '^maps ' /tmp/serve.out)" -gt "$1" ]; then
      l=$(grep '^maps ' /tmp/serve.out | tail -n 1); echo "${l#maps }"; return
    fi
    sleep 0.1; i=$((i + 1))
  done
  echo "no answer"
}
jobs_checks() {
  JOBS=20
  rm -f /tmp/serve.in /tmp/serve.out; mkfifo /tmp/serve.in
  allot-scx serve < /tmp/serve.in > /tmp/serve.out 2>&1 &
  sp=$!
  exec 7> /tmp/serve.in
  i=0; while ! grep -q '^loaded' /tmp/serve.out && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  # each job a hog under a hard cap and with a boost entitlement: all four maps get its entry
  for n in $(seq 1 $JOBS); do hog r$n; echo "job 1000 cap=0.04 boost=100000000 /sys/fs/cgroup/r$n" >&7; done
  echo end >&7
  sleep 4
  m1=$(maps 0)
  echo "SCX-STATE storm-jobs: $JOBS jobs running: $m1"
  # every job leaves the table; the cgroups of all but r1 go
  kill $(for n in $(seq 2 $JOBS); do cat /sys/fs/cgroup/r$n/cgroup.procs; done) 2>/dev/null
  sleep 1
  for n in $(seq 2 $JOBS); do rmdir /sys/fs/cgroup/r$n; done
  echo end >&7
  m2=$(maps 1)
  sleep 3
  m3=$(maps 2)
  echo "SCX-STATE storm-jobs: out of the table, r2-r$JOBS gone: at once $m2; 3 s later $m3"
  # r1's cgroup, still there with its hog, keeps its entries until it goes too
  stop_hogs
  sleep 3
  m4=$(maps 3)
  echo "SCX-STATE storm-jobs: r1 gone as well, 3 s later: $m4"
  exec 7>&-
  wait $sp; lrc=$?
  want="runnable $JOBS job_passes $JOBS usages $JOBS windows $JOBS retired 0"
  if [ "$m1" = "$want" ] && [ "$m3" = "runnable 1 job_passes 1 usages 1 windows 1 retired 1" ] \
    && [ "$m4" = "runnable 0 job_passes 0 usages 0 windows 0 retired 0" ] && [ $lrc = 0 ]; then
    echo "SCX-RESULT storm-jobs: each of $JOBS jobs had its four entries; once out of the table and its cgroup gone, none is left; a removed job whose cgroup remains kept them until it went"
  else
    echo "SCX-RESULT storm-jobs: want \"$want\" while running, then \"runnable 1 ... retired 1\" (r1's cgroup remains), then all 0; got \"$m1\", \"$m2\", \"$m3\", \"$m4\"; the loader exited $lrc"; fail=1
  fi
  after storm-jobs
}
if only storm; then storm_checks; fi
