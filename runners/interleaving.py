"""Execute a literal interleaving (``faults/races.py``) against a real database, step by step.

Serves the ATR paper's races result (§5): every actor of a history is a
process of its own (:mod:`runners.race_actor`) holding its own connection to
a :class:`~runners.race_store.RaceStore`; the interpreter sends it the steps
in the written order and compares each result with the result written
inline.  Three kinds of step:

- a plain :class:`~faults.races.Step` must return before the next starts;
- a :class:`~faults.races.Together` group is sent to its actors with one
  start instant a millisecond ahead; each actor spins until then, so their
  transactions really overlap in the database (the race pairs);
- a step expected to ``blocks`` must still be waiting after ``settle_s``;
  the history goes on, and the actor's ``await`` step collects its result
  (a Hermitage "T1 blocks ... T2 commits ... T1 returns").

After the last step the interpreter reads the target row once more on a
connection of its own: the refunds it holds are the execution's effects,
the number every table counts.  Nothing is taken from the expectation.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping

from faults.races import BLOCKS, ByBinding, History, Step, Together
from runners.race_store import TIMEOUT_S, RaceStore

LEAD_NS = 1_000_000  # a Together group starts this long after it is sent
REPLY_TIMEOUT_S = TIMEOUT_S + 20


@dataclass
class StepResult:
    actor: str
    op: str
    result: Any
    expected: Any
    ok: bool
    start_ns: int
    end_ns: int
    members: tuple["StepResult", ...] = ()  # a Together group's steps

    def describe(self) -> str:
        return f"{self.actor} {self.op}: got {self.result!r}, expected {self.expected!r}"


@dataclass
class Execution:
    history: str
    binding: str
    case: int
    steps: list[StepResult]
    effects: int  # refunds on the target row afterwards, read from the database
    wall_ns: int
    errors: list[str] = field(default_factory=list)

    @property
    def as_expected(self) -> bool:
        return all(s.ok for s in self.steps)

    @property
    def mismatch(self) -> str:
        """The first step whose result differs from its inline expectation ('' if none)."""
        return next((s.describe() for s in self.steps if not s.ok), "")

    def _commits(self) -> list[StepResult]:
        flat = [m for s in self.steps for m in (s.members or (s,))]
        return [s for s in flat if s.op in ("commit", "await")]

    @property
    def commits_reported(self) -> int:
        """Commit attempts the database answered with 'committed' (rowcount 1)."""
        return sum(s.result == "committed" for s in self._commits())

    @property
    def rejections(self) -> int:
        return sum(s.result == "rejected" for s in self._commits())


def _matches(result: Any, expected: Any, exact: bool) -> bool:
    if expected is None:
        return True
    if isinstance(expected, Mapping) and isinstance(result, Mapping) and not exact:
        return all(result.get(k) == v for k, v in expected.items())
    return result == expected


class ActorProcess:
    """One actor: a ``runners.race_actor`` child process and the pipe to it."""

    def __init__(self, name: str, store: RaceStore, binding: str):
        self.name = name
        env = dict(os.environ)
        if hasattr(store, "dsn"):
            env["DRIFTLAB_POSTGRES_DSN"] = store.dsn
        self.proc = subprocess.Popen([sys.executable, "-m", "runners.race_actor", store.backend, store.location, binding],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True, bufsize=1)

    def send(self, op: str, case: int, args: Mapping | None = None, at_ns: int | None = None) -> None:
        cmd = {"op": op, "case": case, "args": dict(args or {}), **({"at_ns": at_ns} if at_ns else {})}
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def ready(self, timeout: float) -> bool:
        return bool(select.select([self.proc.stdout], [], [], timeout)[0])

    def reply(self, timeout: float = REPLY_TIMEOUT_S) -> tuple[Any, int, int]:
        if not self.ready(timeout):  # its outcome is unknown; a later answer would be misread: end it
            self.proc.kill()
            return f"error: {self.name} gave no answer within {timeout} s (outcome unknown)", 0, 0
        line = self.proc.stdout.readline()
        if not line:
            return f"error: {self.name} exited with code {self.proc.wait()}", 0, 0
        r = json.loads(line)
        return r["result"], r["start_ns"], r["end_ns"]

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # end of commands: the actor closes its connection and exits
        except OSError:
            pass  # it is already gone
        try:
            self.proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


class Interpreter:
    """Runs histories for one binding; one process (and connection) per actor, reused across executions."""

    def __init__(self, store: RaceStore, binding: str, settle_s: float = 0.2):
        self.store, self.binding, self.settle_s = store, binding, settle_s
        self._actors: dict[str, ActorProcess] = {}
        self._own = store.connect()  # the interpreter's: fresh rows before, the audit read after

    def actor(self, name: str) -> ActorProcess:
        if name not in self._actors or not self._actors[name].alive:  # a dead actor is replaced
            if name in self._actors:
                self._actors[name].close()
            self._actors[name] = ActorProcess(name, self.store, self.binding)
        return self._actors[name]

    def close(self) -> None:
        for a in self._actors.values():
            a.close()
        self._actors.clear()
        self._own.close()

    def __enter__(self) -> "Interpreter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def expected(self, value: Any) -> Any:
        return value[self.binding] if isinstance(value, ByBinding) else value

    # ------------------------------------------------------------ running
    def run(self, history: History, case: int) -> Execution:
        if self.binding not in history.bindings:
            raise ValueError(f"history {history.name} declares no results for binding {self.binding!r}")
        for item in history.steps:  # every actor is up before the history starts
            for step in item.steps if isinstance(item, Together) else (item,):
                self.actor(step.actor)
        t0 = time.perf_counter_ns()
        self.store.new_case(self._own, case, **history.setup)
        waiting: set[str] = set()  # actors whose blocked step is still running
        results = []
        for item in history.steps:
            results.append(self._together(item, case) if isinstance(item, Together) else self._step(item, case, waiting))
        errors = [m.result for r in results for m in (r.members or (r,))
                  if isinstance(m.result, str) and m.result.startswith("error")]
        for name in waiting:  # a blocked step nobody awaited: collect it, report it
            errors.append(f"error: {name}: blocked step never awaited, result {self.actor(name).reply()[0]!r}")
        effects = self.store.read_target(self._own, case)["refunds"]
        return Execution(history.name, self.binding, case, results, effects, time.perf_counter_ns() - t0, errors)

    def _step(self, step: Step, case: int, waiting: set[str]) -> StepResult:
        expected = self.expected(step.expect)
        actor = self.actor(step.actor)
        if step.op == "await":
            if step.actor not in waiting:  # its step did not block: a mismatch, already reported
                now = time.perf_counter_ns()
                return StepResult(step.actor, step.op, "error: nothing to await", expected, False, now, now)
            waiting.discard(step.actor)
            result, start, end = actor.reply()
            return StepResult(step.actor, step.op, result, expected, _matches(result, expected, True), start, end)
        if step.actor in waiting:
            raise ValueError(f"{step.actor} still waits on a blocked step; 'await' it before {step.op}")
        actor.send(step.op, case, step.args)
        if expected == BLOCKS:
            if not actor.ready(self.settle_s):
                waiting.add(step.actor)
                now = time.perf_counter_ns()
                return StepResult(step.actor, step.op, BLOCKS, BLOCKS, True, now, now)
            result, start, end = actor.reply()  # it returned: it did not block
            return StepResult(step.actor, step.op, result, BLOCKS, False, start, end)
        result, start, end = actor.reply()
        return StepResult(step.actor, step.op, result, expected, _matches(result, expected, False), start, end)

    def _together(self, group: Together, case: int) -> StepResult:
        at = time.perf_counter_ns() + LEAD_NS
        for step in group.steps:
            self.actor(step.actor).send(step.op, case, step.args, at_ns=at)
        members = []
        for step in group.steps:
            result, start, end = self.actor(step.actor).reply()
            expected = self.expected(step.expect)
            members.append(StepResult(step.actor, step.op, result, expected, _matches(result, expected, False), start, end))
        counts = dict(Counter(str(m.result) for m in members))
        expected = self.expected(group.expect)
        return StepResult("+".join(s.actor for s in group.steps), "together", counts, expected,
                          all(m.ok for m in members) and _matches(counts, expected, True),
                          min(m.start_ns for m in members), max(m.end_ns for m in members), tuple(members))
