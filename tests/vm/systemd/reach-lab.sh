#!/bin/bash
# The reach, logout and session-share checks of sessions.sh alone, in one boot of the
# systemd VM (the whole allot.sh takes 400 s and more under TCG): the package installed,
# allot-ta and allot-tb logged in and funded 100, then each function named after `--` (by
# default: reach_checks logout_checks, then sessions_plan_counts_sessions three times, so
# the share check is seen over several runs in one boot).
#   bash packaging/deb/build.sh --binary target/release/allot
#   tests/vm/systemd/run.sh --timeout 2400 --file target/debian/allot_0.1.0-1_amd64.deb:/root/allot.deb \
#     --file tests/vm/systemd/sessions.sh:/root/sessions.sh --script tests/vm/systemd/reach-lab.sh
set -euo pipefail
. "$ALLOT_VM_LIB"
A=/usr/bin/allot
check "dpkg -i installs the package" dpkg -i /root/allot.deb
pa=$(login_session allot-ta sleep 3000)
pb=$(login_session allot-tb sleep 3000)
$A fund allot-ta 100 > /dev/null
$A fund allot-tb 100 > /dev/null
. /root/sessions.sh
[ $# -gt 0 ] || set -- reach_checks logout_checks sessions_plan_counts_sessions sessions_plan_counts_sessions sessions_plan_counts_sessions
for f in "$@"; do
  case $f in
    reach_checks | logout_checks | sessions_*) echo "reach-lab: $f at uptime $(vm_uptime) s" >&2; "$f" ;;
    *) echo "reach-lab: unknown function $f (allowed: reach_checks, logout_checks, sessions_*)" >&2; exit 2 ;;
  esac
done
kill "$pa" "$pb" 2> /dev/null || true
checks_done
