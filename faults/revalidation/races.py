"""Races and cross-resource histories as literal interleavings (ATR paper §5, "Races and failure modes").

The paper: "Across 7,000 SQLite race pairs, exactly one update committed per
pair, while checked policy tokens rejected all 100 cross-resource invalid
effects.  The target-only compare-and-set committed all 100 effects after
the policy limit became false."

Each :class:`Interleaving` below is written the way Hermitage writes
isolation tests: a list of steps, each tagged with the actor that performs
it (one database connection per actor) and the result expected *inline*, in
the generic language of :mod:`runners.interleaving`.  Nothing here runs
anything; the interpreter executes the steps against a real SQLite or
PostgreSQL database (actors: :mod:`runners.revalidation.race_actor`), checks every inline
expectation and writes every operation to the execution's history, which the
checkers of :mod:`analysis.revalidation.checkers` judge.

**The race pair is deterministic, Hermitage-style**: both workers open a
transaction (``begin``, deferred) and read the target version inside it;
the interpreter sends no update before both reads have answered (a barrier
inside both open transactions); then both attempt the guarded update at one
instant (:class:`~runners.interleaving.Together`).  The two transactions
therefore always overlap while both hold the same token; which one wins is
up to the database, and exactly one may commit.

**The business state.**  The paper's refund: a target row (the order:
``amount``, ``refunds`` effects applied, ``version``) and, in another table,
a policy row (``refund_limit``, ``refunds_enabled``, ``version``).  The
agent's decision rule is :func:`justified`.

**The bindings** (how the commit binds the checked state; the fault is
which binding a commit uses):

- ``target_cas`` — the version-token compare-and-set on the target only:
  ``UPDATE target ... WHERE id = ? AND version = <token>``; rowcount decides.
- ``policy_token`` — the same, plus the policy row's version re-verified in
  the same transaction (the checked policy token).
- ``unchecked`` — a deliberately broken commit that ignores the token; the
  negative control that shows the harness can see a double commit.

**The oracle** is the declared business rule, never a binding's output: at
most one refund per order (race pairs: ``oracle_commits = 1``), and no
refund when the rule is false at commit time (cross-resource histories:
``oracle_commits = 0``).  An effect beyond the oracle is a false allow.

**The lab's choices where the paper is silent.**  The paper does not list
its 100 cross-resource histories; the lab uses the four below, each run an
equal number of times (25 each in the paper profile).  In every one the
policy change commits strictly between the agent's validation and its
commit, so the rule is false at commit time on any backend.
:data:`POLICY_CHANGE_IN_FLIGHT` and :data:`RACE_SERIAL` are not part of the
paper's counts; the tests run them (a policy change still uncommitted when
the checked commit starts, and the race pair's serial schedule).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from faults.interleaving import AWAIT, BLOCKS, ByVariant, Step, Together, by_variant

BINDINGS: dict[str, str] = {
    "target_cas": "target-only compare-and-set: UPDATE target ... WHERE id = ? AND version = <target token>",
    "policy_token": "target CAS plus the policy row's version re-verified in the same transaction",
    "unchecked": "BROKEN control: UPDATE target ... WHERE id = ? (the token is ignored)",
}

RULE = "refunds == 0 and amount <= refund_limit and refunds_enabled == 1"


def justified(target: Mapping[str, Any], policy: Mapping[str, Any]) -> bool:
    """The refund's premises (the declared rule :data:`RULE`) over what an actor read."""
    return target["refunds"] == 0 and target["amount"] <= policy["refund_limit"] and policy["refunds_enabled"] == 1


#: An expected result that depends on the commit's binding (the interleaving's variant).
ByBinding = ByVariant
by_binding = by_variant
__all__ = ["AWAIT", "BINDINGS", "BLOCKS", "ByBinding", "CROSS_RESOURCE", "HISTORIES", "Interleaving", "RULE", "Step",
           "Together", "by_binding", "expected_commits", "justified"]


@dataclass(frozen=True)
class Interleaving:
    """One refund interleaving: its fresh rows, its steps, and the commits the declared rule permits.

    Operations: ``begin`` (a deferred transaction), ``read_target`` and
    ``read_policy`` (the row, remembered by the actor as its token),
    ``validate`` (:func:`justified` over what the actor read), ``set_policy``
    (an update; committed at once unless the actor is inside ``begin`` …
    ``commit_txn``), ``commit`` (the effect under the binding, in the open
    transaction if any: ``committed`` or ``rejected``), ``await`` (the result
    of the actor's step that was expected to block).
    """

    name: str
    description: str
    setup: Mapping[str, int]  # amount, refund_limit, refunds_enabled of the fresh rows
    steps: tuple[Step | Together, ...]
    oracle_commits: int  # refunds the declared rule permits
    bindings: tuple[str, ...]  # the bindings whose results are declared


def _h(name: str, description: str, oracle: int, *steps: Step | Together, bindings=("target_cas", "policy_token"),
       amount: int = 80, refund_limit: int = 100) -> Interleaving:
    return Interleaving(name, description, {"amount": amount, "refund_limit": refund_limit, "refunds_enabled": 1},
                        tuple(steps), oracle, tuple(bindings))


# ------------------------------------------------------------ race pairs
RACE_PAIR = _h(
    "race_pair", "two workers read the same token in open transactions, meet, and commit the same refund at once", 1,
    Step("worker_a", "begin", expect="ok"),             # deferred: no lock yet
    Step("worker_b", "begin", expect="ok"),
    Step("worker_a", "read_target", expect={"amount": 80, "refunds": 0, "version": 0}),   # inside the transaction
    Step("worker_b", "read_target", expect={"amount": 80, "refunds": 0, "version": 0}),
    Step("worker_a", "read_policy", expect={"refund_limit": 100, "version": 0}),
    Step("worker_b", "read_policy", expect={"refund_limit": 100, "version": 0}),
    Step("worker_a", "validate", expect=True),          # not refunded, 80 <= 100
    Step("worker_b", "validate", expect=True),          # the same decision, the same token (version 0)
    # the barrier: both transactions are open and hold token v0; now both attempt the guarded update
    Together((Step("worker_a", "commit"), Step("worker_b", "commit")),
             expect=by_binding(target_cas={"committed": 1, "rejected": 1},
                               unchecked={"committed": 2})),   # the broken control refunds twice
    Step("auditor", "read_target", expect=by_binding(target_cas={"refunds": 1, "version": 1},
                                                     unchecked={"refunds": 2, "version": 2})),
    bindings=("target_cas", "unchecked"),
)

RACE_SERIAL = _h(
    "race_serial", "the race pair's serial schedule: the second worker's token is already stale", 1,
    Step("worker_a", "read_target", expect={"refunds": 0, "version": 0}),
    Step("worker_a", "read_policy", expect={"version": 0}),
    Step("worker_b", "read_target", expect={"refunds": 0, "version": 0}),
    Step("worker_b", "read_policy", expect={"version": 0}),
    Step("worker_a", "validate", expect=True),
    Step("worker_b", "validate", expect=True),
    Step("worker_a", "commit", expect="committed"),      # target version 0 -> 1
    Step("worker_b", "commit", expect=by_binding(target_cas="rejected", unchecked="committed")),  # token 0 != 1
    Step("auditor", "read_target", expect=by_binding(target_cas={"refunds": 1}, unchecked={"refunds": 2})),
    bindings=("target_cas", "unchecked"),
)

# ------------------------------------------------ cross-resource histories
LIMIT_DROPS = _h(
    "limit_drops", "the paper's case: the refund limit drops from 100 to 50 between validation and commit", 0,
    Step("agent", "read_target", expect={"amount": 80, "refunds": 0, "version": 0}),
    Step("agent", "read_policy", expect={"refund_limit": 100, "refunds_enabled": 1, "version": 0}),
    Step("agent", "validate", expect=True),                                  # 80 <= 100
    Step("policy_admin", "set_policy", {"refund_limit": 50}, expect="committed"),  # policy v1: 80 > 50
    Step("agent", "commit", expect=by_binding(target_cas="committed", policy_token="rejected")),
    Step("auditor", "read_target", expect=by_binding(target_cas={"refunds": 1}, policy_token={"refunds": 0})),
    Step("auditor", "read_policy", expect={"refund_limit": 50, "version": 1}),  # the rule is false now
)

REFUNDS_SUSPENDED = _h(
    "refunds_suspended", "refunds are switched off in the policy between validation and commit", 0,
    Step("agent", "read_target", expect={"refunds": 0, "version": 0}),
    Step("agent", "read_policy", expect={"refunds_enabled": 1, "version": 0}),
    Step("agent", "validate", expect=True),
    Step("policy_admin", "set_policy", {"refunds_enabled": 0}, expect="committed"),  # policy v1
    Step("agent", "commit", expect=by_binding(target_cas="committed", policy_token="rejected")),
    Step("auditor", "read_target", expect=by_binding(target_cas={"refunds": 1}, policy_token={"refunds": 0})),
    Step("auditor", "read_policy", expect={"refunds_enabled": 0, "version": 1}),
)

LIMIT_DROPS_IN_TWO_STEPS = _h(
    "limit_drops_in_two_steps", "100 -> 90 (still permits 80), then 90 -> 50, both after validation", 0,
    Step("agent", "read_target", expect={"refunds": 0, "version": 0}),
    Step("agent", "read_policy", expect={"refund_limit": 100, "version": 0}),
    Step("agent", "validate", expect=True),
    Step("policy_admin", "set_policy", {"refund_limit": 90}, expect="committed"),  # v1: 80 <= 90 still
    Step("policy_admin", "set_policy", {"refund_limit": 50}, expect="committed"),  # v2: 80 > 50
    Step("agent", "commit", expect=by_binding(target_cas="committed", policy_token="rejected")),  # token v0
    Step("auditor", "read_target", expect=by_binding(target_cas={"refunds": 1}, policy_token={"refunds": 0})),
    Step("auditor", "read_policy", expect={"refund_limit": 50, "version": 2}),
)

LIMIT_DROPS_AFTER_REVALIDATION = _h(
    "limit_drops_after_revalidation", "the agent revalidates after 100 -> 90 (token v1), then 90 -> 50 lands", 0,
    Step("agent", "read_target", expect={"refunds": 0, "version": 0}),
    Step("agent", "read_policy", expect={"refund_limit": 100, "version": 0}),
    Step("agent", "validate", expect=True),
    Step("policy_admin", "set_policy", {"refund_limit": 90}, expect="committed"),  # v1
    Step("agent", "read_policy", expect={"refund_limit": 90, "version": 1}),      # revalidation: token v1
    Step("agent", "validate", expect=True),                                       # 80 <= 90: KEEP
    Step("policy_admin", "set_policy", {"refund_limit": 50}, expect="committed"),  # v2
    Step("agent", "commit", expect=by_binding(target_cas="committed", policy_token="rejected")),  # token v1
    Step("auditor", "read_target", expect=by_binding(target_cas={"refunds": 1}, policy_token={"refunds": 0})),
    Step("auditor", "read_policy", expect={"refund_limit": 50, "version": 2}),
)

CROSS_RESOURCE = (LIMIT_DROPS, REFUNDS_SUSPENDED, LIMIT_DROPS_IN_TWO_STEPS, LIMIT_DROPS_AFTER_REVALIDATION)

# ---------------------------------------------- concurrency of the token
POLICY_CHANGE_IN_FLIGHT = _h(
    "policy_change_in_flight", "the policy change is written but not committed when the checked commit starts", 0,
    Step("agent", "read_target", expect={"refunds": 0, "version": 0}),
    Step("agent", "read_policy", expect={"refund_limit": 100, "version": 0}),
    Step("agent", "validate", expect=True),
    Step("policy_admin", "begin", expect="ok"),
    Step("policy_admin", "set_policy", {"refund_limit": 50}, expect="updated"),  # uncommitted: holds the row
    Step("agent", "commit", expect=BLOCKS),        # the token check waits for the admin's transaction
    Step("policy_admin", "commit_txn", expect="committed"),
    Step("agent", AWAIT, expect="rejected"),     # it then sees policy v1 != token v0
    Step("auditor", "read_target", expect={"refunds": 0, "version": 0}),
    bindings=("policy_token",),
)

HISTORIES: dict[str, Interleaving] = {h.name: h for h in (RACE_PAIR, RACE_SERIAL, *CROSS_RESOURCE, POLICY_CHANGE_IN_FLIGHT)}


def expected_commits(history: Interleaving, binding: str) -> int:
    """Effects the history's inline expectations promise under ``binding`` (its commit steps, counted)."""
    n = 0
    for item in history.steps:
        if isinstance(item, Together):
            counts = item.expect[binding] if isinstance(item.expect, ByBinding) else item.expect
            n += (counts or {}).get("committed", 0)
        elif item.op in ("commit", AWAIT):
            expect = item.expect[binding] if isinstance(item.expect, ByBinding) else item.expect
            n += expect == "committed"
    return n
