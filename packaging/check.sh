#!/usr/bin/env bash
# Builds both packages from one binary and checks them by their own families' tools:
#   bash packaging/check.sh [--binary PATH]     (default: what packaging/binary.sh builds:
#                                                 $CARGO_TARGET_DIR or target, /HOST-TRIPLE/release/allot)
#
#   glibc      the binary needs no glibc symbol version newer than packaging/binary.sh's
#              floor (2.28, RHEL 8's), so both packages install where docs/systemd.md says
#              they do; a plain `cargo build --release` on Debian 12 needs 2.34 and fails here
#   lintian    on the .deb: fails on any error or warning not overridden
#              (packaging/deb/lintian-overrides, justified in packaging/deb/README.md)
#   rpmlint    on the .rpm with packaging/rpm/rpmlint.toml: fails on any error; warnings
#              are printed (each justified in packaging/rpm/README.md)
#   scripts    `rpm -qp --scripts` printed; every maintainer script and scriptlet is run
#              against stubs of systemctl, deb-systemd-invoke, journalctl and allot in a
#              private mount namespace: a first install enables and starts, a failed start
#              is reported (with the journal) without failing, an upgrade restarts, a
#              removal stops then releases, only purge (deb) and erase (rpm) remove
#              /var/lib/allot, and without systemd running nothing is started
#   contents   `dpkg-deb -c` against `rpm -qlp`: the same files with the same bytes
#              (sha256), modulo the paths each family puts them at; only the files of one
#              family's own conventions (listed below) may differ; both hold the binary,
#              allot(1), allot-run(1), allot.toml(5) and the example config
#   product    the packaged binary has none of the lab's commands (simulator, benchmarks,
#              selftest, load generators: allot-lab, never packaged)
# Needs root (unshare for the scripts' namespace), dpkg-deb, lintian, rpm, rpmbuild, rpmlint.
set -euo pipefail
TARGET=$(realpath -m "${CARGO_TARGET_DIR:-$(dirname "$0")/../target}")
BIN=$TARGET/$(rustc -vV | sed -n 's/^host: //p')/release/allot
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) BIN=$(realpath -m "$2"); shift 2 ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "packaging/check.sh: unknown argument $1 (allowed: --binary PATH)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
for t in dpkg-deb lintian rpm rpmbuild rpmlint unshare; do
  command -v "$t" >/dev/null || { echo "packaging/check.sh: missing $t (apt-get install rpm rpmlint lintian)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "packaging/check.sh: needs root (the maintainer scripts run in a private mount namespace)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "packaging/check.sh: $BIN is not an executable (bash packaging/binary.sh builds it)" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/allot-check.XXXXXX")
trap 'rm -rf "$W"' EXIT
FAILED=0
fail() { echo "packaging/check.sh: FAIL: $*" >&2; FAILED=1; }

echo "== glibc: the newest symbol version the binary needs, against the floor"
FLOOR=$(bash packaging/binary.sh --floor)
NEWEST=$(objdump -T "$BIN" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -n1)
if [ -z "$NEWEST" ]; then
  fail "objdump -T $BIN shows no GLIBC_ symbol version (not a glibc binary?)"
elif [ "$(printf '%s\n%s\n' "$NEWEST" "$FLOOR" | sort -V | tail -n1)" != "$FLOOR" ]; then
  objdump -T "$BIN" | grep -E "GLIBC_($(printf '%s' "$NEWEST" | sed 's/\./\\./g'))[^0-9.]" | sed 's/^/  needs: /' | head -n 5 >&2
  fail "$BIN needs glibc $NEWEST, newer than the floor $FLOOR (RHEL 8's): build it with bash packaging/binary.sh"
else
  echo "ok: needs glibc $NEWEST at most (floor $FLOOR)"
fi

echo "== build"
DEB=$(bash packaging/deb/build.sh --binary "$BIN" --out "$W/out")
RPM=$(bash packaging/rpm/build.sh --binary "$BIN" --out "$W/out" 2> >(grep -v 'brp-compress: [0-9]*: read: Illegal option -d' >&2))
echo "$DEB"; echo "$RPM"

echo "== lintian"
# Without --show-overrides: overridden tags do not count towards --fail-on.
# Every tag down to pedantic is shown; only errors and warnings fail.
set +e
lintian --fail-on error,warning --display-level '>=pedantic' "$DEB" > "$W/lintian.txt" 2>&1; rc=$?
set -e
grep -v 'running with root privileges' "$W/lintian.txt" || true
[ $rc = 0 ] || fail "lintian: errors or warnings above that no override covers (exit $rc)"
lintian --show-overrides "$DEB" 2>/dev/null | grep '^O:' | sed 's/^/overridden: /' || true

echo "== rpmlint"
set +e
rpmlint -c packaging/rpm/rpmlint.toml "$RPM" > "$W/rpmlint.txt" 2>&1; rc=$?
set -e
grep -E '^[^ ]+: [EW]: |packages and' "$W/rpmlint.txt" || true
if [ $rc -ne 0 ] || ! grep -q ' 0 errors,' "$W/rpmlint.txt"; then
  cat "$W/rpmlint.txt" >&2; fail "rpmlint: errors (exit $rc)"
fi

echo "== rpm -qp --scripts"
rpm -qp --scripts "$RPM"
mkdir -p "$W/deb" "$W/rpm-scripts"
dpkg-deb -e "$DEB" "$W/deb/DEBIAN"
rpm -qp --qf '%{POSTIN}' "$RPM" > "$W/rpm-scripts/post"
rpm -qp --qf '%{PREUN}' "$RPM" > "$W/rpm-scripts/preun"
rpm -qp --qf '%{POSTUN}' "$RPM" > "$W/rpm-scripts/postun"
for f in "$W"/deb/DEBIAN/postinst "$W"/deb/DEBIAN/prerm "$W"/deb/DEBIAN/postrm "$W"/rpm-scripts/*; do
  sh -n "$f" || fail "$(basename "$f"): not valid sh"
done

# Stubs: each logs its arguments; FAIL_START=1 makes a start or restart fail.
S=$W/stubs; mkdir -p "$S"
for c in systemctl deb-systemd-invoke deb-systemd-helper journalctl allot; do
  cat > "$S/$c" <<EOF
#!/bin/sh
echo "$c \$*" >> "\$STUB_LOG"
case "$c \$*" in
  "journalctl "*) echo "allot[1]: error: /etc/allot/allot.toml: line 3: unknown key \"tickest\"" ;;
  "deb-systemd-invoke start "*|"deb-systemd-invoke restart "*|"systemctl start "*|"systemctl restart "*)
    [ "\${FAIL_START:-0}" = 1 ] && { echo "Job for allot.service failed." >&2; exit 1; } ;;
  "deb-systemd-helper --quiet was-enabled "*) exit 0 ;;
esac
exit 0
EOF
  chmod 0755 "$S/$c"
done
# run NAME SYSTEMD(yes|no) FAIL_START SCRIPT ARGS...: runs SCRIPT as root in a private
# mount namespace (tmpfs over /run and /var/lib, the stubs first in PATH) with a state
# file in /var/lib/allot; leaves in $W/NAME.{log,err,rc,state} what it did.
run() {
  local name=$1 sd=$2 fs=$3; shift 3
  : > "$W/$name.log"
  set +e
  STUB_LOG=$W/$name.log FAIL_START=$fs PATH=$S:/usr/sbin:/usr/bin:/sbin:/bin unshare -m sh -c '
    set -e
    mount --make-rprivate /
    mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /var/lib
    [ "$0" = yes ] && mkdir -p /run/systemd/system
    mkdir -p /var/lib/allot && echo funding > /var/lib/allot/state.json
    set +e; sh "$@"; rc=$?
    if [ -e /var/lib/allot/state.json ]; then echo kept; else echo removed; fi > "'"$W/$name.state"'"
    exit $rc' "$sd" "$@" 2> "$W/$name.err"
  echo $? > "$W/$name.rc"
  set -e
}
expect() {  # NAME WHAT TEST...: one verdict on a run
  local name=$1 what=$2; shift 2
  if "$@"; then echo "ok: $name: $what"; else fail "$name: $what"; sed 's/^/  log: /' "$W/$name.log" >&2; sed 's/^/  stderr: /' "$W/$name.err" >&2; fi
}
logged() { grep -qx -- "$2" "$W/$1.log"; }
not_logged() { ! grep -q -- "$2" "$W/$1.log"; }
in_order() { grep -n -- "$2" "$W/$1.log" | head -n1 | cut -d: -f1 > "$W/a"; grep -n -- "$3" "$W/$1.log" | head -n1 | cut -d: -f1 > "$W/b"; [ -s "$W/a" ] && [ -s "$W/b" ] && [ "$(cat "$W/a")" -lt "$(cat "$W/b")" ]; }
rc_is() { [ "$(cat "$W/$1.rc")" = "$2" ]; }
state_is() { [ "$(cat "$W/$1.state")" = "$2" ]; }
err_has() { grep -q -- "$2" "$W/$1.err"; }
err_empty() { [ ! -s "$W/$1.err" ]; }

echo "== maintainer scripts (.deb)"
D=$W/deb/DEBIAN
run deb-install yes 0 "$D/postinst" configure
expect deb-install "first install enables and starts" sh -c "grep -qx 'deb-systemd-helper enable allot.service' '$W/deb-install.log' && grep -qx 'deb-systemd-invoke start allot.service' '$W/deb-install.log'"
expect deb-install "a start that works says nothing" err_empty deb-install
expect deb-install "the socket is enabled and started before the service" sh -c "grep -qx 'deb-systemd-helper enable allot.socket' '$W/deb-install.log' && grep -n 'start allot' '$W/deb-install.log' | head -n1 | grep -q 'start allot.socket'"
run deb-install-fails yes 1 "$D/postinst" configure
expect deb-install-fails "a failed start does not fail the package" rc_is deb-install-fails 0
expect deb-install-fails "a failed start is reported" err_has deb-install-fails "allot.service failed to start"
expect deb-install-fails "with the daemon's log" err_has deb-install-fails 'unknown key "tickest"'
expect deb-install-fails "and where to look" err_has deb-install-fails "systemctl status allot"
run deb-upgrade yes 0 "$D/postinst" configure 0.0.9-1
expect deb-upgrade "an upgrade restarts" logged deb-upgrade "deb-systemd-invoke restart allot.service"
run deb-container no 0 "$D/postinst" configure
expect deb-container "without systemd running: enabled, not started" sh -c "grep -qx 'deb-systemd-helper enable allot.service' '$W/deb-container.log' && ! grep -q 'invoke' '$W/deb-container.log'"
run deb-remove yes 0 "$D/prerm" remove
expect deb-remove "removal stops the daemon, then releases" in_order deb-remove "deb-systemd-invoke stop allot.service" "allot daemon --release"
expect deb-remove "the socket is stopped before the daemon (no client starts it again)" in_order deb-remove "deb-systemd-invoke stop allot.socket" "deb-systemd-invoke stop allot.service"
run deb-prerm-upgrade yes 0 "$D/prerm" upgrade 0.1.1-1
expect deb-prerm-upgrade "an upgrade neither stops nor releases" not_logged deb-prerm-upgrade "allot\|stop"
run deb-postrm-remove yes 0 "$D/postrm" remove
expect deb-postrm-remove "removal keeps /var/lib/allot" state_is deb-postrm-remove kept
run deb-purge yes 0 "$D/postrm" purge
expect deb-purge "purge removes /var/lib/allot" state_is deb-purge removed

echo "== scriptlets (.rpm)"
R=$W/rpm-scripts
run rpm-install yes 0 "$R/post" 1
expect rpm-install "first install enables and starts" in_order rpm-install "systemctl --no-reload enable allot.service" "systemctl start allot.service"
expect rpm-install "a start that works says nothing" err_empty rpm-install
expect rpm-install "the socket is enabled and started before the service" sh -c "grep -qx 'systemctl --no-reload enable allot.socket' '$W/rpm-install.log' && grep -n 'start allot' '$W/rpm-install.log' | head -n1 | grep -q 'start allot.socket'"
run rpm-install-fails yes 1 "$R/post" 1
expect rpm-install-fails "a failed start does not fail the package" rc_is rpm-install-fails 0
expect rpm-install-fails "a failed start is reported" err_has rpm-install-fails "allot.service failed to start"
expect rpm-install-fails "with the daemon's log" err_has rpm-install-fails 'unknown key "tickest"'
run rpm-upgrade yes 0 "$R/post" 2
expect rpm-upgrade "an upgrade restarts, and keeps the enablement as it was" sh -c "grep -qx 'systemctl restart allot.service' '$W/rpm-upgrade.log' && ! grep -q 'enable allot' '$W/rpm-upgrade.log'"
run rpm-container no 0 "$R/post" 1
expect rpm-container "without systemd running: enabled, not started" sh -c "grep -qx 'systemctl --no-reload enable allot.service' '$W/rpm-container.log' && ! grep -q 'start' '$W/rpm-container.log'"
run rpm-erase yes 0 "$R/preun" 0
expect rpm-erase "erase stops and disables the daemon, then releases" in_order rpm-erase "systemctl --no-reload disable --now allot.service" "allot daemon --release"
expect rpm-erase "the socket is stopped before the daemon" in_order rpm-erase "disable --now allot.socket" "disable --now allot.service"
run rpm-preun-upgrade yes 0 "$R/preun" 1
expect rpm-preun-upgrade "an upgrade neither stops nor releases" not_logged rpm-preun-upgrade "allot daemon\|disable"
run rpm-postun-erase yes 0 "$R/postun" 0
expect rpm-postun-erase "erase removes /var/lib/allot (RPM has no purge)" state_is rpm-postun-erase removed
run rpm-postun-upgrade yes 0 "$R/postun" 1
expect rpm-postun-upgrade "an upgrade keeps /var/lib/allot" state_is rpm-postun-upgrade kept

echo "== contents: dpkg-deb -c against rpm -qlp"
# The same file at each family's path: the deb's on the left, mapped to the rpm's.
map() { sed -e 's|^/lib/systemd/|/usr/lib/systemd/|' \
            -e 's|^/usr/share/zsh/vendor-completions/|/usr/share/zsh/site-functions/|' \
            -e 's|^/usr/share/doc/allot/copyright$|/usr/share/licenses/allot/LICENSE.dependencies|'; }
# One family's own files: Debian's changelog and lintian overrides; the license texts RPM
# carries in /usr/share/licenses (the .deb's copyright has MIT's text and points to
# /usr/share/common-licenses/Apache-2.0, as Debian requires).
ONLY_DEB='^/usr/share/doc/allot/changelog.Debian.gz$|^/usr/share/lintian/overrides/allot$'
ONLY_RPM='^/usr/share/licenses/allot/LICENSE-(MIT|APACHE)$'
dpkg-deb -c "$DEB" | awk '$1 ~ /^-/ {print $6}' | sed 's|^\./|/|' > "$W/deb-files.raw"
rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$RPM" | awk '$1 ~ /^-/ {print $2}' > "$W/rpm-files.raw"
map < "$W/deb-files.raw" | grep -Ev "$ONLY_DEB" | sort > "$W/deb-files"
grep -Ev "$ONLY_RPM" "$W/rpm-files.raw" | sort > "$W/rpm-files"
if diff -u "$W/deb-files" "$W/rpm-files" > "$W/files.diff"; then
  echo "ok: the same $(wc -l < "$W/deb-files") files (and, deb only: changelog.Debian.gz, lintian overrides; rpm only: LICENSE-MIT, LICENSE-APACHE)"
else
  cat "$W/files.diff" >&2; fail "the packages hold different files (- deb, + rpm)"
fi
for f in /usr/bin/allot /usr/share/man/man1/allot.1.gz /usr/share/man/man1/allot-run.1.gz /usr/share/man/man5/allot.toml.5.gz \
         /usr/share/doc/allot/examples/allot.toml; do
  grep -qx "$f" "$W/deb-files" || fail "the .deb lacks $f"
  grep -qx "$f" "$W/rpm-files" || fail "the .rpm lacks $f"
done
grep -Eq "$ONLY_DEB" "$W/deb-files.raw" || fail "the .deb lacks its changelog or overrides"
[ "$(grep -Ec "$ONLY_RPM" "$W/rpm-files.raw")" = 2 ] || fail "the .rpm lacks LICENSE-MIT or LICENSE-APACHE"
# The same bytes: sha256 of every shared file.
mkdir -p "$W/deb/root"
dpkg-deb -x "$DEB" "$W/deb/root"
while read -r f; do
  printf '%s  %s\n' "$(sha256sum < "$W/deb/root$f" | cut -d' ' -f1)" "$(printf '%s\n' "$f" | map)"
done < <(grep -Ev "$ONLY_DEB" "$W/deb-files.raw") | sort -k2 > "$W/deb-sums"
[ "$(rpm -qp --qf '%{FILEDIGESTALGO}' "$RPM")" = 8 ] || fail "the .rpm's file digests are not sha256"
rpm -qp --qf '[%{FILEDIGESTS}  %{FILENAMES}\n]' "$RPM" | grep -E '^[0-9a-f]{64}  ' | grep -Ev "  ($(echo "$ONLY_RPM" | tr -d '^'))" | sort -k2 > "$W/rpm-sums"
if diff -u "$W/deb-sums" "$W/rpm-sums" > "$W/sums.diff"; then
  echo "ok: every shared file has the same sha256 in both"
else
  cat "$W/sums.diff" >&2; fail "files differ in content between the packages (- deb, + rpm)"
fi

echo "== the product only: no lab, no load generator"
# The packages carry `allot` (CLI and daemon); the simulator, benchmarks, selftest and
# load generators are allot-lab's, which no package installs.
LAB_BEFORE=$FAILED; FAILED=0
if grep -q 'allot-lab' "$W/deb-files" "$W/rpm-files"; then fail "a package holds allot-lab"; fi
for cmd in workload flood launcher selftest bench sim; do
  if "$W/deb/root/usr/bin/allot" "$cmd" --help >/dev/null 2>&1; then fail "the packaged allot has the lab's command $cmd"; fi
done
"$W/deb/root/usr/bin/allot" --help > "$W/help.txt"
grep -q '^  run ' "$W/help.txt" || fail "the packaged allot --help lists no run (is it the product?)"
[ $FAILED = 0 ] && echo "ok: the packaged allot has none of workload, flood, launcher, selftest, bench, sim"
[ $LAB_BEFORE = 0 ] || FAILED=1

if [ $FAILED = 0 ]; then echo "packaging/check.sh: both packages pass"; else echo "packaging/check.sh: FAILED (above)" >&2; exit 1; fi
