#!/usr/bin/env bash
# Builds, on the host, the two sched_ext schedulers the side-by-side bench (bench.sh)
# runs beside allot's, into tests/vm/build/scx-others/bin:
#   scx_flatcg   the kernel's own example (tools/sched_ext), from Debian sid's
#                linux-source package of the VM's kernel version (read from
#                tests/vm/build/kernel-sid/version), fetched with a private apt
#                configuration as tests/vm/run.sh fetches the kernel; built with its own
#                Makefile (which builds its libbpf and bpftool from the same tree) against
#                the BTF of the VM's kernel, taken from its vmlinuz (scripts/extract-vmlinux)
#   scx_bpfland  a latency scheduler of sched-ext/scx, `cargo install scx_bpfland` from
#                crates.io; its build (scx_utils) needs clang 18 or later: clang-19 from
#                Debian 12's own archive (apt-get install clang-19)
# Then: tests/vm/scx/run.sh --only bench --add .../scx_flatcg --add .../scx_bpfland
# --add .../kernel-config (the VM kernel's config, which scx_bpfland's libbpf reads).
#
#   tests/vm/scx/bench-others.sh [flatcg|bpfland]...   (default both)
#
# Every step runs under nice -n 19. Exit status 1 if a scheduler asked for was not built;
# its log is beside the binaries.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
OUT="$REPO/tests/vm/build/scx-others"
KDIR="$REPO/tests/vm/build/kernel-sid"
mkdir -p "$OUT/bin"
say() { printf 'bench-others: %s\n' "$*" >&2; }
[ $# -gt 0 ] || set -- flatcg bpfland

flatcg() {
  [ -f "$KDIR/vmlinuz" ] || { say "no $KDIR/vmlinuz: run tests/vm/scx/run.sh once first"; return 1; }
  local kver pkg src apt A
  # "linux-image-7.2.13+deb14-cloud-amd64 7.2.13-1": the package version is the source's
  kver=$(awk '{print $2}' "$KDIR/version")
  pkg="linux-source-$(echo "$kver" | cut -d. -f1,2)"
  apt="$OUT/apt"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
  echo "deb http://deb.debian.org/debian sid main" > "$apt/sources.list"
  A=(-q -o APT::Sandbox::User=root -o "Dir::Etc::sourcelist=$apt/sources.list" -o "Dir::Etc::sourceparts=-"
     -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache")
  say "apt-get update (sid, private lists)"
  nice -n 19 apt-get "${A[@]}" update > /dev/null
  say "downloading $pkg=$kver"
  ( cd "$OUT" && nice -n 19 apt-get "${A[@]}" download "$pkg=$kver" ) > /dev/null
  rm -rf "$OUT/src" && mkdir -p "$OUT/src"
  dpkg-deb -x "$OUT/${pkg}_${kver}_all.deb" "$OUT/src/deb"
  src="$OUT/src/$pkg"
  # tools/ (sched_ext, libbpf, bpftool), the headers they include, extract-vmlinux
  nice -n 19 tar -C "$OUT/src" -xJf "$OUT/src/deb/usr/src/$pkg.tar.xz" "$pkg/tools" "$pkg/scripts" \
    "$pkg/include/uapi" "$pkg/arch/x86/include/uapi" "$pkg/kernel/bpf" "$pkg/Makefile"
  rm -rf "$OUT/src/deb"
  sh "$src/scripts/extract-vmlinux" "$KDIR/vmlinuz" > "$OUT/vmlinux"
  local clang
  clang=$(command -v clang-19 || command -v clang-16 || command -v clang)
  say "make scx_flatcg (CLANG=$clang)"
  nice -n 19 make -C "$src/tools/sched_ext" -j2 CLANG="$clang" VMLINUX_BTF="$OUT/vmlinux" scx_flatcg > "$OUT/flatcg.log" 2>&1 \
    || { say "scx_flatcg did not build: $OUT/flatcg.log"; return 1; }
  cp "$src/tools/sched_ext/build/bin/scx_flatcg" "$OUT/bin/"
  say "built $OUT/bin/scx_flatcg"
}

bpfland() {
  local clang
  clang=$(command -v clang-19 || command -v clang-18 || true)
  [ -n "$clang" ] || { say "scx_bpfland needs clang 18 or later: apt-get install clang-19"; return 1; }
  mkdir -p "$OUT/clang"
  ln -sf "$clang" "$OUT/clang/clang"
  say "cargo install scx_bpfland (clang $clang)"
  PATH="$OUT/clang:$PATH" CARGO_TARGET_DIR="$OUT/target" nice -n 19 cargo install --root "$OUT/cargo" scx_bpfland > "$OUT/bpfland.log" 2>&1 \
    || { say "scx_bpfland did not build: $OUT/bpfland.log"; return 1; }
  cp "$OUT/cargo/bin/scx_bpfland" "$OUT/bin/"
  # libbpf resolves its __kconfig values from /boot/config-RELEASE: the kernel's config,
  # executable so that run.sh --add takes it, which bench.sh puts there
  install -m 0755 "$KDIR/config" "$OUT/bin/kernel-config"
  say "built $OUT/bin/scx_bpfland"
}

rc=0
for s in "$@"; do
  case $s in
    flatcg) flatcg || rc=1 ;;
    bpfland) bpfland || rc=1 ;;
    *) say "takes flatcg or bpfland, got '$s'"; exit 2 ;;
  esac
done
exit $rc
