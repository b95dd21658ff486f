#!/bin/bash
# Memory by share on a systemd host (docs/memory.md): funding 300:100 of allot-ta (2001)
# and allot-tb (2002) becomes their slices' MemoryLow= 3:1, set through systemd;
# user.slice carries the sum; a hard memory cap of 64M! is the slice's MemoryMax=; a soft
# cap nobody set is not sent; a cap taken away by a reload goes back to infinity; a
# process in an over-share user's login session is ranked first for the OOM killer
# (oom_score_adj by share) and one of a user within their share is not; a stop takes back
# what was sent.
#   cargo build --release -p allot --bin allot
#   bash tests/vm/systemd/run.sh --allot target/release/allot --script tests/vm/systemd/memory.sh
set -euo pipefail
# shellcheck source=tests/vm/systemd/guest-lib.sh
. "$ALLOT_VM_LIB"
trap 'rc=$?; if [ $rc != 0 ]; then { echo "--- journal"; journalctl -b --no-pager -n 60 -u allot-mem -o short-monotonic; } >&2; fi' EXIT
prop() { systemctl show "$1" -p "$2" --value; }
echo "# $(systemctl --version | head -n1); $(grep MemTotal /proc/meminfo | tr -s ' ')"
echo "# cgroup2 mount options: $(awk '$5 == "/sys/fs/cgroup" { print $NF }' /proc/self/mountinfo)"
mkdir -p /etc/allot
printf '[funding]\nallot-ta = 300\nallot-tb = { funding = 100, mem = "64M!" }\n' > /etc/allot/allot.toml
allot config check >&2
systemd-run --unit=allot-mem /usr/local/bin/allot daemon
wait_for -t 60 allot status > /dev/null
tap=$(login_session allot-ta sh -c 'allot run -- sleep 1000 & wait')
wait_for -t 30 sh -c 'allot show | grep -q PROTECTED' || true
login_session allot-tb sleep 1000 > /dev/null
wait_for -t 30 sh -c '[ "$(systemctl show user-2002.slice -p MemoryLow --value)" != 0 ]' || true
a=$(prop user-2001.slice MemoryLow); b=$(prop user-2002.slice MemoryLow); u=$(prop user.slice MemoryLow)
echo "# MemoryLow=: user-2001.slice $a, user-2002.slice $b, user.slice $u"
check "funding 300:100 protects 3:1 (the slices' MemoryLow=: $a, $b)" python3 -c "import sys; a, b = $a, $b; sys.exit(not (b > 0 and abs(a / b - 3) < 0.02))"
check "user.slice's MemoryLow= is their sum (within 1 MiB): $u" python3 -c "import sys; sys.exit(not abs($u - $a - $b) <= 1 << 20)"
check "the kernel's memory.low is the value systemd was given" test "$(cat /sys/fs/cgroup/user.slice/user-2001.slice/memory.low)" = "$a"
check "a hard memory cap of 64M! is user-2002.slice's MemoryMax=" test "$(prop user-2002.slice MemoryMax)" = 67108864
check "no soft cap is sent where none is set" test "$(prop user-2001.slice MemoryHigh)" = infinity
allot status 2>&1 | grep -i memory >&2 || true
allot show >&2 || true
check "show has the memory table" sh -c 'allot show | grep -q PROTECTED'
# The cap taken away (reload), then allot-tb's session takes 600 MiB, over its 444 MiB share.
printf '[funding]\nallot-ta = 300\nallot-tb = 100\n' > /etc/allot/allot.toml
systemctl kill -s HUP allot-mem
check "a cap taken away by a reload is MemoryMax=infinity again" wait_for -t 15 sh -c '[ "$(systemctl show user-2002.slice -p MemoryMax --value)" = infinity ]'
printf 'import time\nb = bytearray(600 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nopen("/tmp/hog.ok", "w").write("1")\ntime.sleep(1000)\n' > /tmp/hog.py
rm -f /tmp/hog.ok
hog=$(login_session allot-tb python3 /tmp/hog.py)
wait_for -t 60 test -s /tmp/hog.ok || true
check "allot-tb's session process, over its share, is ranked first: oom_score_adj > 0" wait_for -t 15 sh -c "[ \$(cat /proc/$hog/oom_score_adj) -gt 0 ]"
echo "# oom_score_adj: allot-tb's hog $(cat /proc/$hog/oom_score_adj), allot-ta's session shell $(cat /proc/$tap/oom_score_adj)"
allot show 2>&1 | sed -n '/^CURRENCY  MEMORY/,/^$/p' >&2 || true
check "allot-ta's session process, within its share, is not raised" test "$(cat /proc/$tap/oom_score_adj)" -le 0
kill "$hog"
systemctl stop allot-mem
check "a stop takes back MemoryLow=" test "$(prop user-2001.slice MemoryLow)/$(prop user-2002.slice MemoryLow)/$(prop user.slice MemoryLow)" = 0/0/0
check "and MemoryMax=" test "$(prop user-2002.slice MemoryMax)" = infinity
checks_done
