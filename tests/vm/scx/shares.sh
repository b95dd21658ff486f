# Guest script for tests/vm/scx/run.sh (busybox sh, PID 1's child in the sid VM):
# three CPU hogs pinned to CPU 1, each in its own cgroup (a job), tickets 3:2:1 in one
# currency; allot's sched_ext scheduler loaded for them with allot-scx; their CPU time
# (schedstat's ns on CPU) over a window; then unload and check every task is back in the
# fair class. Prints SCX-RESULT lines; exits non-zero on any failed check.
set -u
WARM=${SCX_WARM:-5}
WINDOW=${SCX_WINDOW:-20}
fail=0
echo "SCX-KERNEL $(uname -r) state=$(cat /sys/kernel/sched_ext/state)"
for i in 1 2 3; do mkdir /sys/fs/cgroup/j$i; done
pids=""
for i in 1 2 3; do
  taskset -c 1 sh -c 'while :; do :; done' &
  p=$!; pids="$pids $p"
  echo $p > /sys/fs/cgroup/j$i/cgroup.procs
done
set -- $pids
P1=$1 P2=$2 P3=$3
allot-scx run --job /sys/fs/cgroup/j1=3 --job /sys/fs/cgroup/j2=2 --job /sys/fs/cgroup/j3=1 --for $((WARM + WINDOW + 5)) &
LP=$!
sleep $WARM
echo "SCX-STATE during: $(cat /sys/kernel/sched_ext/state); hog policy $(awk '/^policy/ {print $3}' /proc/$P1/sched)"
ns() { cut -d' ' -f1 /proc/$1/schedstat; }
a1=$(ns $P1) a2=$(ns $P2) a3=$(ns $P3)
sleep $WINDOW
b1=$(ns $P1) b2=$(ns $P2) b3=$(ns $P3)
wait $LP; lrc=$?
echo "SCX-LOADER exit $lrc"
[ $lrc = 0 ] || fail=1
echo "$a1 $b1 $a2 $b2 $a3 $b3" | awk -v w=$WINDOW '{
  d1 = $2 - $1; d2 = $4 - $3; d3 = $6 - $5; t = d1 + d2 + d3
  if (t <= 0) { print "SCX-RESULT no CPU time measured"; exit 1 }
  s1 = d1 / t; s2 = d2 / t; s3 = d3 / t
  e1 = s1 - 3/6; e2 = s2 - 2/6; e3 = s3 - 1/6
  m = e1; if (m < 0) m = -m
  x = (e2 < 0 ? -e2 : e2); if (x > m) m = x
  x = (e3 < 0 ? -e3 : e3); if (x > m) m = x
  printf "SCX-RESULT shares %.4f %.4f %.4f (want 0.5000 0.3333 0.1667) max error %.4f; CPU-1 busy %.3f of the %d s window\n", s1, s2, s3, m, t / (w * 1e9), w
  exit (m <= 0.02 ? 0 : 1)
}' || fail=1
echo "SCX-STATE after: $(cat /sys/kernel/sched_ext/state)"
ext=""
n=0
for d in /proc/[0-9]*; do
  pol=$(awk '/^policy/ {print $3}' $d/sched 2>/dev/null) || continue
  [ -n "$pol" ] || continue
  n=$((n + 1))
  [ "$pol" = 7 ] && ext="$ext ${d#/proc/}"
done
if [ -n "$ext" ]; then echo "SCX-RESULT tasks still SCHED_EXT after unload:$ext"; fail=1
else echo "SCX-RESULT all $n tasks back in the fair class (policy 0..6, none SCHED_EXT) after unload"; fi
grep -q disabled /sys/kernel/sched_ext/state || { echo "SCX-RESULT sched_ext still $(cat /sys/kernel/sched_ext/state)"; fail=1; }
kill $pids
exit $fail
