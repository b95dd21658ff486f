#!/usr/bin/env python3
"""How long a fork takes to run its child, with N sleeping processes beside it, no allot.

`allot-lab bench daemon` times placement from a login's setuid and reports its fork-to-setuid
time apart (START P99), because on some machines a fork waits for reasons of the machine's
own. This shows that wait without allot: it starts N `sleep`s (killed at the end, by pid),
then forks --forks times, one every 10-40 ms; each child reads CLOCK_MONOTONIC first thing
and sends it back through a pipe.

    python3 scripts/fork-latency.py --sleepers 0
    python3 scripts/fork-latency.py --sleepers 10000
"""
import argparse, os, signal, statistics, time

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--sleepers", type=int, default=10000, help="sleeping processes beside the forks (0..30000)")
ap.add_argument("--forks", type=int, default=300, help="forks timed (10..100000)")
a = ap.parse_args()
if not 0 <= a.sleepers <= 30000:
    ap.error(f"--sleepers must be 0..30000, got {a.sleepers}")
if not 10 <= a.forks <= 100000:
    ap.error(f"--forks must be 10..100000, got {a.forks}")

sleepers = []
try:
    for _ in range(a.sleepers):
        sleepers.append(os.posix_spawn("/bin/sleep", ["sleep", "3600"], os.environ))
    time.sleep(3 if a.sleepers else 0)
    lat = []
    for i in range(a.forks):
        r, w = os.pipe()
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.write(w, repr(time.monotonic()).encode())
            os._exit(0)
        os.close(w)
        t = float(os.read(r, 64))
        os.close(r)
        os.waitpid(pid, 0)
        lat.append((t - t0) * 1e3)
        time.sleep(0.010 + (i % 31) / 1000)
finally:
    for p in sleepers:
        os.kill(p, signal.SIGKILL)
    for p in sleepers:
        os.waitpid(p, 0)
q = statistics.quantiles(lat, n=100)
print(f"{a.forks} forks beside {a.sleepers} sleeping processes: fork to child running p50 {q[49]:.2f} ms, p99 {q[98]:.2f} ms, max {max(lat):.2f} ms")
