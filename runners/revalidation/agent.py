"""The agent's side of a decision-revalidation execution: decide, park, resume, release.

An agent reads the workload's fields, records its premises, dependencies and
intent as an :class:`~vocabulary.revalidation.AgentTransaction`, waits (tool, approval,
pause), and finally asks a mechanism to validate before releasing the effect
with the returned tokens (ATR paper §3, "Validation pipeline" and "Effect
binding").  A checkpoint is plain JSON: what the durable cells persist to
SQLite and what schedule s6 round-trips in memory.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

from runners.plugins import expect
from runners.revalidation.stores import MemoryStore
from scenarios.revalidation.oracle import prelude_class, prelude_variant
from scenarios.revalidation.workload import Workload
from vocabulary.revalidation import RELEASING, AgentTransaction, Outcome, Store, Validation

#: A commit refused this many times in a row ends fail-closed (BLOCK).
MAX_COMMIT_ATTEMPTS = 4


def decide(workload: Workload, store: Store, dependencies: dict | None = None) -> AgentTransaction:
    """Read the workload's fields and record the agent transaction.

    ``dependencies`` defaults to the complete reverse index of the premises;
    the omission fault and conservative linking pass their own.
    """
    seq = store.seq  # before reading: a write racing the reads shows up in the log after it
    reads, observed = {}, {}
    for ref in workload.reads:
        observed[ref], reads[ref] = store.read(ref)
    objects = {obj: store.version(obj) for obj in workload.read_objects}
    deps = workload.dependencies if dependencies is None else dependencies
    return AgentTransaction(reads, observed, objects, workload.premises, workload.intent, seq, deps)


def checkpoint(txn: AgentTransaction, workload: Workload) -> str:
    """Serialize the transaction (premises by id; their code lives in the scenario file)."""
    ids = [p.id for p in txn.premises]
    return json.dumps({
        "workload": workload.name, "reads": txn.reads, "observed": txn.observed,
        "object_versions": txn.object_versions, "seq": txn.seq, "premises": ids,
        "dependencies": {ref: list(v) for ref, v in txn.dependencies.items()},
    }, sort_keys=True)


def resume(blob: str, workload: Workload) -> AgentTransaction:
    data = json.loads(blob)
    by_id = {p.id: p for p in workload.premises}
    return AgentTransaction(data["reads"], data["observed"], data["object_versions"],
                            tuple(by_id[i] for i in data["premises"]), workload.intent, data["seq"],
                            {ref: tuple(v) for ref, v in data["dependencies"].items()})


@dataclass(slots=True)
class Release:
    """What happened at the effect boundary."""

    outcome: Outcome
    released: bool
    payload: dict[str, Any] | None
    premises_evaluated: int
    validations: int
    commit_attempts: int
    validation_ns: int
    failed: tuple[str, ...]
    #: the released payload differs from the one the state it landed on gives (read just before the commit)
    payload_stale: bool = False


def release(txn: AgentTransaction, store: Store, mechanism, between_check_and_commit=None) -> Release:
    """Validate, then commit the effect under the tokens; revalidate while the CAS refuses.

    ``between_check_and_commit`` (schedule s5) runs once, after the first
    validation and before the first commit attempt.
    """
    premises = validations = attempts = ns = 0
    while True:
        t0 = perf_counter_ns()
        v = mechanism.validate(txn, store)
        ns += perf_counter_ns() - t0
        expect(None, "validate", v, Validation)  # a mechanism's wrong return is its error, never an outcome
        premises += v.premises_evaluated
        validations += 1
        if v.outcome not in RELEASING:
            return Release(v.outcome, False, None, premises, validations, attempts, ns, v.failed)
        if between_check_and_commit is not None and attempts == 0:
            between_check_and_commit()
        attempts += 1
        payload = txn.payload()
        stale = payload != txn.payload(store.value)  # the state the effect lands on, before the effect's own write
        if store.commit(v.tokens, txn.intent.effect):
            return Release(v.outcome, True, payload, premises, validations, attempts, ns, v.failed, stale)
        if attempts >= MAX_COMMIT_ATTEMPTS:
            return Release(Outcome.BLOCK, False, None, premises, validations, attempts, ns, ("commit_refused",))


# ---------------------------------------------------------------- the controlled execution engine
def dominated_prelude(workload: Workload, oracle: Outcome) -> str:
    """Schedule s7's first change: the strongest class the case's oracle still dominates.

    The rule lives in :func:`scenarios.revalidation.oracle.prelude_class`, so that the loader proves, for every
    prelude + variant pair, that the oracle does not depend on the schedule."""
    return prelude_class(oracle)


def pick_changes(workload: Workload, mutation_class: str, schedule, rng: random.Random) -> tuple[int, list]:
    """(variant index, the groups of changes to land): the case's variant, after s7's prelude if any."""
    mutation = workload.mutations[mutation_class]
    variant = rng.randrange(len(mutation.variants))
    changes = [mutation.variants[variant]]
    if schedule.prelude == "dominated":
        first = workload.mutations[dominated_prelude(workload, mutation.oracle)]
        changes.insert(0, first.variants[prelude_variant(variant, len(first.variants))])
    return variant, changes


def run_schedule(workload: Workload, changes: list, schedule, mechanism, dependencies=None):
    """Decide, land ``changes`` at the schedule's lifecycle point, validate and release: (Release, txn, store)."""
    store = MemoryStore(workload.initial_state())
    txn = decide(workload, store, dependencies)

    def land() -> None:
        for group in changes:
            store.write({c.ref: c.value for c in group})

    if schedule.lands == "parked":
        blob = checkpoint(txn, workload)
        land()
        txn = resume(blob, workload)
    elif schedule.lands != "validation_commit_gap":
        land()  # after_decision, tool_wait, approval, after_approval: the agent only waits there
    gap = land if schedule.lands == "validation_commit_gap" else None
    return release(txn, store, mechanism, between_check_and_commit=gap), txn, store
