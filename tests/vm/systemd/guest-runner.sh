#!/bin/bash
# The guest side of tests/vm/systemd/run.sh: ExecStart of allot-vm-test.service
# (installed at /usr/local/lib/allot-vm/runner). It waits until the boot is complete,
# installs the --deb packages, runs the test script as root, sends the script's stdout
# byte-exact to the second serial port (/dev/ttyS1), prints the exit marker on the
# console and powers off at once.
#
# Its own stdout and stderr, and the script's stderr, go straight to the console
# (StandardOutput=tty, TTYPath=/dev/console: written in order, not through journald).
# Markers go to the console for people and to the third serial port (/dev/ttyS2, the
# control channel run.sh reads), one line each:
#   ALLOT-VM-BOOTED uptime=S state=running|degraded ...   the script is about to start
#   ALLOT-VM-SETUP-FAILED: WHY                            run.sh exits 98
#   ALLOT-VM-EXIT=RC bytes=N sha256=HEX                   the script's status and stdout
set -u
D=/usr/local/lib/allot-vm
E=/etc/allot-vm
CTL=/dev/ttyS2
up() { cut -d' ' -f1 /proc/uptime; }
stty -F "$CTL" raw -echo 2>/dev/null || echo "allot-vm: no control channel $CTL"
# a marker line, on the control channel (close() waits until the UART sent it) and the console
mark() { echo "$*"; printf '%s\n' "$*" > "$CTL"; }
finish() {
  sync
  sleep 0.2
  systemctl poweroff -ff
  echo o > /proc/sysrq-trigger
  sleep 60
}
setup_failed() { mark "ALLOT-VM-SETUP-FAILED: $*"; finish; exit 1; }

echo "allot-vm: runner started at uptime $(up)s"
# The boot transaction is done only once every job has finished; this unit is
# Type=exec, so its own job ends at once and does not hold the boot up.
state=$(timeout 300 systemctl is-system-running --wait 2>/dev/null)
case "$state" in
  running|degraded) ;;
  *) systemctl list-jobs --no-pager 2>&1 | head -n 20
     setup_failed "system state is '$state' (want running or degraded)" ;;
esac
BOOT_UPTIME=$(up)
failed=$(systemctl --failed --no-legend --plain 2>/dev/null | cut -d' ' -f1 | tr '\n' ' ')
mark "ALLOT-VM-BOOTED uptime=${BOOT_UPTIME}s state=$state kernel=$(uname -r) cpus=$(nproc)" \
     "systemd=$(systemctl --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p')${failed:+ failed-units=$failed}"

# --deb packages, in the order given, in one dpkg call (so they may depend on each other)
if [ -f "$E/debs.list" ]; then
  mapfile -t debs < "$E/debs.list"
  if [ ${#debs[@]} -gt 0 ]; then
    echo "allot-vm: dpkg -i ${debs[*]##*/}"
    DEBIAN_FRONTEND=noninteractive dpkg -i "${debs[@]}" 2>&1 \
      || setup_failed "dpkg -i ${debs[*]##*/} failed"
    echo "allot-vm: packages installed at uptime $(up)s"
  fi
fi

# the script: root, cwd /root, stdin /dev/null, stdout to a file (sent at the end),
# stderr to the console and the journal
set --
[ -f "$E/args" ] && . "$E/args"
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb ALLOT_VM=1 RUST_BACKTRACE=1
export ALLOT_VM_LIB=$D/guest-lib.sh ALLOT_VM_BOOT_UPTIME=$BOOT_UPTIME ALLOT_VM_STATE=$state
[ -f "$E/env" ] && . "$E/env"
mkdir -p /run/allot-vm
OUT=/run/allot-vm/stdout
: > "$OUT"
cd /root || setup_failed "no /root"
bash "$E/script" "$@" </dev/null >"$OUT" &
spid=$!
# the stdout, live on the console too (made printable there: cat -v)
tail -q -n +1 -f --pid="$spid" "$OUT" | cat -v &
tpid=$!
wait "$spid"
rc=$?
wait "$tpid" 2>/dev/null
echo "allot-vm: script exited $rc at uptime $(up)s"

# what the script wrote until it exited, byte for byte, to the second serial port
cp "$OUT" "$OUT.final"
bytes=$(stat -c %s "$OUT.final")
sum=$(sha256sum < "$OUT.final" | cut -d' ' -f1)
if [ -c /dev/ttyS1 ] && stty -F /dev/ttyS1 raw -echo 2>/dev/null; then
  cat "$OUT.final" > /dev/ttyS1   # close() waits until the UART has sent it all
else
  echo "allot-vm: no /dev/ttyS1: the script's stdout cannot be sent back"
fi
mark "ALLOT-VM-EXIT=$rc bytes=$bytes sha256=$sum"
finish
