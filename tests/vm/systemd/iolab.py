#!/usr/bin/env python3
"""I/O workloads for tests/vm/systemd/io.sh, all with O_DIRECT (the page cache out of it,
so each request is the issuing process's, and its cgroup's, at the device):

  iolab.py read DEV SECS FROM_MIB TO_MIB OUT   one 4 KiB read at a time at random offsets
      in [FROM, TO) MiB of DEV for SECS seconds (B's interactive reads); writes a JSON line
      to OUT: ops, rate (ops/s), p50/p99/max latency in ms
  iolab.py stream DEV SECS FROM_MIB TO_MIB OUT  sequential 4 MiB reads over [FROM, TO)
      MiB, wrapping, for SECS seconds, two at a time (a reader that keeps the device busy,
      as readahead does); OUT: MiB read
  iolab.py write DEV SECS FROM_MIB TO_MIB       sequential 1 MiB writes over [FROM, TO)
      MiB, wrapping, for SECS seconds, one at a time (A's streaming writer); prints nothing

Every argument is checked; a bad one is one error naming it, exit 2.
"""
import json
import mmap
import os
import random
import sys
import threading
import time

MIB = 1 << 20


def usage(msg):
    print(f"iolab.py: {msg}", file=sys.stderr)
    sys.exit(2)


def num(name, s, lo, hi):
    try:
        v = float(s)
    except ValueError:
        usage(f"{name} {s!r} is not a number")
    if not lo <= v <= hi:
        usage(f"{name} {s!r} is outside {lo}..{hi}")
    return v


def main(argv):
    if len(argv) < 5 or argv[0] not in ("read", "stream", "write"):
        usage("usage: iolab.py read|stream|write DEV SECS FROM_MIB TO_MIB [OUT]")
    mode, dev = argv[0], argv[1]
    secs = num("SECS", argv[2], 0.1, 3600)
    lo = int(num("FROM_MIB", argv[3], 0, 1 << 20))
    hi = int(num("TO_MIB", argv[4], lo + 1, 1 << 20))
    out = argv[5] if len(argv) > 5 else None
    if mode != "write" and out is None:
        usage(f"{mode} needs OUT, the file to write its result to")
    flags = (os.O_WRONLY if mode == "write" else os.O_RDONLY) | os.O_DIRECT
    try:
        fd = os.open(dev, flags)
    except OSError as e:
        usage(f"cannot open {dev!r}: {e.strerror}")
    size = {"read": 4096, "stream": 4 * MIB, "write": MIB}[mode]
    buf = mmap.mmap(-1, size)  # page-aligned, as O_DIRECT needs
    end = time.monotonic() + secs
    if mode == "read":
        blocks = (hi - lo) * MIB // 4096
        lat = []
        while True:
            off = lo * MIB + random.randrange(blocks) * 4096
            t0 = time.monotonic()
            if t0 >= end:
                break
            os.preadv(fd, [buf], off)
            lat.append(time.monotonic() - t0)
        lat.sort()
        n = len(lat)
        pick = lambda q: round(lat[min(n - 1, int(q * n))] * 1e3, 3) if n else None
        res = {"ops": n, "rate": round(n / secs, 1), "p50_ms": pick(0.5), "p99_ms": pick(0.99),
               "max_ms": round(lat[-1] * 1e3, 3) if n else None}
    else:
        # A reader's two threads, each with its own buffer, take the next chunk in turn: it
        # always has a request at the device, as a reader with readahead has (one thread
        # alone leaves the device idle while it gets to its next read, which under TCG is
        # longer than BFQ waits for it). os.preadv and os.pwritev let go of the GIL.
        lock = threading.Lock()
        state = {"off": lo * MIB, "done": 0}

        def worker():
            b = mmap.mmap(-1, size)
            while time.monotonic() < end:
                with lock:
                    off = state["off"]
                    if off + size > hi * MIB:
                        off = lo * MIB
                    state["off"] = off + size
                if mode == "write":
                    os.pwritev(fd, [b], off)
                else:
                    os.preadv(fd, [b], off)
                with lock:
                    state["done"] += size

        ts = [threading.Thread(target=worker) for _ in range(2 if mode == "stream" else 1)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        res = {"mib": round(state["done"] / MIB, 1)}
    if out:
        with open(out, "w") as f:
            f.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
