"""Layer 2, premise revalidation at resume: is the parked decision still the one to release?

Serves "From Version Conflicts to Decision Conflicts" (ATR, arXiv 2609.08015):
an agent decides, parks for an approval, and while it waits the state that
justified the decision changes.  Releasing the parked action then acts on a
stale decision.  ATR's answer, kept small here:

- when a node parks, it **declares the premises** its pending action depends
  on: each :class:`Premise` names the fields it reads and a rule over them (a
  plain Python callable ``rule(now, then) -> bool``) and what a failure means
  (``REFRESH``: release with fresh values; ``REPLAN``: decide again;
  ``BLOCK``: do not act).  :meth:`Revalidator.park` reads those fields once
  (value and version) and returns a JSON-able record to keep in the graph's
  state, so it is stored in the checkpoint;
- on resume, :meth:`Revalidator.revalidate` finds the fields whose version
  changed (or asks the source's change log), follows a **reverse index**
  (field -> premises that read it) and re-checks **only those premises**;
  the outcome is the dominant one, ``BLOCK > REPLAN > REFRESH > KEEP``.  The
  graph routes on it (:meth:`Verdict.route`) instead of releasing a stale
  action, or calls :meth:`Revalidator.require`, which raises
  :class:`~driftlab_guard.errors.StaleDecision` for REPLAN and BLOCK.

The versions checked are returned as ``Verdict.tokens`` for a compare-and-set
at the target (ATR's time-of-check/time-of-use guard).  What it trades away:
one batched read of the declared fields at park and at resume; safety holds
over the declared reads only (a read the premise does not declare is invisible
to it).  A premise id the running code no longer declares fails closed (BLOCK).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from driftlab_guard.errors import StaleDecision


class Outcome(IntEnum):
    """The integer order is the dominance order: BLOCK > REPLAN > REFRESH > KEEP."""

    KEEP = 0
    REFRESH = 1
    REPLAN = 2
    BLOCK = 3


KEEP, REFRESH, REPLAN, BLOCK = Outcome.KEEP, Outcome.REFRESH, Outcome.REPLAN, Outcome.BLOCK

Rule = Callable[[Mapping[str, Any], Mapping[str, Any]], bool]
"""``rule(now, then) -> holds``: the premise's fields as read now and as read when the node parked."""


@dataclass(frozen=True)
class Premise:
    """A premise of a pending action: the fields it reads, the rule over them, the outcome when it fails."""

    id: str
    reads: tuple[str, ...]
    rule: Rule
    on_fail: Outcome = REPLAN

    def __post_init__(self) -> None:
        """A declaration that cannot mean what it says is refused here, not read as KEEP later: ``reads`` is a
        collection of field names (a bare string would be read as its characters), the rule is callable."""
        if not isinstance(self.id, str) or not self.id:
            raise TypeError(f"premise id {self.id!r}: a non-empty string")
        if isinstance(self.reads, (str, bytes)):
            raise TypeError(f"premise {self.id!r}: reads is a tuple of field names, not the string {self.reads!r} "
                            f"(write reads=({self.reads!r},))")
        reads = tuple(self.reads)
        bad = [r for r in reads if not isinstance(r, str) or not r]
        if bad or not reads:
            raise TypeError(f"premise {self.id!r}: reads needs at least one field name, each a non-empty string "
                            f"(got {reads!r})")
        if not callable(self.rule):
            raise TypeError(f"premise {self.id!r}: rule must be callable as rule(now, then) -> bool")
        object.__setattr__(self, "reads", reads)
        object.__setattr__(self, "on_fail", Outcome(self.on_fail))

    def holds(self, now: Mapping[str, Any], then: Mapping[str, Any]) -> bool:
        """The rule over this premise's fields; a rule that raises does not hold (fail closed); a rule that
        returns anything but a bool is a bug in the declaration (``"no"`` is truthy) and raises TypeError."""
        try:
            result = self.rule({r: now.get(r) for r in self.reads}, {r: then.get(r) for r in self.reads})
        except Exception:  # noqa: BLE001 - a rule that cannot be evaluated on the new values does not hold
            return False
        if not isinstance(result, bool):
            raise TypeError(f"premise {self.id!r}: its rule returned {result!r} ({type(result).__name__}), "
                            f"not a bool")
        return result


class Source(Protocol):
    """Where the premises' fields live (a database, a service).  ``read`` is required; ``changes_since`` optional.

    ``read(refs)`` returns ``{ref: (value, version)}`` for the refs that exist
    (a version is anything comparable with ``==``: a row version, an updated-at).
    ``position()`` and ``changes_since(position) -> (changed refs, new position)``,
    when the source has a change log, let revalidation skip reading unchanged fields.
    """

    def read(self, refs: Sequence[str]) -> Mapping[str, tuple[Any, Any]]: ...


@dataclass
class Verdict:
    """What revalidation hands the graph: the outcome and why."""

    outcome: Outcome
    evaluated: tuple[str, ...] = ()  # ids of the premises re-checked (only those whose fields changed)
    failed: tuple[str, ...] = ()  # ids of the premises that no longer hold (the witness)
    changed: tuple[str, ...] = ()  # fields whose version changed since the node parked
    fresh: dict[str, Any] = field(default_factory=dict)  # the current values of every declared field
    tokens: dict[str, Any] = field(default_factory=dict)  # field -> version checked (compare-and-set at the target)
    reason: str = ""

    @property
    def releases(self) -> bool:
        """KEEP and REFRESH release the action (REFRESH with the fresh values)."""
        return self.outcome <= REFRESH

    def route(self, keep: str, refresh: str | None = None, replan: str | None = None, block: str | None = None) -> str:
        """The node to go to (for ``add_conditional_edges`` or ``Command(goto=...)``); a missing target falls back
        to the next more cautious one given (refresh -> keep; replan -> block; block -> replan)."""
        targets = {KEEP: keep, REFRESH: refresh or keep, REPLAN: replan or block, BLOCK: block or replan}
        target = targets[self.outcome]
        if target is None:
            raise ValueError(f"no route for {self.outcome.name}: give replan= or block=")
        return target

    def as_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome.name, "evaluated": list(self.evaluated), "failed": list(self.failed),
                "changed": list(self.changed), "reason": self.reason}


def reverse_index(premises: Iterable[Premise]) -> dict[str, tuple[str, ...]]:
    """Field -> ids of the premises that read it."""
    index: dict[str, list[str]] = {}
    for p in premises:
        for ref in p.reads:
            index.setdefault(ref, []).append(p.id)
    return {ref: tuple(ids) for ref, ids in index.items()}


class Revalidator:
    """Declares premises at park, re-checks the affected ones at resume (module docstring)."""

    def __init__(self, source: Source, premises: Iterable[Premise] = ()):
        self.source = source
        self.premises: dict[str, Premise] = {}
        for p in premises:
            self.declare(p)

    def declare(self, premise: Premise) -> Premise:
        """Make a premise known by id (a record names premises by id; their rules are code, the latest wins)."""
        known = self.premises.get(premise.id)
        if known is not None and (known.reads, known.on_fail) != (premise.reads, premise.on_fail):
            raise ValueError(f"premise {premise.id!r} is declared twice with different reads or outcomes")
        self.premises[premise.id] = premise
        return premise

    def park(self, premises: Iterable[Premise]) -> dict[str, Any]:
        """Read the premises' fields now; the record to keep in the graph state (JSON-able but for the values)."""
        ps = [self.declare(p) for p in premises]
        refs = sorted({r for p in ps for r in p.reads})
        position = self.source.position() if hasattr(self.source, "position") else None
        seen = self.source.read(refs)
        unknown = [r for r in refs if r not in seen]
        if unknown:  # a misspelt field would never change, so its premise would never be re-checked
            owners = sorted(p.id for p in ps if set(p.reads) & set(unknown))
            raise ValueError(f"premise {owners[0]!r} reads {unknown[0]!r}, which the source does not know "
                             f"(misspelt? every field a premise reads must exist when the node parks)")
        return {"premises": [p.id for p in ps], "seen": {r: list(seen[r]) if r in seen else None for r in refs},
                "position": position}

    def revalidate(self, parked: Mapping[str, Any]) -> Verdict:
        """Re-check the premises whose fields changed since :meth:`park`; the dominant outcome wins."""
        ids = list(parked["premises"])
        unknown = [i for i in ids if i not in self.premises]
        if unknown:
            return Verdict(BLOCK, failed=tuple(unknown),
                           reason=f"premise {unknown[0]!r} is not declared by the running code (fail closed)")
        ps = [self.premises[i] for i in ids]
        seen: dict[str, Any] = parked["seen"]
        index = reverse_index(ps)
        refs = sorted(index)
        if parked.get("position") is not None and hasattr(self.source, "changes_since"):
            logged, _ = self.source.changes_since(parked["position"])
            suspects = sorted(set(logged) & set(refs))
        else:
            suspects = refs
        current = self.source.read(suspects) if suspects else {}
        changed = [r for r in suspects if _version(current.get(r)) != _version(seen.get(r))]
        then = {r: (seen[r][0] if seen.get(r) is not None else None) for r in refs}
        now = dict(then)
        now.update({r: (current[r][0] if r in current else None) for r in suspects})
        tokens = {r: _version(current.get(r)) if r in current else _version(seen.get(r)) for r in refs}
        affected = {i for r in changed for i in index[r]}
        outcome, evaluated, failed = KEEP, [], []
        for p in ps:  # declaration order, affected ones only; the most severe failure wins, whatever the order
            if p.id not in affected:
                continue
            evaluated.append(p.id)
            if not p.holds(now, then):
                failed.append(p.id)
                outcome = max(outcome, p.on_fail)
        failed.sort(key=lambda i: -self.premises[i].on_fail)  # the witness: the most severe failure first
        reason = (f"{len(changed)} changed field(s) ({', '.join(changed)}) re-checked {len(evaluated)} premise(s)"
                  if changed else "no declared field changed")
        return Verdict(outcome, tuple(evaluated), tuple(failed), tuple(changed), now, tokens, reason)

    def require(self, parked: Mapping[str, Any]) -> Verdict:
        """:meth:`revalidate`, raising :class:`StaleDecision` when the action must not be released as decided."""
        verdict = self.revalidate(parked)
        if not verdict.releases:
            raise StaleDecision(verdict)
        return verdict


def _version(entry: Any) -> Any:
    return None if entry is None else entry[1]


class DictSource:
    """An in-memory :class:`Source` with per-field versions and a change log (tests, examples, benchmarks)."""

    def __init__(self, values: Mapping[str, Any] | None = None):
        self.values: dict[str, Any] = {}
        self.versions: dict[str, int] = {}
        self.log: list[str] = []
        for ref, value in dict(values or {}).items():
            self.write(ref, value)

    def write(self, ref: str, value: Any) -> None:
        self.values[ref] = value
        self.versions[ref] = self.versions.get(ref, 0) + 1
        self.log.append(ref)

    def read(self, refs: Sequence[str]) -> dict[str, tuple[Any, int]]:
        return {r: (self.values[r], self.versions[r]) for r in refs if r in self.values}

    def position(self) -> int:
        return len(self.log)

    def changes_since(self, position: int) -> tuple[list[str], int]:
        return sorted(set(self.log[position:])), len(self.log)
