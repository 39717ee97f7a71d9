"""The decision-revalidation family's vocabulary: outcomes, premises, intents, changes.

The revalidation modules (its scenarios, faults, mechanisms, runners and
analysis) speak in these names, so that one concept has one name everywhere
(DESIGN.md, "Vocabulary"); what all three families share is in ``vocabulary``.

Decision revalidation (ATR paper, arXiv 2609.08015) models a pending agent
action as an *agent transaction*: the agent **read** versioned fields
(``object.field`` references), recorded typed **premises** over some of them,
and holds an **intent** whose effect it will release later.  A **mutation** is
a second actor's **change** to business state.  Validation ends in one of four
**outcomes**, ordered by dominance ``BLOCK > REPLAN > REFRESH > KEEP``.

The module is deliberately small and free of I/O: it is imported by the hot
validation path, which the benchmarks measure.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable, Iterable, Mapping, Protocol

from vocabulary.schema import ALWAYS, ANSWERED, WHEN_OK, HistorySchema, Key, OpSpec


class Outcome(IntEnum):
    """Validation outcome; the integer order *is* the dominance order."""

    KEEP = 0
    REFRESH = 1
    REPLAN = 2
    BLOCK = 3

    @classmethod
    def parse(cls, text: str) -> "Outcome":
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValueError(f"unknown outcome {text!r} (expected one of {', '.join(o.name for o in cls)})") from None


def dominant(outcomes: Iterable[Outcome]) -> Outcome:
    """The outcome that prevails among several: the most severe one (KEEP if none)."""
    return max(outcomes, default=Outcome.KEEP)


#: Outcomes that release the effect (REFRESH releases it with a refreshed payload).
RELEASING = frozenset({Outcome.KEEP, Outcome.REFRESH})

#: The five mutation classes and the outcome their business rule implies.
MUTATION_CLASSES: dict[str, Outcome] = {
    "irrelevant": Outcome.KEEP,
    "presentation": Outcome.REFRESH,
    "predicate_preserving": Outcome.KEEP,
    "replanning": Outcome.REPLAN,
    "blocking": Outcome.BLOCK,
}

Ref = str
"""A field reference ``"object.field"``; an object's own version key is ``"object"``."""


def object_of(ref: Ref) -> str:
    return ref.split(".", 1)[0]


Check = Callable[[Callable[[Ref], Any], Mapping[Ref, Any]], bool]
"""A premise's deterministic validator: ``check(current_value_of, observed) -> holds``."""


@dataclass(frozen=True, slots=True)
class Premise:
    """A typed decision premise: evidence fields, validator, severity on failure."""

    id: str
    evidence: tuple[Ref, ...]
    check: Check
    severity: Outcome
    validator_version: int = 1
    rule: str = ""  # the declared rule text, for records and witnesses

    def holds(self, current: Callable[[Ref], Any], observed: Mapping[Ref, Any]) -> bool:
        return self.check(current, observed)


@dataclass(frozen=True, slots=True)
class Intent:
    """The pending external action: what it does to its target, with which payload."""

    action: str
    target: str  # the object the effect lands on (target-side binding happens there)
    payload: Mapping[str, Ref]  # payload key -> field it is built from
    effect: Mapping[Ref, Any]  # the target-side write the effect performs


@dataclass(frozen=True, slots=True)
class Change:
    """One write by a second actor: ``ref`` set to ``value``."""

    ref: Ref
    value: Any


class Store(Protocol):
    """Versioned business state as a mechanism sees it (memory, SQLite, Postgres).

    Versions are kept per field (``"order.amount"``) and per object
    (``"order"``); ``seq`` is the position in the store's change log.
    """

    def read(self, ref: Ref) -> tuple[Any, int]: ...
    def value(self, ref: Ref) -> Any: ...
    def version(self, key: str) -> int: ...
    @property
    def seq(self) -> int: ...
    def changes_since(self, seq: int) -> tuple[list[Ref], int]:
        """Fields written after log position ``seq``, and the position they reach."""
        ...
    def commit(self, tokens: Iterable[tuple[str, int]], effect: Mapping[Ref, Any]) -> bool: ...


@dataclass(slots=True)
class Validation:
    """What a mechanism says before the effect: outcome, work done, tokens to bind."""

    outcome: Outcome
    premises_evaluated: int = 0
    tokens: tuple[tuple[str, int], ...] = ()
    failed: tuple[str, ...] = ()  # ids of premises that failed (the witness)


@dataclass(slots=True)
class AgentTransaction:
    """What the agent recorded when it decided, and what validation has rebased since.

    ``dependencies`` is the recorded dependency graph collapsed to its reverse
    index: a read field -> the premises (by position) that depend on it.  The
    dependency-omission fault edits it; conservative linking replaces it.
    """

    reads: dict[Ref, int]  # field -> version observed
    observed: dict[Ref, Any]  # field -> value observed
    object_versions: dict[str, int]
    premises: tuple[Premise, ...]
    intent: Intent
    seq: int  # store change-log position the reads (or the last validation) reflect
    dependencies: dict[Ref, tuple[int, ...]] = field(default_factory=dict)

    def bound_refs(self) -> tuple[Ref, ...]:
        """Evidence fields whose versions are bound to the commit (from the dependency graph)."""
        return tuple(self.dependencies)

    def payload(self, current: Callable[[Ref], Any] | None = None) -> dict[str, Any]:
        get = current or self.observed.__getitem__
        return {key: get(ref) for key, ref in self.intent.payload.items()}


def reverse_index(premises: Iterable[Premise]) -> dict[Ref, tuple[int, ...]]:
    """Complete dependencies: every evidence field -> the premises that read it."""
    index: dict[Ref, list[int]] = {}
    for i, premise in enumerate(premises):
        for ref in premise.evidence:
            index.setdefault(ref, []).append(i)
    return {ref: tuple(ids) for ref, ids in index.items()}


# --------------------------------------------------------------------- the history format (driftlab check)

_STATE = "object: amount, refunds, refund_limit, refunds_enabled"
HISTORY = HistorySchema(
    "revalidation",
    operations=(
        OpSpec("setup", "the fresh target and policy of a race or cross-resource execution",
               (Key("state", "object", ALWAYS, doc=_STATE),)),
        OpSpec("begin", "an actor opens a transaction"),
        OpSpec("read_target", "an actor reads the target row (amount, refunds, version)", (Key("result", "any"),)),
        OpSpec("read_policy", "an actor reads the policy row", (Key("result", "any"),)),
        OpSpec("validate", "an actor evaluates the refund rule on what it read", (Key("result", "any"),)),
        OpSpec("set_policy", "a policy admin writes policy fields; `result` `committed` (in effect at once) or "
               "`updated` (in effect at the actor's next `commit_txn`)",
               (Key("args", "object", ALWAYS), Key("result", "string"))),
        OpSpec("commit_txn", "an actor commits its open transaction"),
        OpSpec("commit", "an attempt to release the effect: ok committed, fail refused, indeterminate unknown",
               (Key("target_token", "integer", nullable=True), Key("policy_token", "integer", nullable=True),
                Key("intent", "string"), Key("result", "string"), Key("refused_by", "string"), Key("lost", "string"))),
        OpSpec("audit", "what the target held after the execution", (Key("state", "object", ANSWERED),)),
        OpSpec("decide", "a durable cell's agent decides (records its reads and premises)"),
        OpSpec("mutate", "a durable cell's second actor changes business state", (Key("changes", "object"),)),
        OpSpec("release", "a durable cell's validation and release: the mechanism's `outcome` beside the scenario's "
               "declared `oracle`",
               (Key("oracle", "string", WHEN_OK, choices=("KEEP", "REFRESH", "REPLAN", "BLOCK")),
                Key("outcome", "string", WHEN_OK, choices=("KEEP", "REFRESH", "REPLAN", "BLOCK")),
                Key("released", "boolean", WHEN_OK), Key("payload_stale", "boolean"), Key("mechanism", "string"))),
    ),
    partition=("group",),
    separable=True,
    common=(Key("group", "key", doc="the execution (race pair, cross-resource history, durable execution)"),),
)
