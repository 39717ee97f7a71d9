"""The lab-wide vocabulary: what every family shares (DESIGN.md, "The shared core").

Three families (decision revalidation, semantic isolation, resume semantics)
speak their own names in ``vocabulary.revalidation``, ``vocabulary.isolation``
and ``vocabulary.resume``; none imports another's.  What they share lives
here, and only this:

- a **history**: every operation an execution performed (actor, name, start,
  end, status, value), in the order it was observed.  An operation whose
  process died is ``indeterminate`` (Jepsen's ``:info``): recorded, never
  dropped or guessed.  Histories are stored as JSON Lines (one header line,
  then one line per operation; the README documents the format), so a history
  exported by a user's own runtime can be checked too;
- a **checker**: a pure function from a history to a :class:`CheckResult`, a
  three-valued :class:`Verdict` with :class:`Witness` es in prose;
- the **verdict order** ``valid < unknown < invalid``: a composite keeps the
  worst, and unknown is never counted as valid.

Nothing here does I/O beyond turning text into values and back.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterable, Protocol, Sequence

HISTORY_FORMAT = 1

#: Record and table columns that hold timings (or ratios of timings): excluded when runs are compared for
#: determinism.
#: Every record starts with ``experiment, cell``, the cell's parameters, ``repetition`` and ``seed``.
TIMING_COLUMNS = frozenset({"validation_us", "wall_us", "latency_us", "start_skew_us", "overlap_us",
                            "overhead_us", "resolve_us", "p50_us", "p95_us", "mean_us", "median_us",
                            "ratio_to_floor", "ratio_to_naive"})


class Verdict(Enum):
    """A checker's answer.  Members compare by severity: VALID < UNKNOWN < INVALID."""

    VALID = "valid"
    UNKNOWN = "unknown"
    INVALID = "invalid"

    @property
    def rank(self) -> int:
        return _RANK[self]

    @property
    def exit_code(self) -> int:
        """``driftlab check``'s exit code: 0 valid, 1 invalid, 2 unknown."""
        return {Verdict.VALID: 0, Verdict.INVALID: 1, Verdict.UNKNOWN: 2}[self]


_RANK = {Verdict.VALID: 0, Verdict.UNKNOWN: 1, Verdict.INVALID: 2}


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The verdict that prevails among several (VALID if there are none)."""
    return max(verdicts, key=_RANK.__getitem__, default=Verdict.VALID)


#: Operation statuses: it completed, it completed and failed/was refused, or its process died.
OK, FAIL, INDETERMINATE = "ok", "fail", "indeterminate"
STATUSES = (OK, FAIL, INDETERMINATE)


@dataclass(frozen=True)
class Operation:
    """One operation of a history: who did what, when, and what came of it."""

    index: int
    actor: str
    name: str  # e.g. "read", "commit", "resume", "resolve", "effect"
    status: str = OK  # ok | fail | indeterminate
    start: float | None = None  # seconds on the history's clock (any monotonic origin)
    end: float | None = None  # None when indeterminate
    value: dict[str, Any] = field(default_factory=dict)  # arguments and result, family-specific keys

    @property
    def indeterminate(self) -> bool:
        return self.status == INDETERMINATE

    def describe(self) -> str:
        """A short phrase for witnesses: ``#3 worker-1 commit(ok) {...}``."""
        shown = ", ".join(f"{k}={v!r}" for k, v in self.value.items())
        return f"#{self.index} {self.actor} {self.name}[{self.status}]({shown})"


@dataclass(frozen=True)
class History:
    """The operations of one execution (or of one cell, grouped by ``value['group']``)."""

    family: str
    operations: tuple[Operation, ...]
    meta: dict[str, Any] = field(default_factory=dict)  # cell, seed, runtime, declared model...

    def groups(self, key: str = "group") -> dict[Any, list[Operation]]:
        """Operations split by ``value[key]`` (e.g. one race pair, one run), in history order.

        Split once per key and shared by every checker that asks (a history of a million operations is split
        once, not once per checker): read it, never change it.
        """
        cache = self.__dict__.setdefault("_groups", {})
        if key not in cache:
            out: dict[Any, list[Operation]] = {}
            for op in self.operations:
                out.setdefault(op.value.get(key), []).append(op)
            cache[key] = out
        return cache[key]


class HistoryError(ValueError):
    """A history that cannot be read; the message is one line naming the line and the problem."""


def history_to_jsonl(history: History) -> str:
    head = {"history": HISTORY_FORMAT, "family": history.family, "meta": history.meta}
    lines = [json.dumps(head, sort_keys=True, default=str)]
    for op in history.operations:
        lines.append(json.dumps({"index": op.index, "actor": op.actor, "op": op.name, "status": op.status,
                                 "start": op.start, "end": op.end, "value": op.value}, sort_keys=True, default=str))
    return "\n".join(lines) + "\n"


def history_from_jsonl(text: str, source: str = "history") -> History:
    """Parse the JSON Lines format; every problem is one line ``<source>: line N: <problem>``."""
    rows = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not rows:
        raise HistoryError(f"{source}: empty file (expected a header line, then one line per operation)")

    def load(n: int, line: str) -> dict:
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise HistoryError(f"{source}: line {n}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise HistoryError(f"{source}: line {n}: expected a JSON object")
        return obj

    head = load(*rows[0])
    if head.get("history") != HISTORY_FORMAT or not isinstance(head.get("family"), str):
        raise HistoryError(f"{source}: line {rows[0][0]}: the header must be "
                           f'{{"history": {HISTORY_FORMAT}, "family": "<family>", "meta": {{...}}}}')
    ops = []
    for n, line in rows[1:]:
        obj = load(n, line)
        for key, kind in (("actor", str), ("op", str), ("status", str)):
            if not isinstance(obj.get(key), kind):
                raise HistoryError(f"{source}: line {n}: {key!r} must be a string")
        if obj["status"] not in STATUSES:
            raise HistoryError(f"{source}: line {n}: status {obj['status']!r} is not one of {', '.join(STATUSES)}")
        for key in ("start", "end"):
            if obj.get(key) is not None and not isinstance(obj[key], (int, float)):
                raise HistoryError(f"{source}: line {n}: {key!r} must be a number or null")
        value = obj.get("value", {})
        if not isinstance(value, dict):
            raise HistoryError(f"{source}: line {n}: 'value' must be an object")
        ops.append(Operation(int(obj.get("index", len(ops))), obj["actor"], obj["op"], obj["status"],
                             obj.get("start"), obj.get("end"), value))
    meta = head.get("meta") or {}
    if not isinstance(meta, dict):
        raise HistoryError(f"{source}: line {rows[0][0]}: 'meta' must be an object")
    return History(head["family"], tuple(ops), meta)


@dataclass(frozen=True)
class Witness:
    """Concrete steps (operation indices) and one or two sentences on why they contradict the model."""

    steps: tuple[int, ...]
    explanation: str


@dataclass(frozen=True)
class CheckResult:
    checker: str
    verdict: Verdict
    witnesses: tuple[Witness, ...] = ()
    summary: str = ""  # one line: what was checked (e.g. "7000 pairs, 7000 with one commit")

    def prose(self, history: History | None = None) -> str:
        """The result as a short paragraph, the witnesses step by step."""
        lines = [f"{self.checker}: {self.verdict.value}" + (f" - {self.summary}" if self.summary else "")]
        by_index = {op.index: op for op in history.operations} if history else {}
        for w in self.witnesses:
            lines.append(f"  witness: {w.explanation}")
            for step in w.steps:
                if step in by_index:
                    lines.append(f"    {by_index[step].describe()}")
        return "\n".join(lines)


class Checker(Protocol):
    """History in, verdict out (Elle's ``check``).  ``family`` names the histories it reads."""

    name: str
    family: str

    def check(self, history: History) -> CheckResult: ...


@dataclass(frozen=True)
class Composite:
    """Runs named checkers and keeps the worst verdict (Jepsen's ``compose``)."""

    checkers: Sequence[Checker]
    name: str = "composite"

    def check_all(self, history: History) -> tuple[Verdict, list[CheckResult]]:
        results = [c.check(history) for c in self.checkers]
        return worst(r.verdict for r in results), results
