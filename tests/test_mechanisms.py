"""The four mechanisms on the paper's refund example, the binding at commit, and ATR ≡ FullScan."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanisms import MechanismError, resolve
from mechanisms.atr import ATR
from mechanisms.full_scan import FullScan
from mechanisms.nocheck import NoCheck
from mechanisms.version_abort import VersionAbort
from runners.agent import decide, release
from runners.stores import MemoryStore
from scenarios.workload import load_workloads
from vocabulary.revalidation import AgentTransaction, Outcome, Premise, Validation, dominant, reverse_index

REFUND = load_workloads()["refund"]


def after_change(mechanism, changes: dict, workload=REFUND):
    store = MemoryStore(workload.initial_state())
    txn = decide(workload, store)
    store.write(changes)
    return release(txn, store, mechanism), store


@pytest.mark.parametrize("changes, expected", [
    ({"customer.display_name": "Ada King"}, Outcome.REFRESH),      # name change -> REFRESH
    ({"policy.refund_limit": 90}, Outcome.KEEP),                    # limit 100 -> 90 -> KEEP
    ({"policy.refund_limit": 50}, Outcome.BLOCK),                   # limit -> 50 -> BLOCK
    ({"order.refunded": True}, Outcome.BLOCK),                      # another worker refunded -> BLOCK
    ({"order.defect_confirmed": False}, Outcome.REPLAN),            # defect flag corrected -> REPLAN
    ({"order.shipping_note": "ring"}, Outcome.KEEP),                # read, used by no premise -> KEEP
])
def test_the_papers_refund_example(changes, expected):
    for mechanism in (ATR(), FullScan()):
        result, store = after_change(mechanism, changes)
        assert result.outcome is expected, type(mechanism).__name__
        assert result.released == (expected <= Outcome.REFRESH)
    nocheck, _ = after_change(NoCheck(), changes)
    assert nocheck.outcome is Outcome.KEEP and nocheck.released
    version_abort, _ = after_change(VersionAbort(), changes)
    assert version_abort.outcome is Outcome.REPLAN and not version_abort.released


def test_refresh_releases_the_new_payload_and_nocheck_the_stale_one():
    result, store = after_change(ATR(), {"customer.display_name": "Ada King"})
    assert result.payload["customer"] == "Ada King"
    stale, _ = after_change(NoCheck(), {"customer.display_name": "Ada King"})
    assert stale.payload["customer"] == "Ada Lovelace"


def test_atr_evaluates_only_the_affected_premises():
    result, _ = after_change(ATR(), {"policy.refund_limit": 90})
    assert result.premises_evaluated == 1
    full, _ = after_change(FullScan(), {"policy.refund_limit": 90})
    assert full.premises_evaluated == len(REFUND.premises)


class ATRWithoutTokens(ATR):
    """ATR that forgets to bind what it checked: the check-to-commit gap stays open."""

    def validate(self, txn, store):
        v = super().validate(txn, store)
        return Validation(v.outcome, v.premises_evaluated, (), v.failed)


@pytest.mark.parametrize("mechanism, released", [(ATR(), False), (FullScan(), False), (VersionAbort(), False),
                                                  (ATRWithoutTokens(), True), (NoCheck(), True)])
def test_a_change_between_check_and_commit_is_caught_only_by_bound_tokens(mechanism, released):
    store = MemoryStore(REFUND.initial_state())
    txn = decide(REFUND, store)
    result = release(txn, store, mechanism, between_check_and_commit=lambda: store.write({"policy.refund_limit": 50}))
    assert result.released is released
    if not released:
        assert result.commit_attempts == 1 and result.validations == 2


def test_a_mechanism_plugs_in_by_dotted_path():
    assert resolve("mechanisms.atr:ATR") is ATR
    assert resolve("ATR") is ATR
    with pytest.raises(MechanismError, match="unknown mechanism 'Nope'"):
        resolve("Nope")
    with pytest.raises(MechanismError, match="cannot load"):
        resolve("no_such_module:Thing")


def test_dominance_order():
    assert dominant([Outcome.REFRESH, Outcome.BLOCK, Outcome.REPLAN]) is Outcome.BLOCK
    assert dominant([]) is Outcome.KEEP
    assert Outcome.BLOCK > Outcome.REPLAN > Outcome.REFRESH > Outcome.KEEP


# ----------------------------------------------------------------- ATR ≡ FullScan with complete dependencies
FIELDS = [f"o{i}.f{j}" for i in range(3) for j in range(4)]


@st.composite
def transactions(draw):
    """Random premises over a random dependency graph (reads -> derived facts -> premises) and random changes."""
    facts = draw(st.lists(st.sets(st.sampled_from(FIELDS), min_size=1, max_size=3), min_size=1, max_size=6))
    premises = []
    for i in range(draw(st.integers(1, 8))):
        used = draw(st.sets(st.integers(0, len(facts) - 1), min_size=1, max_size=2))
        evidence = tuple(sorted(set().union(*(facts[k] for k in used))))
        severity = draw(st.sampled_from([Outcome.REFRESH, Outcome.REPLAN, Outcome.BLOCK]))
        limit = draw(st.integers(0, 6))
        if draw(st.booleans()):
            check = lambda cur, obs, ev=evidence, lim=limit: sum(cur(r) for r in ev) <= lim  # noqa: E731
        else:
            check = lambda cur, obs, ev=evidence: all(cur(r) == obs[r] for r in ev)  # noqa: E731
        premises.append(Premise(f"p{i}", evidence, check, severity))
    changes = draw(st.dictionaries(st.sampled_from(FIELDS), st.integers(0, 4), max_size=5))
    return tuple(premises), changes


def _run(mechanism, premises, changes):
    store = MemoryStore(dict.fromkeys(FIELDS, 0))
    txn = AgentTransaction(dict.fromkeys(FIELDS, 0), dict.fromkeys(FIELDS, 0), {f"o{i}": 0 for i in range(3)},
                           premises, None, 0, reverse_index(premises))
    store.write(changes)
    return mechanism.validate(txn, store)


@settings(max_examples=300, deadline=None)
@given(transactions())
def test_atr_matches_fullscan_with_complete_dependencies(case):
    premises, changes = case
    atr, full = _run(ATR(), premises, changes), _run(FullScan(), premises, changes)
    assert atr.outcome == full.outcome
    assert set(atr.failed) == set(full.failed)
    assert atr.premises_evaluated <= full.premises_evaluated
