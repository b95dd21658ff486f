# Guest script, the side-by-side bench (SCX_ONLY=bench only; after checks.sh, ebs.sh and
# boost.sh, sharing their helpers): the same rows under each scheduler, in one VM run.
# Measures, checks nothing but that each arm could start; prints SCX-BENCH lines.
#   arms     eevdf    the kernel's fair class alone: each job a cgroup whose cpu.weight is
#                     its tickets × 100, written by hand (no allot)
#            cgroup   allot's daemon with [scheduler] kind = "cgroup": `allot run` jobs
#            scx      allot's daemon with kind = "scx": allot's BPF scheduler (allot-scx)
#            flatcg   scx_flatcg (the kernel's example) over the eevdf arm's cgroups
#            bpfland  scx_bpfland (a latency scheduler of sched-ext/scx) over the same
#                     (these two only when the program is in the VM: run.sh --add PATH)
#   rows     ratio      jobs of tickets 3:2:1, one hog each, all on CPU 1: their shares
#                       and the largest error against 1/2, 1/3, 1/6
#            insulation currencies alice and bob funded alike (eevdf: cgroups of equal
#                       weight), alice's job one hog, bob's five, on CPU 1: the jobs'
#                       shares (their cgroups' cpu.stat) and alice's error against 1/2
#            latency    Petrou et al. 1999's Table 1: an interactive task (allot-scx probe,
#                       waking every 10 ms) in a job of tickets 3 against hogs at 3:2:1 on
#                       CPU 1: its wakeup latency's p50, p99 and max
#            hackbench  allot-scx hackbench (thread mode, BENCH_HB arguments) in a job of
#                       its own, on both CPUs, BENCH_REPS times: the median time, against
#                       the median of runs in the root cgroup under the kernel alone, each
#                       just before one in a job (eevdf, cgroup, scx: their root cgroup is
#                       the kernel's), or before the load and after the unload (flatcg,
#                       bpfland, which take every task). Under TCG on a shared host the
#                       time of one run moves with the host's load: only runs side by
#                       side in time are compared
BENCH_HB=${BENCH_HB:---groups 2 --loops 100}
BENCH_REPS=${BENCH_REPS:-5}
BD=/tmp/bench
CG=/sys/fs/cgroup
# cg PID: the cgroup directory of a process; fails for one gone or in the root cgroup
cg() { c=$(cut -d: -f3 /proc/$1/cgroup 2>/dev/null) && [ -n "$c" ] && [ "$c" != / ] && echo "$CG$c"; }
# job NAME TICKETS CURRENCY CMD...: CMD as a job of the arm ($ARM), in CURRENCY (- for
# the caller's own); its pid in JP
job() {
  n=$1 t=$2 c=$3; shift 3
  case $ARM in
    cgroup|scx) cur=""; [ "$c" = - ] || cur="--currency $c"
                $A run --strict -t $t $cur -- "$@" > /dev/null & JP=$! ;;
    *) mkdir -p $CG/b-$n; echo $((t * 100)) > $CG/b-$n/cpu.weight
       sh -c 'echo $$ > "$0/cgroup.procs"; exec "$@"' $CG/b-$n "$@" & JP=$! ;;
  esac
  JOBS="$JOBS $JP"
}
# end_jobs: kills every job's cgroup (all it holds), waits, removes the eevdf arm's
end_jobs() {
  for p in $JOBS; do d=$(cg $p) && echo 1 > $d/cgroup.kill; done
  for p in $JOBS; do wait $p 2>/dev/null; done
  JOBS=""
  sleep 0.5
  for d in $CG/b-*/; do [ -d $d ] && rmdir $d 2>/dev/null; done
}
SPIN='while :; do :; done'
# bench_share NAME ID:WANT...: as measure, one SCX-BENCH line (its error against a bound of 0.01)
bench_share() { TOL=0.01 measure "$@" | sed "s/^SCX-RESULT/SCX-BENCH $ARM/"; }
# hb_base LABEL: one hackbench run in the root cgroup (no job), its time in $BD/LABEL.base
hb_base() { allot-scx hackbench $BENCH_HB | sed -n 's/.*Time: //p' >> $BD/$1.base; }
# hb N LABEL: N hackbench runs in a job of the arm, times in $BD/LABEL; where the arm's
# scheduler leaves the root cgroup to the kernel alone (eevdf, cgroup, scx: partial
# switch), each after one run without a job, so both see the same host load
hb() {
  i=0; : > $BD/$2; : > $BD/$2.pol
  while [ $i -lt $1 ]; do
    case $ARM in eevdf|cgroup|scx) hb_base $2 ;; esac
    rm -f $BD/hb.out
    # sleep: the scx arm's loader puts a job's threads in sched_ext once a second; the
    # hackbench threads inherit the policy of the shell it set
    job hb 1 - sh -c "sleep 2; awk '/^policy/ {print \$3}' /proc/self/sched >> $BD/$2.pol; exec allot-scx hackbench $BENCH_HB > $BD/hb.out"
    wait $JP; end_jobs
    sed -n 's/.*Time: //p' $BD/hb.out >> $BD/$2
    i=$((i + 1))
  done
  echo "SCX-BENCH $ARM hackbench-runs: in a job $(tr '\n' ' ' < $BD/$2)s; policies seen: $(sort $BD/$2.pol | uniq -c | tr '\n' ' ')"
}
hb_n() { j=0; while [ $j -lt $1 ]; do hb_base $2; j=$((j + 1)); done; }
median() { sort -n $1 | awk '{v[NR] = $1} END {if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }

bench_rows() {
  # ratio
  job j1 3 - taskset -c 1 sh -c "$SPIN"; h1=$JP
  job j2 2 - taskset -c 1 sh -c "$SPIN"; h2=$JP
  job j3 1 - taskset -c 1 sh -c "$SPIN"; h3=$JP
  sleep $WARM
  echo "SCX-BENCH $ARM state: sched_ext $(cat /sys/kernel/sched_ext/state) ops $(cat /sys/kernel/sched_ext/root/ops 2>/dev/null); hog policies $(for p in $h1 $h2 $h3; do awk '/^policy/ {printf "%s ", $3}' /proc/$p/sched; done)"
  bench_share ratio $h1:0.5 $h2:0.3333 $h3:0.1667
  end_jobs
  # insulation
  job a1 1 alice taskset -c 1 sh -c "$SPIN"; a=$JP
  job b1 1 bob taskset -c 1 sh -c "for i in 1 2 3 4 5; do sh -c '$SPIN' & done; wait"; b=$JP
  sleep $WARM
  bench_share insulation $(cg $a):0.5 $(cg $b):0.5
  end_jobs
  # latency (Table 1)
  job p 3 - taskset -c 1 sh -c "sleep 2; exec allot-scx probe --every 10 --for $WINDOW > $BD/probe.$ARM"
  pp=$JP
  job j1 3 - taskset -c 1 sh -c "$SPIN"; job j2 2 - taskset -c 1 sh -c "$SPIN"; job j3 1 - taskset -c 1 sh -c "$SPIN"
  wait $pp
  echo "SCX-BENCH $ARM latency: $(cat $BD/probe.$ARM)"
  end_jobs
  hb $BENCH_REPS $ARM job
}

# sched: the daemon's scheduler line; until_sched PATTERN SECS: waits for it (daemon.sh's)
sched() { $A status 2>/dev/null | grep '^scheduler'; }
until_sched() {
  i=0
  until sched | grep -q "$1"; do i=$((i + 1)); [ $i -gt $(($2 * 20)) ] && return 1; sleep 0.05; done
}
# start_daemon KIND: allot's daemon with [scheduler] kind = KIND, currencies alice and bob
start_daemon() {
  D=/tmp/allotd-$1; mkdir -p $D
  printf 'scan_ms = 200\n[users]\nonly = []\n[scheduler]\nkind = "%s"\n[currencies.alice]\nfunding = 100\n[currencies.bob]\nfunding = 100\n' $1 > $D/allot.toml
  A="allot --socket $D/allot.sock"
  allot daemon --ephemeral --cgroup-root allot-bench-$1 --socket $D/allot.sock --state-dir $D --config $D/allot.toml > $D/daemon.log 2>&1 &
  DP=$!
  want="cgroup"; [ $1 = scx ] && want="scx (allot_stride loaded"
  if ! until_sched "$want" 60; then
    echo "SCX-BENCH $1: the daemon did not say \"$want\" within 60 s: $(sched)"; cat $D/daemon.log; fail=1; kill $DP; wait $DP; return 1
  fi
  echo "SCX-BENCH $1 daemon: $(sched)"
}
stop_daemon() { kill $DP; wait $DP; echo "SCX-BENCH $ARM daemon stopped (exit $?)"; }
# start_ext PROGRAM [ARGS]: an scx scheduler of its own (every task), until sched_ext says enabled
start_ext() {
  command -v $1 > /dev/null || { echo "SCX-BENCH $ARM: not in this VM run (no $1; run.sh --add PATH)"; return 1; }
  "$@" > $BD/$1.log 2>&1 & XP=$!
  i=0
  while [ "$(cat /sys/kernel/sched_ext/state)" != enabled ]; do
    i=$((i + 1))
    if [ $i -gt 900 ] || ! kill -0 $XP 2>/dev/null; then
      echo "SCX-BENCH $ARM: $1 did not enable sched_ext ($((i / 10)) s): $(grep -i -m 20 'error\|fail\|invalid\|verif\|libbpf:' $BD/$1.log | tr '\n' '|')"
      echo "SCX-BENCH $ARM: the last lines of its log: $(tail -n 8 $BD/$1.log | tr '\n' '|')"
      kill $XP 2>/dev/null; wait $XP; return 1
    fi
    sleep 0.1
  done
  echo "SCX-BENCH $ARM: $1 loaded, ops $(cat /sys/kernel/sched_ext/root/ops), switch_all $(cat /sys/kernel/sched_ext/switch_all 2>/dev/null)"
}
stop_ext() { kill $XP; wait $XP; echo "SCX-BENCH $ARM: $1 stopped (exit $?), sched_ext $(cat /sys/kernel/sched_ext/state); last lines: $(tail -n 3 $BD/$1.log | tr '\n' '|')"; }

bench_all() {
  mkdir -p $BD; JOBS=""
  WARM=${SCX_WARM:-3}; WINDOW=${SCX_WINDOW:-15}
  echo "SCX-BENCH setup: WARM $WARM s, WINDOW $WINDOW s, hackbench $BENCH_HB x $BENCH_REPS, $(nproc) CPUs, kernel $(uname -r)"
  ARM=eevdf
  bench_rows
  ARM=cgroup
  start_daemon cgroup && { bench_rows; stop_daemon; }
  ARM=scx
  start_daemon scx && { bench_rows; stop_daemon; after bench-scx; }
  # the outside schedulers take every task: their runs without a job come before the
  # load and after the unload (half each)
  ARM=flatcg
  if command -v scx_flatcg > /dev/null; then
    hb_n $((BENCH_REPS / 2 + 1)) flatcg
    start_ext scx_flatcg && { bench_rows; stop_ext scx_flatcg; after bench-flatcg; hb_n $((BENCH_REPS / 2 + 1)) flatcg; }
  else start_ext scx_flatcg; fi
  ARM=bpfland
  # scx_bpfland's __kconfig values: libbpf reads /boot/config-RELEASE (the guest has no
  # /proc/config.gz); bench-others.sh gives the kernel's config as a "program" to --add
  if [ -f /bin/kernel-config ]; then mkdir -p /boot && cp /bin/kernel-config /boot/config-$(uname -r) && echo "SCX-BENCH bpfland: /boot/config-$(uname -r) from /bin/kernel-config"; fi
  if command -v scx_bpfland > /dev/null; then
    hb_n $((BENCH_REPS / 2 + 1)) bpfland
    start_ext scx_bpfland -v && { bench_rows; stop_ext scx_bpfland; after bench-bpfland; hb_n $((BENCH_REPS / 2 + 1)) bpfland; }
  else start_ext scx_bpfland; fi
  for arm in eevdf cgroup scx flatcg bpfland; do
    [ -s $BD/$arm ] && [ -s $BD/$arm.base ] || continue
    m=$(median $BD/$arm); base=$(median $BD/$arm.base)
    echo "SCX-BENCH $arm hackbench: median $m s in a job against $base s without one (the kernel alone, $(wc -l < $BD/$arm.base) runs $(sort -n $BD/$arm.base | tr '\n' ' ')): $(awk -v a=$m -v b=$base 'BEGIN {printf "%+.1f%%", (a / b - 1) * 100}'); in a job $(sort -n $BD/$arm | tr '\n' ' ')"
  done
}
if only bench; then bench_all; fi
