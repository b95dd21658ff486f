# Guest script, part three (after checks.sh and ebs.sh, sharing their helpers): the boost
# per wakeup (allot_model::wake), without and then with it, in one VM run. Three hog jobs
# at tickets 3:2:1 and a probe job of tickets 3, all on CPU 1; the probe job is one task
# that sleeps 10 ms and wakes, again and again (allot-scx probe), and prints its wakeup
# latency (how much later than asked it ran) over the window.
#   boost-off    the loader with --no-boost: the hogs' shares among themselves within 0.02
#                of 1/2, 1/3, 1/6; the probe's latency measured
#   boost-on     the same with the boost: the shares within 0.02 again
#   boost        the BPF side counted boosted wakeups, and the probe's p99 latency with
#                the boost is below its p99 without (a miss runs the pair once more)
#   boost-window the loader's --boost-window-ms in force: the same jobs, the probe job
#                bursting 0.4 s of CPU before each of five 1.5 s probes; with a window
#                of 100 ms the BPF side refuses the boost (the job over its line) at
#                most half as many wakeups as with 500 ms (a burst leaves a short window
#                sooner); each loader said the window it loaded with
#   and after each: no task is SCHED_EXT and sched_ext is disabled.
# The probe job's CPU over the window is printed (SCX-MEASURE): under TCG a wakeup that
# preempts a hog cost the guest about 0.4 ms of CPU (21.8 ms per 500 ms for 50 wakeups),
# and a job that has used half its entitlement over the window is not boosted;
# tickets 3 (1/3 of the CPU: boosted below 83 ms per 500 ms) keep the probe below that
# line (at tickets 1 of 7 it was over it at 27 of 1544 wakeups, which made the p99).
# Two probes in one window, one boosted and one not (--no-boost-for), do not measure the
# boost: the one not boosted runs right after the boosted one's preemptions.
# probe_run NAME LOADER-OPTIONS...: the probe's line in /tmp/NAME.probe
probe_run() {
  name=$1; shift
  mkdir -p /sys/fs/cgroup/p
  taskset -c 1 sh -c "echo \$\$ > /sys/fs/cgroup/p/cgroup.procs; sleep $WARM; exec allot-scx probe --every 10 --for $WINDOW" > /tmp/$name.probe 2>&1 &
  PP=$!
  hog j1; hog j2; hog j3; set -- $HOGS "$@"
  h1=$1; h2=$2; h3=$3; shift 3
  sleep 0.5
  allot-scx run --job /sys/fs/cgroup/j1=3 --job /sys/fs/cgroup/j2=2 --job /sys/fs/cgroup/j3=1 --job /sys/fs/cgroup/p=3 "$@" \
    --for $((WARM + WINDOW + 3)) > /tmp/$name.out 2>&1 &
  LP=$!
  sleep $WARM
  p0=$(ns /sys/fs/cgroup/p)
  measure $name $h1:0.5 $h2:0.3333 $h3:0.1667 || fail=1
  p1=$(ns /sys/fs/cgroup/p)
  wait $PP
  wait $LP; lrc=$?
  sed 's/^/SCX-LOADER /' /tmp/$name.out
  [ $lrc = 0 ] || { echo "SCX-RESULT $name: loader exit $lrc"; fail=1; }
  echo "SCX-MEASURE $name: $(cat /tmp/$name.probe); its job's CPU $(awk -v a=$p0 -v b=$p1 -v w=$WINDOW 'BEGIN {printf "%.1f", (b - a) / 1e6 / (w * 2)}') ms per 500 ms"
  stop_hogs; after $name
}
# p99 NAME: the probe's p99 latency in ms
p99() { sed -n 's/.* p99 \([0-9.]*\) ms.*/\1/p' /tmp/$1.probe; }
# boost_pair: both runs; true when the boost lowered the p99 ("said" holds the line)
boost_pair() {
  probe_run boost-off --no-boost
  probe_run boost-on
  off=$(p99 boost-off); on=$(p99 boost-on)
  boosted=$(sed -n 's/.* \([0-9]*\) wakeups boosted.*/\1/p' /tmp/boost-on.out)
  over=$(sed -n 's/.* \([0-9]*\) not (over the line).*/\1/p' /tmp/boost-on.out)
  said="p99 ${on:-?} ms with the boost, ${off:-?} ms without, ${boosted:-?} wakeups boosted, ${over:-?} not"
  [ -n "$off" ] && [ -n "$on" ] && [ "${boosted:-0}" -gt 0 ] && awk -v a=$on -v b=$off 'BEGIN {exit !(a < b)}'
}
# One p99 against another in one window each: CI on 2026-11-27 saw the boosted probe's
# p99 at 25.614 ms against 18.038 without (p50 1.946 ms, where other runs have 0.6-1.4),
# the host's load 1.00 (the VM alone), and 5.626 against 19.208 when run again. A miss
# runs the pair once more, said, and that pair's verdict stands (not the whole VM again).
boost_checks() {
if boost_pair; then
  echo "SCX-RESULT boost: the probe's $said"
  return
fi
echo "SCX-STATE boost: missed ($said; the guest's load $(cut -d' ' -f1-3 /proc/loadavg)); the pair once more"
if boost_pair; then
  echo "SCX-RESULT boost: the probe's $said (the second pair; the first missed)"
else
  echo "SCX-RESULT boost: $said, and the first pair missed too: wanted fewer ms with it and some boosted"; fail=1
fi
}
# window_run NAME MS: the loader with --boost-window-ms MS over the hogs at 3:2:1 and a
# job of tickets 3 (a third of CPU 1) that bursts 0.4 s (about 130 ms of CPU: over its
# line, half its entitlement, under either window: 83 ms of 500, 17 ms of 100), then
# probes every 10 ms for 1.5 s, five times; the loader stopped once it is done.
# NAME.out holds the loader's lines, NAME.probe the probes'.
window_run() {
  name=$1; ms=$2
  mkdir -p /sys/fs/cgroup/p
  taskset -c 1 sh -c "echo \$\$ > /sys/fs/cgroup/p/cgroup.procs; sleep $WARM; for i in 1 2 3 4 5; do timeout 0.4 sh -c 'while :; do :; done'; allot-scx probe --every 10 --for 1.5; done" > /tmp/$name.probe 2>&1 &
  PP=$!
  hog j1; hog j2; hog j3
  sleep 0.5
  allot-scx run --job /sys/fs/cgroup/j1=3 --job /sys/fs/cgroup/j2=2 --job /sys/fs/cgroup/j3=1 --job /sys/fs/cgroup/p=3 --boost-window-ms $ms --for 120 > /tmp/$name.out 2>&1 &
  LP=$!
  wait $PP
  kill -TERM $LP; wait $LP; lrc=$?
  sed 's/^/SCX-LOADER /' /tmp/$name.out
  sed "s/^/SCX-MEASURE $name: /" /tmp/$name.probe
  [ $lrc = 0 ] || { echo "SCX-RESULT $name: loader exit $lrc"; fail=1; }
  stop_hogs; after $name
}
# the wakeups the BPF side refused the boost (over the line), and boosted, in NAME's run
over_of() { sed -n 's/.* \([0-9]*\) not (over the line).*/\1/p' /tmp/$1.out; }
boosted_of() { sed -n 's/.* \([0-9]*\) wakeups boosted.*/\1/p' /tmp/$1.out; }
window_checks() {
  window_run window-500 500
  window_run window-100 100
  o5=$(over_of window-500); o1=$(over_of window-100); b5=$(boosted_of window-500); b1=$(boosted_of window-100)
  said="over the line at ${o1:-?} wakeups with a 100 ms window (${b1:-?} boosted), ${o5:-?} with 500 ms (${b5:-?} boosted)"
  for ms in 500 100; do
    grep -q "boost window $ms ms" /tmp/window-$ms.out || { echo "SCX-RESULT boost-window: the loader did not say it loaded with a $ms ms window"; fail=1; }
  done
  if [ -n "$o5" ] && [ -n "$o1" ] && [ "$o5" -gt 0 ] && [ $((o1 * 2)) -le "$o5" ]; then
    echo "SCX-RESULT boost-window: $said"
  else
    echo "SCX-RESULT boost-window: $said: wanted at most half as many with 100 ms, and some with 500 ms"; fail=1
  fi
}
if only boost; then boost_checks; window_checks; fi
