# scx_flatcg with cgroups of cpu.weight 300/200/100, two CPU loops each: pinned to CPU 1,
# then free on both CPUs; the same under the kernel alone first
set -u
W=15
CG=/sys/fs/cgroup
echo "FCG root subtree_control: $(cat $CG/cgroup.subtree_control)"
usage() { awk '/^usage_usec/ {print $2}' $CG/$1/cpu.stat; }
run() {
  label=$1; pin=$2; PIDS=""
  for j in j1:300 j2:200 j3:100; do
    n=${j%%:*}; w=${j##*:}
    mkdir -p $CG/$n; echo $w > $CG/$n/cpu.weight
    for k in 1 2; do
      sh -c "echo \$\$ > $CG/$n/cgroup.procs; exec $pin sh -c 'while :; do :; done'" &
      PIDS="$PIDS $!"
    done
  done
  sleep 3
  a1=$(usage j1); a2=$(usage j2); a3=$(usage j3)
  sleep $W
  b1=$(usage j1); b2=$(usage j2); b3=$(usage j3)
  echo "$label $a1 $a2 $a3 $b1 $b2 $b3" | awk -v w=$W '{d1=$5-$2; d2=$6-$3; d3=$7-$4; t=d1+d2+d3; printf "FCG-RESULT %s: shares %.4f %.4f %.4f (weights 0.5 0.3333 0.1667); CPUs busy %.3f\n", $1, d1/t, d2/t, d3/t, t/(w*1e6)}'
  kill $PIDS; for p in $PIDS; do wait $p 2>/dev/null; done
  sleep 0.5
  rmdir $CG/j1 $CG/j2 $CG/j3
}
run eevdf-pinned "taskset -c 1"
run eevdf-free ""
scx_flatcg > /tmp/fcg.log 2>&1 &
FP=$!
i=0; while [ "$(cat /sys/kernel/sched_ext/state)" != enabled ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
echo "FCG state $(cat /sys/kernel/sched_ext/state) ops $(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)"
run flatcg-pinned "taskset -c 1"
run flatcg-free ""
kill $FP; wait $FP
echo "FCG flatcg stopped: $(tail -n 3 /tmp/fcg.log | tr '\n' '|')"
