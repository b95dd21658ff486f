#!/bin/bash
# `allot-lab bench memory` in the systemd VM with a swap file (docs/memory.md, "Measured side
# by side"): the kernel alone, systemd-oomd, earlyoom, a static per-user MemoryMax= and allot,
# in one run. systemd-oomd and earlyoom are Debian's packages, installed here at run time
# (not in the cached image) and stopped; the bench starts each in its own arm only.
#   mkdir -p tests/vm/build/debs && cd tests/vm/build/debs &&
#     apt-get download systemd-oomd=252.39-1~deb12u2 earlyoom lsb-base && cd -
#     (systemd-oomd's version must be the guest's systemd's: tests/vm/build/systemd/image-*/packages.txt)
#   nice -n 19 cargo build --release -p allot --bin allot --bin allot-lab
#   flock /work/wt/vm.lock bash tests/vm/systemd/run.sh --timeout 2400 --allot target/release/allot \
#     --file target/release/allot-lab:/usr/local/bin/allot-lab --file tests/vm/build/debs:/root/debs \
#     --mem 1024 --script tests/vm/systemd/oom-bench.sh [-- BENCH-ARGS]
# BENCH-ARGS are passed to the bench (default: --users allot-tb,allot-ta --check --seconds 30;
# --arms kernel,allot runs only those arms, for a shorter run). The bench also writes its JSON
# report and chart in the guest (--output, --svg); the JSON comes back at the end of stdout
# between "# --- JSON begins" and "# --- JSON ends", with the chart's sha256. On the host:
#   sed -n '/^# --- JSON begins$/,/^# --- JSON ends$/{//!p}' STDOUT > run.json
#   target/release/allot-lab bench memory --replot run.json --svg run.svg   # the same chart
set -euo pipefail
# shellcheck source=tests/vm/systemd/guest-lib.sh
. "$ALLOT_VM_LIB"
echo "# $(systemctl --version | head -n1); Linux $(uname -r); $(grep MemTotal /proc/meminfo | tr -s ' '); $(nproc) CPUs"
dpkg -i /root/debs/*.deb >&2
systemctl disable --now earlyoom.service systemd-oomd.service systemd-oomd.socket >&2 2>&1 || true
echo "# installed at run time: $(dpkg-query -W -f '${Package} ${Version}  ' systemd-oomd earlyoom)"
echo "# systemd-oomd's shipped policy: $(cat /usr/lib/systemd/system/-.slice.d/*oomd* /usr/lib/systemd/system/user@.service.d/*oomd* /usr/lib/systemd/oomd.conf.d/*.conf | grep -v '^\[' | tr '\n' ' ')"
echo "# earlyoom's: $(grep '^EARLYOOM_ARGS' /etc/default/earlyoom)"
fallocate -l 512M /swapfile
chmod 600 /swapfile
mkswap /swapfile >&2
swapon /swapfile
echo "# swap: $(swapon --show=NAME,SIZE --noheadings | tr -s ' ')"
[ $# -gt 0 ] || set -- --users allot-tb,allot-ta --check --seconds 30
echo "# allot-lab bench memory $*"
rc=0
allot-lab bench memory "$@" --output /root/oom-bench.json --svg /root/oom-bench.svg || rc=$?
echo "# the killers' own words (journal):"
journalctl -b --no-pager -o short-monotonic -u systemd-oomd.service -u earlyoom.service | grep -vE 'Starting|Started|Stopping|Stopped|Deactivated|Consumed' | head -n 60 | sed 's/^/#   /' || true
echo "# the kernel's OOM kills (journal):"
journalctl -b -k --no-pager -o short-monotonic | grep -E 'Killed process|oom-kill:' | head -n 20 | sed 's/^/#   /' || true
echo "# systemd-oomd started and stopped (journal):"
journalctl -b --no-pager -o short-monotonic -u systemd-oomd.service -u systemd-oomd.socket | grep -E 'Started|Stopped|Listening' | sed 's/^/#   /' || true
if [ -s /root/oom-bench.json ]; then
  echo "# the bench's JSON report (--output, $(wc -c </root/oom-bench.json) bytes); its chart (--svg) in the guest has sha256 $(sha256sum </root/oom-bench.svg | cut -d' ' -f1)"
  echo "# --- JSON begins"
  cat /root/oom-bench.json
  echo "# --- JSON ends"
fi
exit "$rc"
