"""Real processes for the resume family: one call per child, SIGKILL at a named point, k racers on a barrier.

Serves the paper's measurement claims: "every SIGKILL is real (a child
process, its pid, killed by signal 9) and every recovery runs in a new
process", and "k processes resuming one parked interrupt".

**One call, one child** (:class:`ForkedExecutor`).  Each runtime call is made
in a child forked from the cell's worker (:func:`runners.processes.fork_start`);
the child builds the runtime from its dotted path, a Backend and a GraphSpec,
and talks to the parent over a pipe.  Its :class:`KillPointHooks` compare
every named point the runtime reaches with the cell's crash point: on a
match the child writes ``R`` and blocks; the parent sends SIGKILL to its pid
and reaps it (exit code -9), and the call is recorded ``indeterminate``.  A
call that returns writes ``S`` and its Status.  The next call (the recovery)
is made by a new child: nothing of the killed process survives but what it
made durable.

**No orphans.**  Every child asks the kernel to SIGKILL it when its parent
dies (``prctl(PR_SET_PDEATHSIG, SIGKILL)``, then checks that the parent did
not die before the request), so even a SIGKILL of the whole experiment
leaves no child behind; tests check it with psutil.

**Racers** (:class:`RacerPool`): a warm pool of k resumer processes for one
concurrency cell, forked once and reused for every repetition (process
start-up and connection set-up are paid once per cell, not per racer per
repetition).  For each repetition the parent sends the run id to every
racer; each waits on one ``multiprocessing`` barrier of k parties, sleeps its
own start jitter, resumes, and answers with its Status and timings.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any

from mechanisms import resolve
from faults.resume.sigkill import KillAtPoint
from mechanisms.resume.base import Crash, Hooks
from runners.plugins import PluginFailed, StoreFault
from runners.processes import Barrier, die_with_parent, fork_start, kill, read_line
from runners.resume import envs  # noqa: F401 - connects the framework runtimes (issue 14) to their envs' servers
from runners.resume.zygote import zygote
from vocabulary.resume import Backend, GraphSpec, Status

CALL_TIMEOUT_S = 60


def status_from(d: dict | None) -> Status | None:
    if d is None:
        return None
    return Status(d["run"], d["state"], d.get("checkpoint"), d.get("node"), None, d.get("values"), d.get("reason", ""))


KillPointHooks = KillAtPoint  # the hook a call's child runs with (faults/resume/sigkill.py)


def build(runtime: str, backend: Backend, graph: GraphSpec, hooks: Hooks | None = None):
    return resolve(runtime, "resume")(backend, graph, hooks)


class CallResult:
    """One call as the parent saw it: status ok/fail/indeterminate, the Status (None if killed), times, pid."""

    def __init__(self, status: str, result: Status | None, start: float, end: float | None, pid: int,
                 killed: bool, note: str = ""):
        self.status, self.result, self.start, self.end = status, result, start, end
        self.pid, self.killed, self.note = pid, killed, note


def outcome(result: Status) -> str:
    return "ok" if result.state in ("parked", "done") else "fail"


def fork_server(runtime: str):
    """The fork server that serves ``runtime``: its framework environment's (issue 14), or the lab's own."""
    from mechanisms.resume.frameworks import declared

    if runtime in declared():
        from runners.resume.envs import server

        return server(runtime)
    return zygote()


def racers(k: int, runtime: str, backend: Backend, graph: GraphSpec, timeout_s: float = 60):
    """k warm resumers: forked from the framework env's server (issue 14), or the lab's own pool."""
    from mechanisms.resume.frameworks import declared

    if runtime in declared():
        from runners.resume.envs import EnvRacers

        return EnvRacers(k, runtime, backend, graph, timeout_s)
    return RacerPool(k, runtime, backend, graph, timeout_s)


class ForkedExecutor:
    """Each call in a fresh child process; a crash point is a real SIGKILL (module docstring)."""

    real = True

    def __init__(self, runtime: str, backend: Backend, graph: GraphSpec):
        self.runtime, self.backend, self.graph = runtime, backend, graph
        self.kills: list[tuple[int, int]] = []  # (pid, exit code) of every killed child

    def call(self, call: str, args: dict, label: str, crash: tuple[str, str] | None = None) -> CallResult:
        start = time.time()
        reply = fork_server(self.runtime).call({"runtime": self.runtime, "backend": self.backend.to_dict(), "graph": self.graph.to_dict(),
                               "call": call, "args": args, "label": label, "crash": list(crash) if crash else None,
                               "timeout": CALL_TIMEOUT_S})
        pid = reply["pid"]
        if reply["killed"]:
            self.kills.append((pid, reply["code"]))
            return CallResult("indeterminate", None, start, None, pid, True, f"SIGKILL at {crash[0]} of {crash[1]}")
        if "status" in reply:
            result = status_from(reply["status"])
            return CallResult(outcome(result), result, start, time.time(), pid, False)
        if "store" in reply:
            raise StoreFault(f"{reply['store']} (call {label})")
        if "error" in reply and getattr(resolve(self.runtime, "resume"), "errors_are_outcomes", False):
            # a framework under test raised from its own API: its behaviour, a failed call (DurableRuntime)
            return CallResult("fail", None, start, time.time(), pid, False, reply["error"])
        # the runtime's own code failed (a framework env's adapter: raised, exited, hung, answered malformed or
        # undeclared): never an outcome of the call (runners.plugins; issue 24 §1)
        raise PluginFailed(self.runtime, f"{envs.where(self.runtime)}{reply.get('plugin') or reply.get('error')} "
                                         f"(call {call} {label}, pid {pid})")


class InProcessExecutor:
    """Each call on a fresh runtime object in this process; a crash point raises Crash (the hypothesis machine)."""

    real = False

    def __init__(self, runtime: str, backend: Backend, graph: GraphSpec):
        self.runtime, self.backend, self.graph = runtime, backend, graph
        self.kills: list[tuple[int, int]] = []

    def call(self, call: str, args: dict, label: str, crash: tuple[str, str] | None = None) -> CallResult:
        rt = build(self.runtime, self.backend, self.graph, KillPointHooks(label, crash, None))
        start = time.time()
        try:
            result = getattr(rt, call)(**args)
        except Crash as exc:
            for sql in (rt.ledger.sql, getattr(getattr(rt, "tables", None), "sql", None)):
                if sql is not None and sql._in_tx:
                    sql.execute("ROLLBACK")
            return CallResult("indeterminate", None, start, None, os.getpid(), True, f"crash at {exc}")
        finally:
            rt.close()
        return CallResult(outcome(result), result, start, time.time(), os.getpid(), False)


# ---------------------------------------------------------------------------------------------- racers
def _racer(parent: int, cmd_r: int, out_w: int, barrier, runtime: str, backend: dict, graph: dict, index: int,
           siblings: list[int]) -> None:
    die_with_parent(parent)
    for fd in siblings:  # the other racers' pipe ends: holding a command pipe open would hide its end of file
        try:
            os.close(fd)
        except OSError:
            pass
    from runners.plugins import describe, is_store_fault, refusals_of

    def answer(reply: dict) -> None:
        os.write(out_w, (json.dumps(reply, default=str) + "\n").encode())

    def failure(exc: Exception, what: str) -> dict:
        if is_store_fault(exc):
            return {"store": f"{what} lost its PostgreSQL connection: {describe(exc)}"}
        return {"plugin": f"{what} raised {describe(exc)}"}

    rt, broken = None, None
    try:
        rt = build(runtime, Backend(**backend), GraphSpec.from_dict(graph))
        rt.state("-")  # open the connections before the first race
    except Exception as exc:  # noqa: BLE001 - said in the answer to every race (the runtime's own code failed)
        broken = failure(exc, "building the runtime or state()")
    try:
        while True:
            line = read_line(cmd_r, 3600)
            if not line or line.endswith(b"T"):
                return
            req = json.loads(line)
            try:
                barrier.wait()
            except Exception:  # noqa: BLE001 - a broken barrier: answer, the parent records it
                answer({"error": "barrier broken"})
                continue
            if broken:
                answer(broken)
                continue
            rt.hooks.op = req["label"]
            released = time.time()
            if req["jitter_s"]:
                time.sleep(req["jitter_s"])
            start = time.time()
            try:
                status = rt.resume(req["run"], req["value"])
            except refusals_of(rt) as exc:  # a refusal its contract declares
                status = Status(req["run"], "refused", reason=describe(exc))
            except Exception as exc:  # noqa: BLE001 - anything else is the runtime's error, never an outcome
                answer(failure(exc, "resume()"))
                continue
            if not isinstance(status, Status):
                answer({"plugin": f"resume() returned {type(status).__name__} {status!r:.60}, not a Status"})
                continue
            answer({"status": status.to_dict(), "released": released, "start": start, "end": time.time(),
                    "pid": os.getpid()})
    finally:
        if rt is not None:
            rt.close()


def _exit_code(pid: int) -> int | None:
    """The exit code of a child that has ended (reaped now), None while it runs."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return os.waitstatus_to_exitcode(status) if done else None


class RacerPool:
    """k warm resumer processes for one concurrency cell (module docstring).  Use as a context manager."""

    def __init__(self, k: int, runtime: str, backend: Backend, graph: GraphSpec, timeout_s: float = 60):
        self.k, self.timeout_s, self.runtime = k, timeout_s, runtime
        self.barrier = Barrier(k, timeout=timeout_s)
        self.racers: list[tuple[int, int, int]] = []  # (pid, command write fd, answer read fd)
        for i in range(k):
            cmd_r, cmd_w = os.pipe()
            out_r, out_w = os.pipe()
            siblings = [fd for _, w, r in self.racers for fd in (w, r)] + [cmd_w, out_r]
            pid = fork_start(_racer, (os.getpid(), cmd_r, out_w, self.barrier, runtime, backend.to_dict(),
                                      graph.to_dict(), i, siblings))
            os.close(cmd_r)
            os.close(out_w)
            self.racers.append((pid, cmd_w, out_r))

    @property
    def pids(self) -> list[int]:
        return [p for p, _, _ in self.racers]

    def race(self, run_id: str, value: Any, labels: list[str], jitters_s: list[float]) -> list[dict | None]:
        """Every racer resumes ``run_id`` after the barrier and its jitter; their answers (None: no answer)."""
        for (pid, cmd_w, _), label, jitter in zip(self.racers, labels, jitters_s):
            os.write(cmd_w, (json.dumps({"run": run_id, "value": value, "label": label, "jitter_s": jitter}) + "\n").encode())
        out, deadline = [], time.monotonic() + self.timeout_s  # one deadline for the race, not one per racer
        for pid, _, out_r in self.racers:
            line = read_line(out_r, max(0.0, deadline - time.monotonic()))
            out.append(json.loads(line) if line.endswith(b"\n") else None)
        self._judge(out, labels)
        return out

    def _judge(self, answers: list[dict | None], labels: list[str]) -> None:
        """No racer is killed by this experiment, so a racer without a Status is never an outcome: the lab's
        store lost its connection (:class:`StoreFault`) or the runtime's code failed (:class:`PluginFailed`)."""
        for a, label in zip(answers, labels):
            if a is not None and "store" in a:
                raise StoreFault(f"{a['store']} ({label})")
        for (pid, _, _), a, label in zip(self.racers, answers, labels):
            if a is not None and "plugin" in a:
                raise PluginFailed(self.runtime, f"{a['plugin']} ({label}, pid {pid})")
        for (pid, _, _), a, label in zip(self.racers, answers, labels):
            if a is None:
                code = _exit_code(pid)
                what = f"exited with code {code}" if code is not None else f"gave no answer within {self.timeout_s:g} s"
                raise PluginFailed(self.runtime, f"the racer process of {label} (pid {pid}) {what}")
        if any("status" not in a for a in answers):
            raise PluginFailed(self.runtime, f"a racer of {labels[0].rsplit('#', 1)[0]} broke the start barrier")

    def close(self) -> None:
        for pid, cmd_w, out_r in self.racers:
            try:
                os.close(cmd_w)  # end of commands: the racer returns
            except OSError:
                pass
        for pid, _, out_r in self.racers:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.005)
            else:
                kill(pid)
            os.close(out_r)
        self.racers = []

    def __enter__(self) -> "RacerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
