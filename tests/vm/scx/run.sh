#!/usr/bin/env bash
# allot's sched_ext scheduler in a VM: boots Debian sid's cloud kernel (7.2, sched_ext
# built in) with tests/vm/run.sh --kernel sid and runs checks.sh there: allot-scx loads
# the scheduler for CPU hogs pinned to one CPU; shares at tickets 3:2:1, insulation
# between two currencies, a job with members that sleep and wake, and, with every task
# scheduled (--all), allot's jobs weighing
# as one nice-0 task against a hog it does not manage (each within 0.02); the same hog
# beside a partial switch (measured); an ejection by sysrq-S the loader must notice; and
# after each unload no task left in sched_ext.
#
#   tests/vm/scx/run.sh [--allot-scx PATH] [tests/vm/run.sh options...]
#
# PATH defaults to target/release/allot-scx (cargo build --release -p allot-scx). The
# guest script is checks.sh beside this file; its SCX-RESULT lines are the results.
# Exit status: the guest's (0: every check held), or tests/vm/run.sh's harness codes.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
BIN="$REPO/target/release/allot-scx"
if [ "${1:-}" = --allot-scx ]; then BIN=$2; shift 2; fi
[ -x "$BIN" ] || { echo "scx-vm: no $BIN: cargo build --release -p allot-scx" >&2; exit 91; }
# Single-threaded TCG (tests/vm/run.sh says why).
export ALLOT_VM_TCG_THREAD=${ALLOT_VM_TCG_THREAD:-single}
exec bash "$REPO/tests/vm/run.sh" --kernel sid --add "$BIN" --env RUST_BACKTRACE=0 \
  --shell "$(cat "$HERE/checks.sh")" "$@"
