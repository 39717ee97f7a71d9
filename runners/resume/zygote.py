"""A lean fork server for the resume family's calls: each call a fresh child, each crash a real SIGKILL.

Serves the paper's "real processes" claim cheaply (arXiv 2608.03836: every
SIGKILL a real child killed by signal 9, every recovery a new process).
Forking the experiment's worker (pandas, pyarrow, matplotlib mapped) costs
~10 ms per fork and as much again at exit; this server (``python -m
runners.resume.zygote``) imports only the runtimes and the databases' drivers,
so a fork of it is about a millisecond.

Protocol: one JSON request per line on stdin, ``{"runtime", "backend",
"graph", "call", "args", "label", "crash"}``; the server forks a child that
builds the runtime and makes the call with :class:`faults.resume.sigkill.KillAtPoint`
hooks writing to a pipe.  If the child reports its crash point (``R``), the
server sends it SIGKILL and reaps it (exit code -9); if it reports its Status
(``S``), the server reaps it.  Reply: ``{"pid", "code", "killed", "status"}``.
A child that answers nothing within the timeout is killed and reported
``timeout``.  The server asks to be SIGKILLed when its parent dies, and so
does each child (``prctl(PR_SET_PDEATHSIG)``): no orphan survives a SIGKILL of
the experiment.  It exits when its stdin closes.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

CALL_TIMEOUT_S = 60


def _child(parent: int, rfd: int, wfd: int, req: dict) -> None:
    """Build the runtime and make one call; answer ``S`` + its Status, ``R`` at the crash point (the hook),
    ``P`` + what went wrong when the runtime's own code failed (raised something it does not declare as a
    refusal, returned something else than a Status), ``F`` + why when the lab's store lost its connection."""
    from faults.resume.sigkill import KillAtPoint
    from mechanisms import resolve
    from runners.processes import die_with_parent
    from vocabulary.resume import Backend, GraphSpec

    die_with_parent(parent)
    os.close(rfd)

    def answer(kind: str, payload) -> None:
        os.write(wfd, (kind + json.dumps(payload, default=str) + "\n").encode())

    from runners.plugins import describe, is_store_fault, refusals_of
    from vocabulary.resume import REFUSED, Status

    call = req["call"]
    try:
        rt = resolve(req["runtime"], "resume")(Backend(**req["backend"]), GraphSpec.from_dict(req["graph"]),
                   KillAtPoint(req["label"], tuple(req["crash"]) if req.get("crash") else None, wfd))
    except Exception as exc:  # noqa: BLE001 - the runtime's own constructor failed: a plug-in error
        return answer("P", f"its constructor raised {describe(exc)}")
    try:
        status = getattr(rt, call)(**req["args"])
    except refusals_of(rt) as exc:  # a refusal its contract declares: an outcome, recorded as such
        run = req["args"].get("new_run_id") or req["args"].get("run_id", "")
        status = Status(run, REFUSED, reason=describe(exc))
    except Exception as exc:  # noqa: BLE001 - anything else it raises is an error, never an outcome
        if is_store_fault(exc):
            return answer("F", f"{call}() lost its PostgreSQL connection: {describe(exc)}")
        return answer("P", f"{call}() raised {describe(exc)}")
    if not isinstance(status, Status):
        return answer("P", f"{call}() returned {type(status).__name__} {status!r:.60}, not a Status")
    # no close: the process ends right after, as a crashed one would (what the call committed is durable)
    answer("S", status.to_dict())


def serve(requests, replies) -> None:
    from runners.processes import fork_start, kill, read_line, wait

    from mechanisms import resolve

    for line in requests:
        req = json.loads(line)
        try:
            resolve(req["runtime"], "resume")  # imported here once, so that every child inherits it
        except Exception:  # noqa: BLE001 - the child reports the same error as its answer
            pass
        rfd, wfd = os.pipe()
        pid = fork_start(_child, (os.getpid(), rfd, wfd, req))
        os.close(wfd)
        try:
            got = read_line(rfd, req.get("timeout", CALL_TIMEOUT_S))
        finally:
            os.close(rfd)
        reply: dict[str, Any] = {"pid": pid, "killed": False}
        if got.startswith(b"R"):
            reply.update(code=kill(pid), killed=True)
        elif got.endswith(b"T"):
            reply.update(code=kill(pid), plugin=f"{req['call']}() gave no answer within {req.get('timeout', CALL_TIMEOUT_S):g} s")
        else:
            reply["code"] = wait(pid)
            if got.startswith(b"S"):
                reply["status"] = json.loads(got[1:])
            elif got.startswith(b"F"):
                reply["store"] = json.loads(got[1:])
            elif got.startswith(b"P"):
                reply["plugin"] = json.loads(got[1:])
            else:
                reply["plugin"] = f"{req['call']}() exited its process with code {reply['code']} and no answer"
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


class Zygote:
    """The client: one server process per experiment worker, started on first use."""

    def __init__(self):
        from runners.processes import child_env

        self.proc = subprocess.Popen([sys.executable, "-m", "runners.resume.zygote"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=child_env())

    def call(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request, default=str) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the resume fork server exited with code {self.proc.wait()}")
        return json.loads(line)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - it is gone or stuck; make sure it is gone
            self.proc.kill()
            self.proc.wait()


_ZYGOTE: Zygote | None = None


def zygote() -> Zygote:
    """This process's fork server (started on first use; a dead one is replaced)."""
    global _ZYGOTE
    if _ZYGOTE is None or _ZYGOTE.proc.poll() is not None or _ZYGOTE.owner != os.getpid():
        _ZYGOTE = Zygote()
        _ZYGOTE.owner = os.getpid()
    return _ZYGOTE


def _main() -> None:
    import signal

    from runners.processes import die_with_parent

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(os.getppid())
    import mechanisms.resume.naive  # noqa: F401 - warm the imports every child needs
    import mechanisms.resume.sequencer  # noqa: F401
    replies = os.fdopen(os.dup(1), "w")  # replies on the original stdout; whatever children print goes to stderr
    os.dup2(2, 1)
    try:
        serve(sys.stdin, replies)
    except BrokenPipeError:  # the lab's process died (Ctrl-C) between a request and its reply: nothing to tell
        os._exit(0)


if __name__ == "__main__":
    _main()
