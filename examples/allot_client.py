#!/usr/bin/env python3
"""A client of the allot daemon's socket protocol (docs/protocol.md), Python stdlib only.

    allot_client.py [--socket PATH] REQUEST [-- COMMAND [ARG...]]

REQUEST is one JSON object, e.g. '{"op": "status"}'; the protocol version "v" is added.
It prints the daemon's reply (one JSON object) and exits 0 when the reply is ok, 1 when
the daemon refused, 75 when it refused for now (its "kind" is "busy" or "limit": nothing
was done, try again later), 2 when the daemon could not be reached or the arguments are
wrong.

"run" puts *this* process into a new job: it sends its own pidfd with its credentials
(needed on kernels before 6.5, harmless after), and when the job is made it execs
COMMAND, which then runs in the job with everything it starts. The reply goes to stderr
then, so COMMAND's output stays its own.

As a module (a notebook or portal spawner):

    from allot_client import request, spawn_in_job
    reply = request({"op": "set", "pids": [pid], "tickets": 200, "cap": "2"})
    if not reply["ok"]:
        raise Refused(reply)  # .kind: "not_permitted", "not_found", "invalid", ...
    # root: start a user's server already in a job of theirs
    server = spawn_in_job(["jupyterhub-singleuser"], uid, gid, {"tickets": 200, "cap": "2"})
"""

import array
import json
import os
import socket
import struct
import subprocess
import sys

PROTOCOL = 3
SOCKET = os.environ.get("ALLOT_SOCKET", "/run/allot/allot.sock")
# The allot CLI waits as long: longer than the daemon's own 10 s for taking a request,
# so a busy daemon's "nothing was done" arrives before the client gives up.
TIMEOUT = 30.0
# Refusal kinds that mean "not now": nothing was done, the same request may succeed later.
RETRY_KINDS = ("busy", "limit")


class Refused(RuntimeError):
    """A refusal: str() is the daemon's sentence, .kind its kind (docs/protocol.md#errors)."""

    def __init__(self, reply):
        super().__init__(reply.get("error", "refused"))
        self.kind = reply.get("kind", "other")


def request(req, path=SOCKET, timeout=TIMEOUT):
    """Sends one request (a dict with "op") and returns the reply as a dict:
    {"v": 3, "ok": true, "data": {...}} or {"v": 3, "ok": false, "error": "..."}.
    Raises OSError when the daemon cannot be reached or closes without a reply."""
    line = json.dumps(dict(req, v=PROTOCOL), separators=(",", ":")).encode() + b"\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        if req.get("op") == "run":
            # The daemon acts on the process that asks, held by pidfd: SO_PEERPIDFD tells
            # it which on Linux 6.5+; before, the client proves it by sending its own
            # pidfd (SCM_RIGHTS) beside credentials naming its own pid (SCM_CREDENTIALS),
            # which the kernel lets it claim only for itself. Both in the first sendmsg.
            pidfd = os.pidfd_open(os.getpid())
            try:
                creds = struct.pack("iII", os.getpid(), os.geteuid(), os.getegid())
                ancillary = [
                    (socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds),
                    (socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [pidfd])),
                ]
                sent = s.sendmsg([line], ancillary)
            finally:
                os.close(pidfd)
            if sent < len(line):
                # The control data went with the first byte; the rest is plain bytes. (Never
                # a send of nothing: the daemon may have answered and closed by now.)
                s.sendall(line[sent:])
        else:
            s.sendall(line)
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            reply += chunk
    if not reply.endswith(b"\n"):
        raise ConnectionError(f"the allot daemon at {path} closed the connection without a whole reply")
    return json.loads(reply)


def spawn_in_job(argv, uid, gid, job, path=SOCKET, force=False, **popen_args):
    """Root (a spawner): starts argv as uid and gid (no supplementary groups) in a new job
    of that user's with job's settings, e.g. {"tickets": 200, "cap": "2"}, before argv
    runs: the child waits in /bin/sh for a word on a pipe while the daemon places it (a
    "set" naming its pid), then execs argv, so argv and everything it starts are in the
    job. force: take the child out of a cgroup another manager owns (e.g. the spawner's own
    systemd service). Returns the subprocess.Popen; on a refusal the child ends without
    running argv and Refused (a RuntimeError) carries the daemon's sentence and kind."""
    r, w = os.pipe()
    wait = f'read -r go <&{r} && [ "$go" = go ] && exec "$@" {r}<&-'
    try:
        child = subprocess.Popen(
            ["/bin/sh", "-c", wait, "sh", *argv], user=uid, group=gid, extra_groups=[], pass_fds=(r,), **popen_args
        )
    except BaseException:
        os.close(w)
        raise
    finally:
        os.close(r)
    with os.fdopen(w, "w") as go:
        try:
            reply = request(dict(job, op="set", pids=[child.pid], force=force), path)
        except OSError as e:
            reply = {"ok": False, "error": f"cannot reach the allot daemon at {path}: {e}", "kind": "unreachable"}
        if reply.get("ok"):
            go.write("go\n")
            return child
    # The pipe closed without the word: the child exits without running argv.
    child.wait()
    raise Refused(reply)


def main(argv):
    args = argv[1:]
    path = SOCKET
    if args[:1] == ["--socket"] and len(args) >= 2:
        path, args = args[1], args[2:]
    command = []
    if "--" in args:
        i = args.index("--")
        args, command = args[:i], args[i + 1 :]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        req = json.loads(args[0])
    except ValueError as e:
        print(f"allot_client: REQUEST must be one JSON object, got {args[0]!r}: {e}", file=sys.stderr)
        return 2
    if not isinstance(req, dict):
        print(f"allot_client: REQUEST must be a JSON object, got {args[0]!r}", file=sys.stderr)
        return 2
    if command and req.get("op") != "run":
        print(f"allot_client: a COMMAND follows only a run request, not {req.get('op')!r}", file=sys.stderr)
        return 2
    try:
        reply = request(req, path)
    except OSError as e:
        print(f"allot_client: cannot reach the allot daemon at {path}: {e}", file=sys.stderr)
        return 2
    print(json.dumps(reply), file=sys.stderr if command else sys.stdout, flush=True)
    if not reply.get("ok"):
        return 75 if reply.get("kind") in RETRY_KINDS else 1
    if command:
        try:
            os.execvp(command[0], command)
        except OSError as e:
            print(f"allot_client: cannot run {command[0]!r}: {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
