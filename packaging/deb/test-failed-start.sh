#!/bin/bash
# The .deb's postinst when the daemon cannot start, on a real systemd host (the systemd VM):
#   DEB=$(bash packaging/deb/build.sh --binary target/release/allot)
#   sudo bash tests/vm/systemd/run.sh --quiet --file "$DEB:/root/allot.deb" --script packaging/deb/test-failed-start.sh
# With a bad /etc/allot/allot.toml the start at install fails: dpkg -i still succeeds,
# says the service did not start, shows the daemon's refusal from the journal and where
# to look; with the config fixed the service starts, and a purge leaves nothing.
set -euo pipefail
. "$ALLOT_VM_LIB"
mkdir -p /etc/allot
printf 'tickest = 3\n' > /etc/allot/allot.toml
set +e
dpkg -i /root/allot.deb > /tmp/dpkg.out 2>&1; rc=$?
set -e
sed 's/^/dpkg: /' /tmp/dpkg.out >&2
check "dpkg -i succeeds although the daemon cannot start" test "$rc" = 0
check "the package is configured" sh -c 'dpkg-query -W -f "\${Status}" allot | grep -qx "install ok installed"'
check "the install says the service failed to start" grep -q "allot.service failed to start" /tmp/dpkg.out
check "it prints the daemon's refusal from the journal" grep -q "tickest" /tmp/dpkg.out
check "and where to look" grep -q "systemctl status allot" /tmp/dpkg.out
check "the service is enabled, not active" sh -c 'systemctl is-enabled --quiet allot && ! systemctl is-active --quiet allot'
rm /etc/allot/allot.toml
systemctl reset-failed allot || true
check "with the config fixed, it starts" sh -c 'systemctl start allot && systemctl is-active --quiet allot'
check "dpkg --purge removes it" dpkg --purge allot
check "nothing of allot's is left" sh -c 'test ! -e /var/lib/allot && test ! -e /usr/bin/allot'
checks_done
