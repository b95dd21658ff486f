#!/usr/bin/env python3
"""I/O workloads for tests/vm/systemd/io.sh, all with O_DIRECT (the page cache out of it,
so each request is the issuing process's, and its cgroup's, at the device):

  iolab.py read DEV WINDOW FROM_MIB TO_MIB OUT   one 4 KiB read at a time at random offsets
      in [FROM, TO) MiB of DEV (B's interactive reads); writes a JSON line to OUT: ops,
      rate (ops/s), p50/p99/max latency in ms
  iolab.py stream DEV WINDOW FROM_MIB TO_MIB OUT  sequential 4 MiB reads over [FROM, TO)
      MiB, wrapping, two at a time (a reader that keeps the device busy, as readahead
      does); OUT: MiB read
  iolab.py write DEV WINDOW FROM_MIB TO_MIB       sequential 1 MiB writes over [FROM, TO)
      MiB, wrapping, one at a time (A's streaming writer); prints nothing

WINDOW is START:END, two wall-clock times (seconds since the epoch, as `date +%s.%N`
prints): the workload waits for START and stops at END, so processes started one after
another (a login each, slow under TCG) run over the same seconds. One that starts more
than a second after START fails rather than measure a shorter window.

Every argument is checked; a bad one is one error naming it, exit 2. A failed read or
write (an error, or a short transfer) is an error naming it, exit 1, with no result.
"""
import json
import mmap
import os
import random
import sys
import threading
import time

MIB = 1 << 20
LATE_S = 1.0


def usage(msg):
    print(f"iolab.py: {msg}", file=sys.stderr)
    sys.exit(2)


def num(name, s, lo, hi, integer=False):
    try:
        v = int(s) if integer else float(s)
    except ValueError:
        usage(f"{name} {s!r} is not {'a whole number' if integer else 'a number'}")
    if not lo <= v <= hi:
        usage(f"{name} {s!r} is outside {lo}..{hi}")
    return v


def window(s):
    start, sep, end = s.partition(":")
    if not sep:
        usage(f"WINDOW {s!r} is not START:END (seconds since the epoch)")
    now = time.time()
    t0 = num("WINDOW's START", start, now - 3600, now + 3600)
    t1 = num("WINDOW's END", end, t0 + 0.1, t0 + 3600)
    return t0, t1


def io(mode, fd, buf, off):
    """One request; the bytes it moved, or an error exit naming what failed."""
    try:
        n = os.pwritev(fd, [buf], off) if mode == "write" else os.preadv(fd, [buf], off)
    except OSError as e:
        print(f"iolab.py: {mode} at {off}: {e.strerror}", file=sys.stderr)
        os._exit(1)
    if n != len(buf):
        print(f"iolab.py: {mode} at {off} moved {n} of {len(buf)} bytes", file=sys.stderr)
        os._exit(1)
    return n


def main(argv):
    if len(argv) not in (5, 6) or argv[0] not in ("read", "stream", "write"):
        usage("usage: iolab.py read|stream|write DEV START:END FROM_MIB TO_MIB [OUT]")
    mode, dev = argv[0], argv[1]
    t0, t1 = window(argv[2])
    size = {"read": 4096, "stream": 4 * MIB, "write": MIB}[mode]
    lo = num("FROM_MIB", argv[3], 0, 1 << 20, integer=True)
    hi = num("TO_MIB", argv[4], lo + max(1, size // MIB), 1 << 20, integer=True)
    out = argv[5] if len(argv) == 6 else None
    if (mode == "write") != (out is None):
        usage("write takes no OUT" if mode == "write" else f"{mode} needs OUT, the file to write its result to")
    flags = (os.O_WRONLY if mode == "write" else os.O_RDONLY) | os.O_DIRECT
    try:
        fd = os.open(dev, flags)
    except OSError as e:
        usage(f"cannot open {dev!r}: {e.strerror}")
    buf = mmap.mmap(-1, size)  # page-aligned, as O_DIRECT needs
    late = time.time() - t0
    if late > LATE_S:
        print(f"iolab.py: started {late:.1f} s after the window's start (at most {LATE_S})", file=sys.stderr)
        sys.exit(1)
    time.sleep(max(0.0, -late))
    end = time.monotonic() + (t1 - time.time())
    if mode == "read":
        blocks = (hi - lo) * MIB // 4096
        lat = []
        while True:
            off = lo * MIB + random.randrange(blocks) * 4096
            s = time.monotonic()
            if s >= end:
                break
            io(mode, fd, buf, off)
            lat.append(time.monotonic() - s)
        lat.sort()
        n = len(lat)
        pick = lambda q: round(lat[min(n - 1, int(q * n))] * 1e3, 3) if n else None
        res = {"ops": n, "rate": round(n / (t1 - t0), 1), "p50_ms": pick(0.5), "p99_ms": pick(0.99),
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
                n = io(mode, fd, b, off)
                with lock:
                    state["done"] += n

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
