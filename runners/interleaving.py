"""Literal interleavings, Hermitage-style, and the interpreter that executes them against real actors.

Models no domain.  An interleaving is a list of steps, each tagged with the
actor that performs it (one process, one connection) and the result expected
*inline*; a family writes its own (``faults/revalidation/races.py`` for the revalidation
race pairs) and supplies a :class:`Domain`: how to start an actor, what
fresh state a run starts from, what the audit read finds afterwards, and
which status each answer gets in the history.

Three kinds of step:

- a plain :class:`Step` must return before the next starts (so the
  interpreter itself is a barrier: a step is sent only once every earlier
  step has answered — "both workers read inside their open transactions,
  then both update" is written as the reads, then a :class:`Together`);
- a :class:`Together` group is sent to its actors with one start instant a
  millisecond ahead (:func:`runners.processes.start_instant`); each actor
  spins until then, so their operations are in flight together;
- a step expected to :data:`BLOCKS` must still be waiting after
  ``settle_s``; the run goes on, and the actor's ``await`` step collects its
  result (a Hermitage "T1 blocks ... T2 commits ... T1 returns").

An expectation may depend on the run's *variant* (:func:`by_variant`; the
races call it the binding).  Every operation becomes one
:class:`~vocabulary.Operation` of the run's history — the domain's ``setup``
first, then each actor's operation with its own start and end, then the
``audit`` — and an operation whose actor gave no answer in time is
``indeterminate``: kept, never dropped or guessed (the actor is killed and
replaced for later steps).  No step kills an actor, so an actor whose process
ends by itself is the lab's failure, never a result: :class:`LostActor` fails
the cell.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence

from faults.interleaving import AWAIT, BLOCKS, ByVariant, Step, Together, by_variant  # noqa: F401 - the step language
from runners.processes import ActorProcess, start_instant
from vocabulary import FAIL, INDETERMINATE, OK, Operation


class LostActor(RuntimeError):
    """An actor's process ended by itself in the middle of a run (no step kills one): the cell fails."""

REPLY_TIMEOUT_S = 30.0
START_TIMEOUT_S = 60.0  # an actor not up by then (imports, its store connection) fails the cell


class Script(Protocol):
    """What the interpreter reads of an interleaving: a name and its steps."""

    name: str
    steps: Sequence[Step | Together]


class Domain(Protocol):
    """What a family supplies to the interpreter."""

    def start_actor(self, name: str) -> ActorProcess:
        """A new actor process (it serves :func:`runners.processes.serve_json_lines`)."""

    def request(self, step: Step, case: int) -> dict:
        """The JSON request that asks an actor to perform ``step`` in execution ``case``."""

    def prepare(self, script: Script, case: int) -> dict:
        """Fresh state for one execution; what it is (recorded as the history's ``setup`` operation)."""

    def audit(self, script: Script, case: int) -> dict:
        """What the state holds afterwards, read on a connection of the domain's own."""

    def status(self, op: str, result: Any) -> str:
        """``ok`` or ``fail`` for an answered operation (e.g. a refused commit fails)."""

    def close(self) -> None: ...


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
    script: str
    variant: str
    case: int
    steps: list[StepResult]
    audit: dict  # the domain's read of the state afterwards
    wall_ns: int
    operations: list[Operation]  # the history of this execution (indices from 0)
    errors: list[str] = field(default_factory=list)  # answers that were errors (the other side answered)

    @property
    def as_expected(self) -> bool:
        return all(s.ok for s in self.steps)

    @property
    def mismatch(self) -> str:
        """The first step whose result differs from its inline expectation ('' if none)."""
        return next((s.describe() for s in self.steps if not s.ok), "")

    @property
    def indeterminate(self) -> int:
        return sum(op.indeterminate for op in self.operations)


def _matches(result: Any, expected: Any, exact: bool) -> bool:
    if expected is None:
        return True
    if isinstance(expected, Mapping) and isinstance(result, Mapping) and not exact:
        return all(result.get(k) == v for k, v in expected.items())
    return result == expected


def is_error(result: Any) -> bool:
    return isinstance(result, str) and result.startswith("error")


class Interpreter:
    """Runs interleavings for one variant; one process per actor, reused across executions.

    ``origin_ns`` is the history clock's zero (a ``perf_counter_ns`` value):
    operation times are seconds since it.
    """

    def __init__(self, domain: Domain, variant: str, settle_s: float = 0.2, reply_timeout_s: float = REPLY_TIMEOUT_S,
                 origin_ns: int | None = None):
        self.domain, self.variant, self.settle_s = domain, variant, settle_s
        self.reply_timeout_s = reply_timeout_s
        self.origin_ns = time.perf_counter_ns() if origin_ns is None else origin_ns
        self._actors: dict[str, ActorProcess] = {}

    def actor(self, name: str) -> ActorProcess:
        if name not in self._actors or not self._actors[name].alive:  # a dead actor is replaced
            if name in self._actors:
                self._actors[name].close()
            actor = self.domain.start_actor(name)
            if not actor.wait_up(START_TIMEOUT_S):  # a step's reply time never includes the actor's start
                actor.close()
                raise LostActor(f"{actor.lost}: the cell has no result")
            self._actors[name] = actor
        return self._actors[name]

    def close(self) -> None:
        for a in self._actors.values():
            a.close()
        self._actors.clear()
        self.domain.close()

    def __enter__(self) -> "Interpreter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def expected(self, value: Any) -> Any:
        return value[self.variant] if isinstance(value, ByVariant) else value

    def _t(self, ns: int | None) -> float | None:
        return None if ns is None else (ns - self.origin_ns) / 1e9

    # ------------------------------------------------------------ running
    def run(self, script: Script, case: int) -> Execution:
        for item in script.steps:  # every actor is up before the execution starts
            for step in item.steps if isinstance(item, Together) else (item,):
                self.actor(step.actor)
        self._ops: list[Operation] = []
        self._base = {"group": case, "script": script.name, "variant": self.variant}
        self._errors: list[str] = []
        t0 = time.perf_counter_ns()
        setup = self.domain.prepare(script, case)
        self._record("setup", "setup", OK, t0, time.perf_counter_ns(), {"state": setup})
        waiting: dict[str, tuple[Step, int]] = {}  # actors whose blocked step is still running: (step, sent at)
        results = []
        for n, item in enumerate(script.steps):
            results.append(self._together(item, case, n) if isinstance(item, Together)
                           else self._step(item, case, waiting))
        for name, (step, sent) in list(waiting.items()):  # a blocked step nobody awaited: collect it, report it
            result, _, _ = self._collect(name, step, sent)
            self._errors.append(f"error: {name}: blocked step never awaited, result {result!r}")
        a0 = time.perf_counter_ns()
        audit = self.domain.audit(script, case)
        end = time.perf_counter_ns()
        self._record("audit", "audit", OK, a0, end, {"state": audit})
        return Execution(script.name, self.variant, case, results, audit, end - t0, self._ops, self._errors)

    def _record(self, actor: str, name: str, status: str, start_ns: int | None, end_ns: int | None,
                value: Mapping[str, Any]) -> None:
        self._ops.append(Operation(len(self._ops), actor, name, status, self._t(start_ns), self._t(end_ns),
                                   {**self._base, **value}))

    def _collect(self, name: str, step: Step, sent_ns: int, together: int | None = None) -> tuple[Any, int, int]:
        """The actor's answer to ``step``, recorded as one operation of the history."""
        actor = self._actors[name]  # the process the step was sent to (a dead one is replaced only for later steps)
        reply = actor.reply(self.reply_timeout_s)
        extra = {"args": dict(step.args)} if step.args else {}
        if together is not None:
            extra["together"] = together
        if reply is None and actor.exited:
            raise LostActor(f"{actor.lost} during {step.op}: nothing in these runs kills an actor, so its death is "
                            "the lab's failure (or its store's), and the cell has no result")
        if reply is None:  # silent (its store never answered): killed, and the outcome is unknown
            self._record(name, step.op, INDETERMINATE, sent_ns, None, {**extra, "result": None, "lost": actor.lost})
            now = time.perf_counter_ns()
            return f"indeterminate: {actor.lost}", sent_ns, now
        result = reply["result"]
        if is_error(result):
            self._errors.append(f"{name} {step.op}: {result}")
        status = FAIL if is_error(result) else self.domain.status(step.op, result)
        self._record(name, step.op, status, reply["start_ns"], reply["end_ns"],
                     {**extra, "result": result, **reply.get("info", {})})
        return result, reply["start_ns"], reply["end_ns"]

    def _step(self, step: Step, case: int, waiting: dict[str, tuple[Step, int]]) -> StepResult:
        expected = self.expected(step.expect)
        if step.op == AWAIT:
            if step.actor not in waiting:  # its step did not block: a mismatch, already reported
                now = time.perf_counter_ns()
                return StepResult(step.actor, step.op, "error: nothing to await", expected, False, now, now)
            blocked, sent = waiting.pop(step.actor)
            result, start, end = self._collect(step.actor, blocked, sent)
            return StepResult(step.actor, step.op, result, expected, _matches(result, expected, True), start, end)
        if step.actor in waiting:
            raise ValueError(f"{step.actor} still waits on a blocked step; 'await' it before {step.op}")
        actor = self.actor(step.actor)
        sent = time.perf_counter_ns()
        actor.send(self.domain.request(step, case))
        if expected == BLOCKS:
            if not actor.ready(self.settle_s):
                waiting[step.actor] = (step, sent)
                now = time.perf_counter_ns()
                return StepResult(step.actor, step.op, BLOCKS, BLOCKS, True, now, now)
            result, start, end = self._collect(step.actor, step, sent)  # it returned: it did not block
            return StepResult(step.actor, step.op, result, BLOCKS, False, start, end)
        result, start, end = self._collect(step.actor, step, sent)
        return StepResult(step.actor, step.op, result, expected, _matches(result, expected, False), start, end)

    def _together(self, group: Together, case: int, n: int) -> StepResult:
        at = start_instant()
        sent = time.perf_counter_ns()
        for step in group.steps:
            self.actor(step.actor).send(self.domain.request(step, case), at_ns=at)
        members = []
        for step in group.steps:
            result, start, end = self._collect(step.actor, step, sent, together=n)
            expected = self.expected(step.expect)
            members.append(StepResult(step.actor, step.op, result, expected, _matches(result, expected, False),
                                      start, end))
        counts = dict(Counter(str(m.result) for m in members))
        expected = self.expected(group.expect)
        return StepResult("+".join(s.actor for s in group.steps), "together", counts, expected,
                          all(m.ok for m in members) and _matches(counts, expected, True),
                          min(m.start_ns for m in members), max(m.end_ns for m in members), tuple(members))
