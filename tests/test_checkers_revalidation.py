"""The revalidation checkers on planted histories: a double commit, an indeterminate commit, a clean pair.

Histories are written as JSON Lines (the stored format, as a user's runtime
would write it) and judged by ``analysis.revalidation.checkers``; nothing
runs a database here.
"""
from __future__ import annotations

import json

import pytest

from analysis.revalidation.checkers import CHECKERS, OneCommitPerPair, RuleHoldsAtCommit
from vocabulary import Composite, Verdict, history_from_jsonl

SETUP = {"amount": 80, "refund_limit": 100, "refunds_enabled": 1, "refunds": 0}


def jsonl(*ops: dict) -> str:
    lines = [json.dumps({"history": 1, "family": "revalidation", "meta": {}})]
    for i, op in enumerate(ops):
        lines.append(json.dumps({"index": i, "status": "ok", **op}))
    return "\n".join(lines) + "\n"


def setup(group, t=0.0):
    return {"actor": "setup", "op": "setup", "start": t, "end": t + 0.001, "value": {"group": group, "state": SETUP}}


def commit(group, actor, start, end, result="committed", status=None, token=0, **extra):
    status = status or ("ok" if result == "committed" else "fail")
    value = {"group": group, "result": result, "target_token": token, "intent": f"refund:{group}", **extra}
    return {"actor": actor, "op": "commit", "status": status, "start": start, "end": end, "value": value}


def audit(group, refunds, t=1.0):
    return {"actor": "audit", "op": "audit", "start": t, "end": t + 0.001,
            "value": {"group": group, "state": {**SETUP, "refunds": refunds}}}


def pair(group, a, b, refunds):
    return [setup(group), commit(group, "worker_a", *a[:2], **a[2]), commit(group, "worker_b", *b[:2], **b[2]),
            audit(group, refunds)]


CLEAN = pair(17, (0.010, 0.012, {}), (0.010, 0.013, {"result": "rejected", "refused_by": "target_cas"}), 1)
DOUBLE = pair(17, (0.010, 0.012, {"token": 3}), (0.010, 0.013, {"token": 3}), 2)
LOST = pair(17, (0.010, 0.012, {}), (0.010, None, {"result": None, "status": "indeterminate"}), 1)


def test_a_planted_double_commit_is_invalid_with_a_prose_witness():
    history = history_from_jsonl(jsonl(*DOUBLE))
    result = OneCommitPerPair().check(history)
    assert result.verdict is Verdict.INVALID and Verdict.INVALID.exit_code == 1
    (witness,) = result.witnesses
    assert witness.explanation.startswith("pair 17: worker_a committed with token v3 at t=0.012000 s, then worker_b "
                                          "committed with the same token v3 at t=0.013000 s: two commits of one intent")
    assert witness.steps == (1, 2)
    assert "#2 worker_b commit[ok]" in result.prose(history)


def test_an_indeterminate_commit_is_unknown_not_valid():
    result = OneCommitPerPair().check(history_from_jsonl(jsonl(*LOST)))
    assert result.verdict is Verdict.UNKNOWN
    assert "never answered" in result.witnesses[0].explanation
    assert "0 valid" in result.summary and "1 unknown" in result.summary


def test_an_indeterminate_commit_with_a_proven_double_commit_is_invalid():
    proven = pair(4, (0.010, 0.012, {}), (0.010, None, {"result": None, "status": "indeterminate"}), 2)
    assert OneCommitPerPair().check(history_from_jsonl(jsonl(*proven))).verdict is Verdict.INVALID


def test_a_clean_pair_is_valid():
    history = history_from_jsonl(jsonl(*CLEAN))
    for checker in CHECKERS.values():
        assert checker.check(history).verdict is Verdict.VALID, checker.name


def test_a_pair_with_no_commit_is_invalid():
    none = pair(5, (0.010, 0.012, {"result": "rejected"}), (0.010, 0.013, {"result": "rejected"}), 0)
    result = OneCommitPerPair().check(history_from_jsonl(jsonl(*none)))
    assert result.verdict is Verdict.INVALID and "no commit landed" in result.witnesses[0].explanation


def test_the_worst_pair_decides_and_a_composite_keeps_the_worst():
    both = [*CLEAN, *[{**op, "value": {**op["value"], "group": 18}} for op in LOST]]
    history = history_from_jsonl(jsonl(*both))
    assert OneCommitPerPair().check(history).verdict is Verdict.UNKNOWN
    verdict, results = Composite(list(CHECKERS.values())).check_all(history)
    assert verdict is Verdict.UNKNOWN and {r.checker for r in results} == set(CHECKERS)


def policy(group, start, end, result="committed", actor="policy_admin", **args):
    return {"actor": actor, "op": "set_policy", "start": start, "end": end,
            "value": {"group": group, "args": args, "result": result}}


def test_a_refund_after_the_limit_dropped_breaks_the_rule():
    history = history_from_jsonl(jsonl(setup(1), policy(1, 0.02, 0.03, refund_limit=50),
                                       commit(1, "agent", 0.04, 0.05), audit(1, 1)))
    result = RuleHoldsAtCommit().check(history)
    assert result.verdict is Verdict.INVALID
    text = result.witnesses[0].explanation
    assert "amount 80 > refund_limit 50" in text and "policy_admin set refund_limit=50" in text


def test_a_refund_concurrent_with_the_policy_change_may_come_first():
    """Overlapping operations may be ordered either way: one order keeps the rule, so the history is valid."""
    history = history_from_jsonl(jsonl(setup(1), policy(1, 0.02, 0.05, refund_limit=50),
                                       commit(1, "agent", 0.03, 0.04), audit(1, 1)))
    assert RuleHoldsAtCommit().check(history).verdict is Verdict.VALID


def test_a_policy_change_in_a_transaction_lands_at_its_commit():
    ops = [setup(1), {"actor": "policy_admin", "op": "begin", "start": 0.01, "end": 0.011, "value": {"group": 1}},
           policy(1, 0.012, 0.013, result="updated", refund_limit=50),
           commit(1, "agent", 0.02, 0.021),  # before the admin's commit_txn: the old limit still holds
           {"actor": "policy_admin", "op": "commit_txn", "start": 0.03, "end": 0.031, "value": {"group": 1}}]
    assert RuleHoldsAtCommit().check(history_from_jsonl(jsonl(*ops))).verdict is Verdict.VALID
    ops[3] = commit(1, "agent", 0.04, 0.041)  # after it: the limit is 50
    assert RuleHoldsAtCommit().check(history_from_jsonl(jsonl(*ops))).verdict is Verdict.INVALID


def test_an_indeterminate_refund_after_the_limit_dropped_is_unknown():
    lost = commit(1, "agent", 0.04, None, result=None, status="indeterminate")
    history = history_from_jsonl(jsonl(setup(1), policy(1, 0.02, 0.03, refund_limit=50), lost))
    result = RuleHoldsAtCommit().check(history)
    assert result.verdict is Verdict.UNKNOWN and "depends on indeterminate" in result.witnesses[0].explanation


def test_an_indeterminate_policy_change_may_land_after_the_refund():
    """An operation that never answered may take effect any time after it started: here, after the refund."""
    lost = policy(1, 0.02, None, result=None, refund_limit=50) | {"status": "indeterminate"}
    history = history_from_jsonl(jsonl(setup(1), lost, commit(1, "agent", 0.04, 0.05)))
    assert RuleHoldsAtCommit().check(history).verdict is Verdict.VALID


def test_the_double_commit_also_breaks_the_rule():
    assert RuleHoldsAtCommit().check(history_from_jsonl(jsonl(*DOUBLE))).verdict is Verdict.INVALID


@pytest.mark.parametrize("name", sorted(CHECKERS))
def test_registry_entries_follow_the_protocol(name):
    checker = CHECKERS[name]
    assert checker.name == name and checker.family == "revalidation"
    empty = history_from_jsonl(jsonl())
    assert checker.check(empty).verdict is Verdict.VALID  # nothing to judge
