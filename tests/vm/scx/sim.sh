# Guest script, part four (after checks.sh, ebs.sh and boost.sh, sharing their helpers):
# the simulator and the live scheduler agree (docs/sim.md, docs/scx.md). For each
# scenario, `allot-lab sim live NAME` gives the plan: one job (cgroup) per task of the
# scenario with its tickets, currency and funding, and the task's behaviour. Every task
# is `allot-scx work` pinned to CPU 1, in its job's cgroup, all starting at one wall-clock
# second after `allot-scx run` has taken them; each prints its /proc/self/schedstat at the
# plan's marks. `allot-lab sim live NAME --compare FILE` then runs the same workload in the
# simulator, in this VM, and compares:
#   sim-fig3-ratio         three jobs at tickets 3:2:1 (Petrou et al. 1999 Fig 3): each
#                          job's share of the CPU in 5-25 s within 0.02 of the stride
#                          model's and of the lottery model's
#   sim-table5-insulation  one currency's one job against another's five (Tables 4/5):
#                          the same
#   sim-table1-bimodal     a bimodal job (CPU 15 s, then 5 ms of work every ~100 ms for
#                          20 s, then CPU 15 s) against a CPU-bound job and a waker
#                          (Table 1), with and then without the boost: the bimodal job's
#                          mean dispatch latency per window (time waited on a run queue
#                          over times put on a CPU) ordered in six pairs as the hybrid
#                          lottery model with and without its windowed ticket boost orders
#                          them
#   and after each live run: no task is SCHED_EXT and sched_ext is disabled.
# sim_scenario NAME
sim_scenario() {
  scen=$1
  plan=/tmp/$scen.plan
  if ! allot-lab sim live "$scen" > $plan 2>&1; then
    sed 's/^/SCX-SIM /' $plan; echo "SCX-RESULT sim-$scen: allot-lab sim live gave no plan"; fail=1; return
  fi
  secs=$(awk '$1 == "seconds" {print $2}' $plan)
  marks=$(awk '$1 == "marks" {print $2}' $plan)
  opts=$(awk '$1 == "funding" {printf " --funding %s=%s", $2, $3} $1 == "job" {printf " --job /sys/fs/cgroup/%s=%s:%s", $2, $4, $5}' $plan)
  : > /tmp/$scen.measured
  awk '$1 == "run" {$1 = ""; print}' $plan > /tmp/$scen.runs
  while read label extra; do
    start=$(( $(date +%s) + 5 ))
    pids=""
    while read kind dir task tickets cur beh; do
      [ "$kind" = job ] || continue
      mkdir -p /sys/fs/cgroup/$dir
      taskset -c 1 sh -c "echo \$\$ > /sys/fs/cgroup/$dir/cgroup.procs; exec allot-scx work --start $start --for $secs --marks $marks $beh" \
        > /tmp/$scen-$label-$task.out 2>&1 &
      pids="$pids $!"
    done < $plan
    sleep 2 # every task in its job's cgroup before the loader puts the jobs' threads in sched_ext
    allot-scx run $opts $extra --for $((secs + 5)) > /tmp/$scen-$label.loader 2>&1 &
    LP=$!
    for p in $pids; do wait $p; done
    wait $LP; lrc=$?
    sed "s/^/SCX-LOADER $scen $label: /" /tmp/$scen-$label.loader
    [ $lrc = 0 ] || { echo "SCX-RESULT sim-$scen $label: loader exit $lrc"; fail=1; }
    while read kind dir task rest; do
      [ "$kind" = job ] && sed "s/^/$label $task /" /tmp/$scen-$label-$task.out >> /tmp/$scen.measured
    done < $plan
    stop_hogs; after sim-$scen-$label
  done < /tmp/$scen.runs
  sed 's/^/SCX-SIM-READING /' /tmp/$scen.measured
  if allot-lab sim live "$scen" --compare /tmp/$scen.measured > /tmp/$scen.cmp 2>&1; then
    sed 's/^/SCX-SIM /' /tmp/$scen.cmp
    echo "SCX-RESULT sim-$scen: $(tail -n 1 /tmp/$scen.cmp)"
  else
    sed 's/^/SCX-SIM /' /tmp/$scen.cmp
    echo "SCX-RESULT sim-$scen: FAILED: $(tail -n 1 /tmp/$scen.cmp)"; fail=1
  fi
}
sim_checks() {
  for s in fig3-ratio table5-insulation table1-bimodal; do sim_scenario $s; done
}
if only sim; then sim_checks; fi
