#!/usr/bin/env bash
# allot's sched_ext scheduler in a VM: boots Debian sid's cloud kernel (7.2, sched_ext
# built in) with tests/vm/run.sh --kernel sid and runs checks.sh there: allot-scx loads
# the scheduler for CPU hogs pinned to one CPU; shares at tickets 3:2:1, insulation
# between two currencies, a job with members that sleep and wake, and, with every task
# scheduled (--all), allot's jobs weighing
# as one nice-0 task against a hog it does not manage (each within 0.02); the same hog
# beside a partial switch (measured); an ejection by sysrq-S the loader must notice; and
# after each unload no task left in sched_ext. Then ebs.sh: a hard cap of 0.3 CPU held
# within 0.03 against another job and alone, and a background job at most 0.05 beside a
# foreground hog and at least 0.90 alone. Then boost.sh: a probe job that sleeps and
# wakes every 10 ms beside hogs at 3:2:1, without and then with the boost per wakeup: its
# p99 wakeup latency lower with it, the hogs' shares within 0.02 in both; and the
# loader's --boost-window-ms in force: a probe job that bursts is refused the boost
# at most half as often over a 100 ms window as over 500 ms. Then sim.sh:
# three of allot-lab sim's scenarios run live and compared with the simulator's runs of
# them (shares within 0.02, the same ordering of latencies). Then storm.sh: a job of 1000
# CPU-bound threads and a fork storm, each against a one-hog job at equal tickets: every
# thread run, no ejection by the kernel's watchdog, each job within 0.05 of half; and 20
# jobs that come and go, whose BPF-side entries go with their cgroups. Then lottery.sh:
# the lottery mode at tickets 3:2:1, shares within 0.05 and an error that grows as a
# lottery's (150 ms or more), beside stride scheduling's (below 100 ms). Then daemon.sh: allot's daemon with
# [scheduler] kind = "scx" runs the scheduler for `allot run` jobs at 3:2:1, notices a
# sysrq-S ejection within a second and falls back to the cgroup backend keeping every
# job, loads it again on a reload (then in the lottery mode, on a reload with draw =
# "lottery"), holds `allot run --cap '0.3!'` and `--background` jobs as ebs.sh does,
# schedules every task on a reload with tasks = "all" (an `allot run` hog within 0.05 of
# half against a hog it does not manage), and unloads it at stop. Before it, focus.sh: a
# daemon reloaded to [policy] boost_below = 0.05 and boost_window_ms = 1000 loads the
# scheduler again with that window and leaves a probe job over its line unboosted, and
# `allot focus` boosts it (its p90 lower focused), at the default line it is boosted. --only bench runs bench.sh alone, which
# checks nothing: the side-by-side bench (docs/results/scx/): shares, insulation, Table 1
# latency and hackbench under the kernel alone, allot's cgroup backend, allot's BPF
# scheduler, and scx_flatcg and scx_bpfland when given (--add PATH, after run.sh's options).
#
#   tests/vm/scx/run.sh [--allot-scx PATH] [--allot PATH] [--only PART[,PART...]]
#                       [tests/vm/run.sh options...]
#
# PART: checks (the loader's: ratio, insulation, sleepers, outside, sysrq), ebs, boost,
# sim, storm, lottery, focus, daemon, bench; without --only every part but bench. VMs with parts
# split between them can run side by side, given each its own --log and --stdout (each is
# one host thread of single-threaded TCG; scripts/test runs two so, then the boost, the
# lottery and focus alone).
#
# The binaries default to target/release/allot-scx and target/release/allot (cargo build
# --release --workspace); allot-scx goes beside allot in the guest, where the daemon
# looks for it. --only daemon runs daemon.sh's checks alone, --only ebs ebs.sh's (a hard
# cap and background under the loader), --only boost boost.sh's, --only sim sim.sh's
# (allot-lab sim's fig3-ratio, table5-insulation and table1-bimodal run live and compared
# with the simulator's runs: allot-lab, beside allot, is put in the guest with it), --only
# storm storm.sh's, --only lottery lottery.sh's, --only focus focus.sh's, --only bench bench.sh's (the side-by-side bench, run only when asked). The guest script is
# checks.sh, ebs.sh, boost.sh, sim.sh, storm.sh, lottery.sh, bench.sh, focus.sh and daemon.sh beside this file; its
# SCX-RESULT lines are the results (SCX-BENCH lines the bench's measurements).
# Exit status: the guest's (0: every check held), or tests/vm/run.sh's harness codes.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
BIN="$REPO/target/release/allot-scx"
ALLOT="$REPO/target/release/allot"
ONLY=()
while [ $# -gt 0 ]; do
  case "$1" in
    --allot-scx) BIN=$2; shift 2 ;;
    --allot) ALLOT=$2; shift 2 ;;
    --only) [ -n "${2:-}" ] || { echo "scx-vm: --only needs parts: checks, ebs, boost, sim, storm, lottery, focus, daemon or bench, comma-separated" >&2; exit 2; }
            IFS=, read -ra parts <<< "$2"
            for p in "${parts[@]}"; do
              case "$p" in checks|ebs|boost|sim|storm|lottery|focus|daemon|bench) ;; *) echo "scx-vm: --only takes checks, ebs, boost, sim, storm, lottery, focus, daemon or bench (comma-separated), got '$p' in '$2'" >&2; exit 2 ;; esac
            done
            ONLY=(--env SCX_ONLY=$2); shift 2 ;;
    *) break ;;
  esac
done
[ -x "$BIN" ] || { echo "scx-vm: no $BIN: cargo build --release --workspace" >&2; exit 91; }
[ -x "$ALLOT" ] || { echo "scx-vm: no $ALLOT: cargo build --release --workspace" >&2; exit 91; }
# Single-threaded TCG (tests/vm/run.sh says why).
export ALLOT_VM_TCG_THREAD=${ALLOT_VM_TCG_THREAD:-single}
exec bash "$REPO/tests/vm/run.sh" --kernel sid --allot "$ALLOT" --add "$BIN" --env RUST_BACKTRACE=0 "${ONLY[@]}" \
  --shell "$(cat "$HERE/checks.sh" "$HERE/ebs.sh" "$HERE/boost.sh" "$HERE/sim.sh" "$HERE/storm.sh" "$HERE/lottery.sh" "$HERE/bench.sh" "$HERE/focus.sh" "$HERE/daemon.sh")" "$@"
