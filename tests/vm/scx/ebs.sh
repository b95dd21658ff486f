# Guest script, part two (appended to checks.sh by run.sh, sharing its helpers): EBS's
# hard caps and background under allot-scx run. Every hog is pinned to CPU 1; a hog's
# rate is its CPU time in the window (/proc/PID/schedstat) over the window, in CPUs.
#   cap         job j1 (tickets 3, hard cap 0.3) against job j2 (tickets 1): j1's hog
#               within 0.03 of 0.30 (uncapped it would get 0.75), j2's measured
#   cap-alone   j1 (hard cap 0.3) alone on the CPU: within 0.03 of 0.30 (the CPU idles
#               the rest: a hard cap holds always)
#   background  a background job's hog beside a foreground job's hog: at most 0.05; then
#               the foreground hog stopped: the background hog alone at least 0.90
#   currency-cap alice's two jobs (funding 300, currency cap 0.4) against bob's one
#               (funding 100): alice's together within 0.03 of 0.40 (uncapped 0.75), bob's
#               measured; then bob's hog stopped: alice's alone within 0.03 of 0.40
#   and after each: no task is SCHED_EXT and sched_ext is disabled.
# rate NAME PID:WANT:TOL... (WANT "-" measures only; WANT ">X" or "<X": a bound): each
# hog's CPUs over the window
rate() {
  name=$1; shift
  before=""; for a in "$@"; do before="$before $(ns ${a%%:*})"; done
  sleep $WINDOW
  after=""; for a in "$@"; do after="$after $(ns ${a%%:*})"; done
  echo "$* | $before | $after" | awk -v name=$name -v w=$WINDOW '{
    split($0, part, "|"); n = split(part[1], a, " "); split(part[2], x, " "); split(part[3], y, " ")
    ok = 1; got = ""; want = ""
    for (i = 1; i <= n; i++) {
      split(a[i], f, ":"); r = (y[i] - x[i]) / (w * 1e9); got = got sprintf(" %.4f", r)
      if (f[2] == "-") { want = want " -"; continue }
      if (f[2] ~ /^>/) { b = substr(f[2], 2); want = want " >=" b; if (r < b) ok = 0; continue }
      if (f[2] ~ /^</) { b = substr(f[2], 2); want = want " <=" b; if (r > b) ok = 0; continue }
      want = want sprintf(" %s+-%s", f[2], f[3]); e = r - f[2]; if (e < 0) e = -e; if (e > f[3]) ok = 0
    }
    printf "SCX-RESULT %s: CPUs%s (want%s) over the %d s window\n", name, got, want, w
    exit !ok
  }'
}
ebs_checks() {
# ---- cap
hog j1; hog j2; set -- $HOGS
loader --job /sys/fs/cgroup/j1=3 --job /sys/fs/cgroup/j2=1 --cap /sys/fs/cgroup/j1=0.3
rate cap $1:0.30:0.03 $2:- || fail=1
loader_done cap; stop_hogs; after cap

# ---- cap-alone
hog j1; set -- $HOGS
loader --job /sys/fs/cgroup/j1=3 --cap /sys/fs/cgroup/j1=0.3
rate cap-alone $1:0.30:0.03 || fail=1
wait $LP; lrc=$?; echo "SCX-STATE cap-alone: loader exit $lrc"; [ $lrc = 0 ] || fail=1
stop_hogs; after cap-alone

# ---- background
hog j1; hog j2; set -- $HOGS
allot-scx run --job /sys/fs/cgroup/j1=1 --job /sys/fs/cgroup/j2=1 --background /sys/fs/cgroup/j2 --for $((WARM + 2 * WINDOW + 5)) > /tmp/bg.out 2>&1 &
LP=$!
sleep $WARM
rate background $1:- $2:'<0.05' || fail=1
kill $1; wait $1 2>/dev/null
sleep 2
rate background-alone $2:'>0.90' || fail=1
wait $LP; lrc=$?; cat /tmp/bg.out | sed 's/^/SCX-LOADER /'; [ $lrc = 0 ] || { echo "SCX-RESULT background: loader exit $lrc"; fail=1; }
stop_hogs; after background

# ---- currency-cap: the two jobs of alice are cgroups under /sys/fs/cgroup/alice, whose
# cpu.stat sums them
hog alice/a1; hog alice/a2; hog b1; set -- $HOGS
allot-scx run --job /sys/fs/cgroup/alice/a1=1:alice --job /sys/fs/cgroup/alice/a2=1:alice --job /sys/fs/cgroup/b1=1:bob \
  --funding alice=300 --funding bob=100 --currency-cap alice=0.4 --for $((WARM + 2 * WINDOW + 5)) > /tmp/ccap.out 2>&1 &
LP=$!
sleep $WARM
rate currency-cap /sys/fs/cgroup/alice:0.40:0.03 $3:- || fail=1
kill $3; wait $3 2>/dev/null
sleep 2
rate currency-cap-alone /sys/fs/cgroup/alice:0.40:0.03 || fail=1
wait $LP; lrc=$?; sed 's/^/SCX-LOADER /' /tmp/ccap.out; [ $lrc = 0 ] || { echo "SCX-RESULT currency-cap: loader exit $lrc"; fail=1; }
stop_hogs; rmdir /sys/fs/cgroup/alice/a1 /sys/fs/cgroup/alice/a2 /sys/fs/cgroup/alice 2>/dev/null; after currency-cap
}
if only ebs; then ebs_checks; fi
