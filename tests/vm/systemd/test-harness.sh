#!/usr/bin/env bash
# Tests of the harness itself (host side): bad input, exit codes, byte-exact stdout,
# --file/--deb/--env/--allot, and every harness failure a VM run can end in.
#   sudo bash tests/vm/systemd/test-harness.sh          (2–3.5 minutes: 7 VM boots)
# Prints one line per case; exits 1 if any case failed.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUN="$HERE/run.sh"
T=$(mktemp -d /tmp/allot-vm-harness.XXXXXX)
trap 'rm -rf "$T"' EXIT
failed=0

# case NAME WANT_EXIT run.sh-ARGS...
case_() {
  local name=$1 want=$2; shift 2
  local t0=$SECONDS rc
  bash "$RUN" --quiet --log "$T/console.log" --stdout "$T/stdout" "$@" >"$T/out" 2>"$T/err"
  rc=$?
  if [ "$rc" = "$want" ]; then
    printf 'ok   %-46s exit %s (%ss)\n' "$name" "$rc" $((SECONDS - t0))
    return 0
  fi
  printf 'FAIL %-46s exit %s, want %s (%ss)\n' "$name" "$rc" "$want" $((SECONDS - t0))
  tail -n 5 "$T/err" | sed 's/^/     /'
  failed=$((failed + 1))
  return 1
}

echo 'exit 0' > "$T/true.sh"
# ---- bad input: one clear error, no VM
case_ "no --script"                         2
case_ "unknown option"                      2 --script "$T/true.sh" --bogus
case_ "--script that does not exist"        2 --script "$T/nope.sh"
case_ "--file without ':'"                  2 --script "$T/true.sh" --file "$T/true.sh"
case_ "--file with a relative destination"  2 --script "$T/true.sh" --file "$T/true.sh:etc/x"
case_ "--file whose source is missing"      2 --script "$T/true.sh" --file "$T/nope:/etc/x"
case_ "--deb that is not a package"         2 --script "$T/true.sh" --deb "$T/true.sh"
case_ "--timeout 0"                         2 --script "$T/true.sh" --timeout 0
case_ "--env without '='"                   2 --script "$T/true.sh" --env FOO
case_ "--allot that does not exist"        91 --script "$T/true.sh" --allot "$T/nope"

# ---- a full run: exit status, byte-exact stdout, files, packages, env, args
mkdir -p "$T/deb/DEBIAN" "$T/deb/usr/share/allot-vm-demo" "$T/units"
printf 'Package: allot-vm-demo\nVersion: 1.0\nArchitecture: all\nMaintainer: allot <allot@localhost>\nDescription: harness test\n' > "$T/deb/DEBIAN/control"
echo from-deb > "$T/deb/usr/share/allot-vm-demo/hello"
dpkg-deb -b "$T/deb" "$T/demo.deb" >/dev/null
printf '[Service]\nType=oneshot\nExecStart=/bin/true\n' > "$T/units/allot-vm-demo.service"
head -c 100000 /dev/urandom > "$T/rand.bin"
printf 'a\r\nb\0c\r' >> "$T/rand.bin"   # CR, NUL and no final newline, too
cat > "$T/full.sh" <<'EOF'
set -euo pipefail
test "$#/$1/$2" = "2/a b/c'd"
test "$FOO" = 'x y$z'
test "$(cat /usr/share/allot-vm-demo/hello)" = from-deb
systemctl start allot-vm-demo.service
test "$(stat -c %U /etc/demo/)" = root
cmp /opt/rand.bin /etc/demo/rand.bin
allot --version >/dev/null
cat /opt/rand.bin
exit 7
EOF
printf '#!/bin/sh\necho fake allot\n' > "$T/allot"; chmod +x "$T/allot"
if case_ "script exit 7, files, deb, env, args"  7 --script "$T/full.sh" --allot "$T/allot" \
     --deb "$T/demo.deb" --file "$T/units:/etc/systemd/system" --file "$T/rand.bin:/opt/" \
     --file "$T/rand.bin:/etc/demo/rand.bin" --env 'FOO=x y$z' -- "a b" "c'd"; then
  if cmp -s "$T/rand.bin" "$T/stdout"; then echo "ok   stdout is byte-exact (100 KB of random bytes)"
  else echo "FAIL stdout is not byte-exact"; failed=$((failed + 1)); fi
fi

# a failed script names its failed checks on stderr (CI keeps no stdout file)
# and, for a byte-identical check (guest-lib's `same`), what differed
printf 'echo "ok   first"; echo "diff| -a 1"; echo "diff| +a 2"; echo "FAIL second"; echo "ok   third"; exit 1\n' > "$T/fails.sh"
if case_ "a failed script's FAIL lines on stderr"  1 --script "$T/fails.sh"; then
  if grep -qx 'FAIL second' "$T/err" && ! grep -q 'ok   third' "$T/err"; then
    echo "ok   stderr names the failed check, and only it"
  else echo "FAIL stderr does not name the failed check"; failed=$((failed + 1)); fi
  if grep -qx 'diff| -a 1' "$T/err" && grep -qx 'diff| +a 2' "$T/err"; then
    echo "ok   stderr shows what differed"
  else echo "FAIL stderr does not show what differed"; failed=$((failed + 1)); fi
fi

# ---- every way a VM run can fail
mkdir -p "$T/baddeb/DEBIAN"
printf 'Package: allot-vm-bad\nVersion: 1.0\nArchitecture: all\nDepends: allot-vm-no-such-package\nMaintainer: allot <allot@localhost>\nDescription: unmet dependency\n' > "$T/baddeb/DEBIAN/control"
dpkg-deb -b "$T/baddeb" "$T/bad.deb" >/dev/null
case_ "98: dpkg -i of a --deb fails"        98 --script "$T/true.sh" --deb "$T/bad.deb"
echo 'echo c > /proc/sysrq-trigger; sleep 60' > "$T/crash.sh"
case_ "97: the guest kernel crashes"        97 --script "$T/crash.sh"
echo 'printf junk > /dev/ttyS1; echo fine' > "$T/junk.sh"
case_ "99: stdout garbled on the way"       99 --script "$T/junk.sh"
printf '/dev/allot-vm-none /mnt ext4 defaults,x-systemd.device-timeout=1s 0 0\n' > "$T/fstab"
case_ "96: the boot falls into emergency mode" 96 --script "$T/true.sh" --file "$T/fstab:/etc/fstab"
case_ "95: timeout"                         95 --script "$T/true.sh" --timeout 5

echo "harness tests: $failed failed"
[ "$failed" = 0 ]
