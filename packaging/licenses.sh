#!/usr/bin/env bash
# The licenses of what is compiled into /usr/bin/allot, for both packages:
#   bash packaging/licenses.sh copyright   # debian/copyright (DEP-5): allot, then every bundled crate
#   bash packaging/licenses.sh list        # NAME<TAB>VERSION<TAB>SPDX, one bundled crate a line
#   bash packaging/licenses.sh spdx        # the package's License: allot's and every crate's, SPDX
#
# The crates are the ones `allot` is built from: its normal and build dependencies,
# transitively, for this machine's target (`cargo metadata --offline --filter-platform`,
# read from Cargo.lock and the crates cargo has unpacked; no network). Dev-dependencies
# (tests only) are not in the binary and not listed. Each crate's copyright lines are
# taken from its own license files (else its Cargo.toml authors); the text of every
# license named is included (Apache-2.0 by reference to /usr/share/common-licenses, as
# Debian does). A crate under a license this script has no text for fails the build, so
# a new dependency cannot slip in unlisted.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-copyright}
case "$MODE" in copyright|list|spdx) ;; *) echo "packaging/licenses.sh: unknown mode $MODE (allowed: copyright, list, spdx)" >&2; exit 2 ;; esac
HOST=$(rustc -vV | sed -n 's/^host: //p')
META=$(mktemp)
trap 'rm -f "$META"' EXIT
cargo metadata --offline --locked --format-version 1 --filter-platform "$HOST" > "$META"
MODE=$MODE META=$META python3 - <<'PY'
import json, os, re, sys

meta = json.load(open(os.environ["META"]))
mode = os.environ["MODE"]
pkgs = {p["id"]: p for p in meta["packages"]}
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
root = [p["id"] for p in meta["packages"] if p["name"] == "allot" and p["source"] is None]
if len(root) != 1:
    sys.exit("packaging/licenses.sh: no single workspace package named allot in cargo metadata")

# allot's build closure: normal and build dependencies, transitively (not dev).
seen, todo = set(), list(root)
while todo:
    i = todo.pop()
    if i in seen:
        continue
    seen.add(i)
    for d in nodes[i]["deps"]:
        if any(k["kind"] in (None, "build") for k in d["dep_kinds"]):
            todo.append(d["pkg"])
crates = sorted((pkgs[i] for i in seen if pkgs[i]["source"] is not None), key=lambda p: (p["name"], p["version"]))
own = pkgs[root[0]]["license"]

def spdx_names(expr):
    return sorted(set(re.findall(r"[A-Za-z0-9.+-]+", expr)) - {"OR", "AND", "WITH"})

def dep5(expr):
    # SPDX to DEP-5: lower-case operators; "(A OR B) AND C" becomes "A or B, and C"
    # (in DEP-5 "and" binds tighter than "or" unless a comma precedes it).
    e = expr.replace("/", " OR ")
    m = re.fullmatch(r"\(([^()]*)\) AND ([^()]*)", e)
    if m:
        e = f"{m.group(1)}, AND {m.group(2)}"
    if "(" in e or ")" in e:
        sys.exit(f"packaging/licenses.sh: cannot write {expr!r} in DEP-5 syntax; extend dep5()")
    return e.replace(" OR ", " or ").replace(" AND ", " and ").replace(" WITH ", " with ")

# Texts: MIT from the repository, Apache-2.0 by reference (Debian ships it), the others
# from the file of the crate that uses them.
TEXT_FILES = {"Unicode-3.0": ["LICENSE-UNICODE", "LICENSE-Unicode"], "Unlicense": ["UNLICENSE", "LICENSE-UNLICENSE"]}

def crate_dir(p):
    return os.path.dirname(p["manifest_path"])

def copyright_of(p):
    lines = []
    for f in sorted(os.listdir(crate_dir(p))):
        if re.match(r"(LICEN[CS]E|COPYING|COPYRIGHT|NOTICE)", f, re.I) and os.path.isfile(os.path.join(crate_dir(p), f)):
            for l in open(os.path.join(crate_dir(p), f), errors="replace"):
                l = l.strip()
                if re.match(r"Copyright\s+(\(c\)|\(C\)|©|[0-9])", l) and "{" not in l and "[" not in l:
                    l = re.sub(r"^Copyright\s+(\(c\)|\(C\)|©)\s*", "", l)
                    l = re.sub(r"^Copyright\s+", "", l)
                    if l not in lines:
                        lines.append(l)
    who = f"the {p['name']} developers ({p.get('repository') or 'crates.io'})"
    # A notice of years only ("2016--2023") names the crate's developers.
    lines = [l if re.search(r"[A-Za-z]", l) else f"{l} {who}" for l in lines]
    lines += [a for a in p["authors"] if not any(a.split(" <")[0] in l for l in lines)]
    return lines or [who]

if mode == "list":
    for p in crates:
        print(f"{p['name']}\t{p['version']}\t{p['license']}")
    sys.exit(0)

if mode == "spdx":
    def norm(e):
        # "Apache-2.0 OR MIT" and "MIT OR Apache-2.0" are one license choice.
        if "(" not in e and " AND " not in e and " WITH " not in e:
            return " OR ".join(sorted(e.split(" OR "), key=lambda n: (n != "MIT", n)))
        return e
    exprs = [norm(own)]
    parts = set()
    for p in crates:
        m = re.fullmatch(r"\(([^()]*)\) AND ([^()]*)", p["license"])
        parts |= {norm(m.group(1)), norm(m.group(2))} if m else {norm(p["license"])}
    for e in sorted(parts):
        if e not in exprs:
            exprs.append(e)
    print(" AND ".join(f"({e})" if " " in e else e for e in exprs))
    sys.exit(0)

names = set(spdx_names(own))
for p in crates:
    if not p["license"]:
        sys.exit(f"packaging/licenses.sh: crate {p['name']} {p['version']} declares no license")
    names |= set(spdx_names(p["license"]))
texts = {}
for n in sorted(names):
    if n == "Apache-2.0":
        texts[n] = "On Debian systems, the full text of the Apache License 2.0 is in\n/usr/share/common-licenses/Apache-2.0; RPM packages carry it as LICENSE-APACHE."
    elif n == "MIT":
        body = open("LICENSE-MIT").read().split("\n\n", 2)[2]
        texts[n] = body.strip()
    elif n in TEXT_FILES:
        for p in crates:
            if n in spdx_names(p["license"]):
                for f in TEXT_FILES[n]:
                    path = os.path.join(crate_dir(p), f)
                    if os.path.isfile(path):
                        texts[n] = open(path, errors="replace").read().strip()
                        break
            if n in texts:
                break
        if n not in texts:
            sys.exit(f"packaging/licenses.sh: no text of {n} found in the crates that use it")
    else:
        sys.exit(f"packaging/licenses.sh: no text for license {n}; add it to packaging/licenses.sh")

def field(text):
    # A DEP-5 multi-line field: continuation lines start with a space, empty ones are " .".
    return "\n".join(" " + l.rstrip() if l.strip() else " ." for l in text.splitlines())

out = []
out.append("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
           "Upstream-Name: allot\n"
           "Comment: allot's source tree declares `license = \"MIT OR Apache-2.0\"` (Cargo.toml).\n"
           f" /usr/bin/allot is statically linked with the {len(crates)} Rust crates listed below: the\n"
           " normal and build dependencies of the allot crate, from Cargo.lock, each under the\n"
           " license its Cargo.toml declares. A crate's Files pattern names its source as cargo\n"
           " unpacks it (NAME-VERSION/). Generated by packaging/licenses.sh.\n")
copyright_own = open("LICENSE-MIT").read().split("\n\n", 2)[1].strip()
copyright_own = re.sub(r"^Copyright (\(c\) )?", "", copyright_own)
out.append(f"Files: *\nCopyright: {copyright_own}\nLicense: {dep5(own)}\n")
for p in crates:
    c = copyright_of(p)
    cp = c[0] + "".join("\n " + l for l in c[1:])
    out.append(f"Files: {p['name']}-{p['version']}/*\nCopyright: {cp}\nLicense: {dep5(p['license'])}\n")
for n in sorted(texts):
    out.append(f"License: {n}\n{field(texts[n])}\n")
sys.stdout.write("\n".join(out))
PY
