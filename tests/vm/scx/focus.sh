# Guest script (before daemon.sh, sharing checks.sh's helpers): a configured boost line
# and focus through the daemon ([scheduler] kind = "scx"; allot_model::wake::line_ns, the
# table's line=NS). First at the default line (half), then a reload to
# [policy] boost_below = 0.05 and boost_window_ms = 1000, which puts every job's line at
# a twentieth of its entitlement over a 1000 ms window: the probe job (tickets 3 of 9,
# entitled to 333 ms per 1000 ms, its line then 16.7 ms) uses about 44 ms per 1000 ms
# under TCG (a wakeup that preempts a hog costs the guest about 0.4 ms; boost.sh), over
# that line, so its wakeups are not boosted. `allot focus` moves its line to the whole window: boosted
# at every wakeup. Three hog jobs at 3:2:1 and the probe job, all on CPU 1, one daemon.
#   focus-default at the default line: the hogs within 0.02 of 3:2:1; the probe boosted:
#                its p50 at most a third of the one over a line of 0.05
#   focus-window the reload loaded the scheduler again with the daemon's new window:
#                `allot status` says the loader's `boost window 1000 ms`
#   focus-line   unfocused under boost_below = 0.05: the hogs within 0.02 of 3:2:1; the
#                probe not boosted: its p50 at least 3 times the focused one's (with the
#                default line it would be boosted, as in boost.sh: about 1 ms)
#   focus        focused (`allot focus PID`): the hogs within 0.02 again; the probe's
#                p90 below the unfocused one's
#   and after it: no task is SCHED_EXT and sched_ext is disabled.
if only focus; then
F=/tmp/allotf
mkdir -p $F
printf 'scan_ms = 200\n[users]\nonly = []\n[scheduler]\nkind = "scx"\n' > $F/allot.toml
AF="allot --socket $F/allot.sock"
# The daemon (and the loader it starts) on CPU 0: both run in the fair class, which
# preempts sched_ext's tasks, and a TCG guest's daemon tick takes milliseconds on the CPU
# it wakes on, which would be the probe's latency, not the scheduler's.
taskset -c 0 allot daemon --ephemeral --cgroup-root allot-focus --socket $F/allot.sock --state-dir $F --config $F/allot.toml > $F/daemon.log 2>&1 &
FP=$!
n=0
until $AF status 2>/dev/null | grep -q '^scheduler.*scx (allot_stride loaded'; do
  n=$((n + 1)); [ $n -lt 600 ] || break; sleep 0.1
done
echo "SCX-STATE focus: $($AF status 2>/dev/null | grep '^scheduler')"
# focus_probe NAME [focus]: the hogs and the probe job, one window; the probe's line in
# /tmp/NAME.probe
focus_probe() {
  fname=$1 how=${2:-}
  for t in 3 2 1; do
    $AF run --strict -t $t -- taskset -c 1 sh -c 'while :; do :; done' > /dev/null &
    HOGS="$HOGS $!"
  done
  $AF run --strict -t 3 -- taskset -c 1 sh -c "sleep $WARM; exec allot-scx probe --every 10 --for $WINDOW" > /tmp/$fname.probe 2>&1 &
  PP=$!
  sleep 1
  if [ "$how" = focus ]; then
    $AF focus $PP > /tmp/$fname.focus 2>&1 || { echo "SCX-RESULT $fname: allot focus $PP failed: $(cat /tmp/$fname.focus)"; fail=1; }
  fi
  set -- $HOGS
  sleep $((WARM - 1))
  measure $fname $1:0.5 $2:0.3333 $3:0.1667 || fail=1
  wait $PP
  echo "SCX-MEASURE $fname: $(cat /tmp/$fname.probe)"
  stop_hogs
}
focus_probe focus-default
# The line at a twentieth of the entitlement over a window of 1000 ms, by a reload (a
# new window loads the scheduler again)
printf 'scan_ms = 200\n[users]\nonly = []\n[scheduler]\nkind = "scx"\n[policy]\nboost_below = 0.05\nboost_window_ms = 1000\n' > $F/allot.toml
kill -HUP $FP
n=0
until $AF status 2>/dev/null | grep -q '^scheduler.*scx (allot_stride loaded.*boost window 1000 ms'; do
  n=$((n + 1)); [ $n -lt 100 ] || break; sleep 0.1
done
sleep 1
st=$($AF status 2>/dev/null | grep '^scheduler')
echo "SCX-STATE focus: after the reload: $st"
case "$st" in
  *"boost window 1000 ms"*) echo "SCX-RESULT focus-window: after the reload $st" ;;
  *) echo "SCX-RESULT focus-window: after a reload to boost_window_ms = 1000 the loader does not say that window: $st"; fail=1 ;;
esac
focus_probe focus-line
focus_probe focus focus
def50=$(sed -n 's/.* p50 \([0-9.]*\) ms.*/\1/p' /tmp/focus-default.probe)
# p90, not p99: a TCG guest's tail follows the host's load (a run while the host built
# read p99 30.156 ms focused against 23.079 not, and p90 5.182 against 18.037)
off=$(sed -n 's/.* p90 \([0-9.]*\) ms.*/\1/p' /tmp/focus-line.probe)
on=$(sed -n 's/.* p90 \([0-9.]*\) ms.*/\1/p' /tmp/focus.probe)
off50=$(sed -n 's/.* p50 \([0-9.]*\) ms.*/\1/p' /tmp/focus-line.probe)
on50=$(sed -n 's/.* p50 \([0-9.]*\) ms.*/\1/p' /tmp/focus.probe)
if [ -n "$off50" ] && [ -n "$def50" ] && awk -v a=$def50 -v b=$off50 'BEGIN {exit !(b >= 3 * a)}'; then
  echo "SCX-RESULT focus-default: at the default line, boosted: the probe's p50 ${def50} ms, over a line of 0.05 ${off50} ms"
else
  echo "SCX-RESULT focus-default: the probe's p50 ${def50:-?} ms at the default line against ${off50:-?} ms over a line of 0.05: wanted at most a third"; fail=1
fi
if [ -n "$off50" ] && [ -n "$on50" ] && awk -v a=$on50 -v b=$off50 'BEGIN {exit !(b >= 3 * a)}'; then
  echo "SCX-RESULT focus-line: over its line, not boosted: the probe's p50 ${off50} ms, focused ${on50} ms"
else
  echo "SCX-RESULT focus-line: the probe's p50 ${off50:-?} ms unfocused against ${on50:-?} ms focused: wanted at least 3 times (not boosted over a line of 0.05)"; fail=1
fi
if [ -n "$off" ] && [ -n "$on" ] && awk -v a=$on -v b=$off 'BEGIN {exit !(a < b)}'; then
  echo "SCX-RESULT focus: the probe's p90 ${on} ms focused, ${off} ms not (boost_below = 0.05)"
else
  echo "SCX-RESULT focus: p90 ${on:-?} ms focused against ${off:-?} ms not: wanted fewer focused"; fail=1
fi
kill $FP; wait $FP
echo "SCX-STATE focus: daemon stopped; last lines: $(tail -n 2 $F/daemon.log | tr '\n' '|')"
after focus
fi
