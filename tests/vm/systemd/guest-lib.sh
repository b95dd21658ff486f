# shellcheck shell=bash
# Helpers for test scripts run by tests/vm/systemd/run.sh inside the systemd guest.
#   . "$ALLOT_VM_LIB"          (/usr/local/lib/allot-vm/guest-lib.sh)
# Works under `set -euo pipefail`. Messages go to stderr (the console); only what a
# function is documented to print goes to stdout.
#
#   login_session USER CMD...   start CMD in a new, real logind session of USER, in the
#                               background; print CMD's pid once it runs in
#                               user.slice/user-UID.slice/session-ID.scope
#   in_session USER CMD...      run CMD in a new logind session of USER, wait, return
#                               its status (stdout/stderr are the caller's)
#   session_of PID              print the logind session id of PID (from its cgroup)
#   cgroup_of PID               print PID's cgroup path (relative to /sys/fs/cgroup; as
#                               systemd tracks it: name=systemd's when booted v1)
#   wait_for [-t SECS] CMD...   run CMD every 0.2 s until it succeeds (default 30 s)
#   cgroup_snapshot [GLOB...]   print the CPU knobs of every cgroup not matched by a GLOB
#   check NAME CMD...           run CMD; print "ok NAME" or "FAIL NAME"; count failures
#   checks_done                 print the tally; return 1 if any check failed
#   vm_uptime                   seconds since the guest booted
#   cpus SECS NAME=PIDFILE...   print NAME=CPUS for each: the CPU its pid used over SECS
#   near VALUES NAME WANT TOL   VALUES (as cpus prints) has NAME within TOL of WANT
#   loop FILE                   a busy loop on CPU 1 that writes its pid to FILE first
#                               (exported: `allot run -- bash -c "loop FILE"`)
#   pid_of FILE, stop_pids FILE...   the pid a FILE holds; kill each and remove its FILE

vm_uptime() { cut -d' ' -f1 /proc/uptime; }

wait_for() {
  local t=30
  if [ "${1-}" = -t ]; then t=$2; shift 2; fi
  [ $# -gt 0 ] || { echo "wait_for: no command" >&2; return 2; }
  local end=$(( $(date +%s%N) + t * 1000000000 ))
  until "$@"; do
    if [ "$(date +%s%N)" -ge "$end" ]; then
      echo "wait_for: '$*' still fails after ${t}s" >&2
      return 1
    fi
    sleep 0.2
  done
}

cgroup_of() {
  local line want='^0::'
  # Booted v1 (no cgroup2 mount): systemd tracks units in its name=systemd hierarchy.
  if ! grep -q ' cgroup2 ' /proc/mounts; then want='^[0-9]*:name=systemd:'; fi
  line=$(grep -m1 "$want" "/proc/$1/cgroup" 2>/dev/null) || { echo "cgroup_of: no process $1" >&2; return 1; }
  line=${line#*:*:/}
  echo "${line:-.}"
}

# The hierarchy systemd tracks units in, where every unit has a cgroup: the cgroup2 mount
# (/sys/fs/cgroup on v2, /sys/fs/cgroup/unified booted hybrid), else name=systemd (v1).
units_root() {
  awk '$3 == "cgroup2" { print $2; f = 1; exit } END { if (!f) exit 1 }' /proc/mounts 2> /dev/null ||
    awk '$3 == "cgroup" && $4 ~ /(^|,)name=systemd(,|$)/ { print $2; exit }' /proc/mounts
}

session_of() {
  local cg
  cg=$(cgroup_of "$1") || return 1
  if [[ $cg =~ (^|/)user\.slice/user-[0-9]+\.slice/session-([^/]+)\.scope(/|$) ]]; then
    echo "${BASH_REMATCH[2]}"
  else
    echo "session_of: process $1 is in $cg, not in a session scope" >&2
    return 1
  fi
}

# A real logind session, as `su - USER` from a root shell makes one: su's PAM stack
# (/etc/pam.d/su-l -> common-session) runs pam_systemd, which asks logind for a new
# session; logind starts user@UID.service if needed and moves su into
# user.slice/user-UID.slice/session-ID.scope, where CMD (su's child) then runs.
# XDG_SESSION_CLASS=user makes it a "user" session, as an interactive login is (without
# it pam_systemd files a tty-less session as "background"). Session ids look like "c1"
# (su has no pam_loginuid, so there is no audit session id to take the number from).
# The session ends when CMD exits. CMD's stdout and stderr go to LOGIN_SESSION_LOG
# (default /var/log/allot-vm/session-USER.log, appended); its stdin is /dev/null.
_session_start() {   # USER LOG PIDFILE CMD...
  local user=$1 log=$2 pidf=$3; shift 3
  # su runs "$SHELL -c CODE PIDFILE LOG CMD...": $0 is PIDFILE, $1 LOG, then CMD
  # shellcheck disable=SC2016
  XDG_SESSION_CLASS=user setsid -f su -l "$user" \
    -c 'p=$0; l=$1; shift; echo $$ > "$p"; exec "$@" >>"$l" 2>&1 </dev/null' \
    -- "$pidf" "$log" "$@" </dev/null >>"$log" 2>&1
}

login_session() {
  [ $# -ge 2 ] || { echo "login_session: usage: login_session USER CMD..." >&2; return 2; }
  local user=$1; shift
  local uid
  uid=$(id -u "$user" 2>/dev/null) || { echo "login_session: no user '$user'" >&2; return 2; }
  local log=${LOGIN_SESSION_LOG:-/var/log/allot-vm/session-$user.log}
  mkdir -p /run/allot-vm/sessions "$(dirname "$log")"
  touch "$log"; chown "$user" "$log"
  local pidf
  pidf=$(mktemp /run/allot-vm/sessions/pid.XXXXXX); chown "$user" "$pidf"
  _session_start "$user" "$log" "$pidf" "$@"
  if ! wait_for -t "${LOGIN_SESSION_TIMEOUT:-90}" test -s "$pidf"; then
    echo "login_session: no session for $user; last lines of $log:" >&2
    tail -n 5 "$log" >&2; rm -f "$pidf"; return 1
  fi
  local pid
  pid=$(cat "$pidf"); rm -f "$pidf"
  local sid
  if ! sid=$(session_of "$pid" 2>&1); then
    echo "login_session: $user's command (pid $pid) is not in a session: $sid" >&2; return 1
  fi
  case $(cgroup_of "$pid") in
    user.slice/user-"$uid".slice/session-*.scope) ;;
    *) echo "login_session: pid $pid is in $(cgroup_of "$pid"), not user-$uid.slice" >&2; return 1 ;;
  esac
  echo "login_session: $user session $sid, pid $pid: $*" >&2
  echo "$pid"
}

in_session() {
  [ $# -ge 2 ] || { echo "in_session: usage: in_session USER CMD..." >&2; return 2; }
  local user=$1; shift
  id -u "$user" >/dev/null 2>&1 || { echo "in_session: no user '$user'" >&2; return 2; }
  # shellcheck disable=SC2016
  XDG_SESSION_CLASS=user su -l "$user" -c 'exec "$0" "$@"' "$@" </dev/null
}

# For "byte-identical before and after" assertions: one line per knob of every cgroup,
#   PATH FILE VALUE     (PATH relative to /sys/fs/cgroup, "." for the root; VALUE "-"
#                        when the file does not exist there, e.g. cpu.* where the cpu
#                        controller is not enabled in the parent)
# sorted by path. A cgroup is left out (with everything below it) when its path matches
# one of the bash glob patterns given, e.g.
#   cgroup_snapshot 'user.slice/user-2001.slice/allot*' 'system.slice/allot.service'
# Cgroups that come and go during a test (session scopes, user@UID.service's children,
# transient units) differ between two snapshots too: exclude them or keep them stable.
CGROUP_SNAPSHOT_FILES=(cgroup.subtree_control cpu.weight cpu.max cpu.max.burst cpu.idle)
cgroup_snapshot() {
  local base=/sys/fs/cgroup d rel g f v skip
  while IFS= read -r d; do
    rel=${d#"$base"}; rel=${rel#/}; rel=${rel:-.}
    skip=0
    for g in "$@"; do
      # shellcheck disable=SC2053
      if [[ $rel == $g || $rel == $g/* ]]; then skip=1; break; fi
    done
    [ "$skip" = 0 ] || continue
    for f in "${CGROUP_SNAPSHOT_FILES[@]}"; do
      # read, not $(cat): no fork per file (forks are slow under TCG); these files
      # are one line each
      v=-
      if [ -e "$d/$f" ]; then
        IFS= read -r v < "$d/$f" 2>/dev/null || true   # empty file: v=""
      fi
      printf '%s %s %s\n' "$rel" "$f" "$v"
    done
  done < <(find "$base" -type d 2>/dev/null | LC_ALL=C sort)
}

# settled_snapshot BEFORE AFTER SECS PATTERN...: cgroup_snapshot PATTERN... into AFTER,
# taken again every second for up to SECS until it equals BEFORE: a unit that outlives a
# test by seconds (a D-Bus-activated service on its idle timeout, a user's slice on its way
# out) is no leak. When a later one matched, what the first differed in is said on stdout
# ("settle| " lines) and the seconds it took. True once AFTER equals BEFORE; a difference
# that stays is for `same` to show.
settled_snapshot() {
  local before=$1 after=$2 secs=$3 i=0; shift 3
  cgroup_snapshot "$@" > "$after"
  diff -q "$before" "$after" > /dev/null && return 0
  diff -u "$before" "$after" | head -n 40 | sed 's/^/settle| /' > "$after.first"
  while [ "$i" -lt "$secs" ]; do
    sleep 1; i=$((i + 1))
    cgroup_snapshot "$@" > "$after"
    if diff -q "$before" "$after" > /dev/null; then
      cat "$after.first"; echo "settle| equal after $i s"
      return 0
    fi
  done
  return 1
}

CHECKS_OK=0
CHECKS_FAILED=0
# Each line ends with the seconds the script had run when the check ended (guest time), so
# that a slow run shows which part took the time.
check() {
  local name=$1; shift
  if "$@"; then
    echo "ok   $name [${SECONDS}s]"; CHECKS_OK=$((CHECKS_OK + 1))
  else
    echo "FAIL $name [${SECONDS}s]"; CHECKS_FAILED=$((CHECKS_FAILED + 1))
  fi
}
# same A B: true when the two files are byte-identical; otherwise their differences go to
# stdout, each line as "diff| ..." (at most 40), so the host's run.sh can print them with
# the failed checks (a CI log shows the FAIL line and what differed, not only the former).
# Compared by content with diff, not `cmp -s`: GNU cmp -s takes two regular files of
# different sizes as different without reading them, and a cgroup file's size is 0 (CI,
# 2026-11-27: the root's subtree_control "differed" from its copy, with no difference).
same() {
  local d
  d=$(diff -u "$1" "$2") && return 0
  printf '%s\n' "$d" | head -n 40 | sed 's/^/diff| /'
  return 1
}
checks_done() {
  echo "$CHECKS_OK passed, $CHECKS_FAILED failed"
  [ "$CHECKS_FAILED" = 0 ]
}

cpus() {
  python3 - "$@" <<'PY'
import os, sys, time
secs = float(sys.argv[1])
pids = {k: int(open(f).read().split()[0]) for k, f in (a.split("=", 1) for a in sys.argv[2:])}
def cpu(p):
    f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])
a = {k: cpu(p) for k, p in pids.items()}
t0 = time.monotonic(); time.sleep(secs); dt = time.monotonic() - t0
hz = os.sysconf("SC_CLK_TCK")
print(" ".join(f"{k}={(cpu(p) - a[k]) / hz / dt:.3f}" for k, p in pids.items()))
PY
}
near() { python3 -c "import sys; v = dict(x.split('=') for x in sys.argv[1].split()); sys.exit(0 if abs(float(v[sys.argv[2]]) - float(sys.argv[3])) <= float(sys.argv[4]) else 1)" "$@"; }
# On CPU 1 only: a background job may not run again on a busy CPU.
loop() { echo $$ > "$1"; exec taskset -c 1 sh -c 'while :; do :; done'; }
export -f loop
pid_of() { head -n1 "$1"; }
stop_pids() { for f in "$@"; do [ -s "$f" ] && kill "$(pid_of "$f")" 2> /dev/null || true; rm -f "$f"; done; }
