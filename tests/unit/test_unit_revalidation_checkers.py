"""Revalidation checkers on hand-written histories: one interleaving per test, the expected verdict inline.

Bug classes (issue 16 §7): an indeterminate operation folded into a verdict (judged as ok, or skipped)
instead of making it unknown; ``unknown`` folded into ``valid`` where per-group verdicts are aggregated.
"""
from __future__ import annotations

import pytest
from histories import history

from analysis.revalidation.checkers import CHECKERS, verdicts_by_group
from vocabulary import Verdict

PAIR, RULE, AGREE = CHECKERS["one_commit_per_pair"], CHECKERS["rule_holds_at_commit"], CHECKERS["oracle_agreement"]
OK, FAIL, INDET = "ok", "fail", "indeterminate"


def pair(a: str, b: str, audit: int | None = None, group: int = 1):
    rows = [("worker_a", "commit", a, {"group": group, "target_token": 3}),
            ("worker_b", "commit", b, {"group": group, "target_token": 3})]
    if audit is not None:
        rows.append(("auditor", "audit", OK, {"group": group, "state": {"refunds": audit}}))
    return rows


@pytest.mark.parametrize("a,b,audit,verdict", [
    (OK, FAIL, None, Verdict.VALID),
    (OK, OK, None, Verdict.INVALID),          # two commits of one intent
    (FAIL, FAIL, None, Verdict.INVALID),      # the intent was lost
    pytest.param(OK, INDET, None, Verdict.UNKNOWN, marks=pytest.mark.planted(
        "analysis.revalidation.checkers:OneCommitPerPair._pair", 'if op.status == OK)',
        'if op.status in (OK, INDETERMINATE))')),  # one or two commits: the history cannot tell
    (FAIL, INDET, None, Verdict.UNKNOWN),     # zero or one commit
    (INDET, INDET, None, Verdict.UNKNOWN),
    pytest.param(OK, INDET, 1, Verdict.UNKNOWN, marks=pytest.mark.planted(
        "analysis.revalidation.checkers:OneCommitPerPair._pair", 'if open_:',
        'if open_ and audited is None:')),  # an audit of 1 does not resolve the unknown into valid...
    (OK, INDET, 2, Verdict.INVALID),          # ...but an audit of 2 proves the violation
    (OK, FAIL, 2, Verdict.INVALID),           # a refused commit landed
    (FAIL, FAIL, 1, Verdict.INVALID),         # audit 1 > 0 landed + 0 open
])
def test_one_commit_per_pair_three_valued(a, b, audit, verdict):
    """Bug class: an indeterminate commit judged as ok (OK+INDET would read two commits: INVALID) or skipped
    (OK+INDET would read one commit: VALID, FAIL+INDET zero: INVALID); an audit read used to turn an unknown into
    valid; a landed-count compared with >= 1 instead of == 1."""
    assert PAIR.check(history("revalidation", pair(a, b, audit))).verdict is verdict


@pytest.mark.planted("analysis.revalidation.checkers:OneCommitPerPair.judge",
                     'if len({op.actor for op in commits}) < 2:',
                     'if len(commits) < 1:')
def test_one_commit_per_pair_judges_only_race_pairs_and_keeps_the_worst():
    """Bug class: unknown folded into valid when the pairs are aggregated (one unknown pair among valid ones
    must make the whole verdict unknown, and an invalid one must win over it); a group with one committing
    actor judged as a pair."""
    rows = pair(OK, FAIL, group=1) + pair(OK, INDET, group=2) + [("solo", "commit", OK, {"group": 3})]
    res = PAIR.check(history("revalidation", rows))
    assert res.verdict is Verdict.UNKNOWN
    assert "2 race pairs: 1 valid, 0 invalid, 1 unknown" in res.summary
    assert len(res.witnesses) == 1 and "cannot tell" in res.witnesses[0].explanation
    worse = PAIR.check(history("revalidation", rows + pair(OK, OK, group=4)))
    assert worse.verdict is Verdict.INVALID and len(worse.witnesses) == 2
    assert PAIR.check(history("revalidation", [])).verdict is Verdict.VALID


SETUP = ("harness", "setup", OK, {"group": 7, "state": {"amount": 80, "refund_limit": 100, "refunds_enabled": 1}})


def rule_rows(commit_status: str, policy_status: str, overlap: bool = False):
    """The policy turns refunds off at t=1..2; the commit lands at t=3..4 (or overlaps the policy change)."""
    c_start, c_end = (1.5, 2.5) if overlap else (3.0, 4.0)
    return [SETUP + (0.0, 0.5),
            ("admin", "set_policy", policy_status, {"group": 7, "args": {"refunds_enabled": 0}, "result": "committed"},
             1.0, None if policy_status == INDET else 2.0),
            ("worker", "commit", commit_status, {"group": 7, "target_token": 1}, c_start,
             None if commit_status == INDET else c_end)]


@pytest.mark.parametrize("commit,policy,overlap,verdict", [
    (OK, OK, False, Verdict.INVALID),       # committed after the rule turned false
    (FAIL, OK, False, Verdict.VALID),       # refused: no effect
    pytest.param(OK, OK, True, Verdict.VALID, marks=pytest.mark.planted(
        "analysis.revalidation.checkers:_before", 'a.end < b.start',
        'a.start < b.start')),  # overlapping: the commit may have come first
    pytest.param(INDET, OK, False, Verdict.UNKNOWN, marks=pytest.mark.planted(
        "analysis.revalidation.checkers:RuleHoldsAtCommit._effects", 'effects.append(_Effect(op, "commit", {}, op.status == INDETERMINATE))',
        'effects.append(_Effect(op, "commit", {}, False))')),  # may or may not have landed
    (OK, INDET, False, Verdict.VALID),      # an unanswered policy change may have landed after the commit
    (OK, FAIL, False, Verdict.VALID),       # the policy change was refused
])
def test_rule_holds_at_commit_three_valued(commit, policy, overlap, verdict):
    """Bug class: an indeterminate commit or policy change judged as ok (INVALID) or skipped (VALID) instead of
    unknown; real-time order ignored (an overlapping commit flagged) or reversed."""
    assert RULE.check(history("revalidation", rule_rows(commit, policy, overlap))).verdict is verdict


@pytest.mark.planted("analysis.revalidation.checkers:RuleHoldsAtCommit._effects",
                     'if op.value.get("result") == "updated":',
                     'if False:')
def test_rule_holds_at_commit_pending_policy_lands_at_commit_txn():
    """Bug class: a policy write inside a transaction (``updated``) applied at once instead of at its
    commit_txn: here the refund commits before the transaction commits, so the rule held."""
    rows = [SETUP + (0.0, 0.5),
            ("admin", "set_policy", OK, {"group": 7, "args": {"refunds_enabled": 0}, "result": "updated"}, 1.0, 1.5),
            ("worker", "commit", OK, {"group": 7}, 2.0, 2.5),
            ("admin", "commit_txn", OK, {"group": 7}, 3.0, 3.5)]
    assert RULE.check(history("revalidation", rows)).verdict is Verdict.VALID
    rows[2], rows[3] = (rows[3][:4] + (2.0, 2.5)), (rows[2][:4] + (3.0, 3.5))
    res = RULE.check(history("revalidation", rows))
    assert res.verdict is Verdict.INVALID and "refunds were disabled" in res.witnesses[0].explanation


@pytest.mark.planted("analysis.revalidation.checkers:_holds",
                     'state["refunds"] == 0 and ',
                     '')
def test_rule_holds_at_commit_second_refund_and_limit():
    """Bug class: the rule's conjuncts dropped (a second refund, or an amount over the limit, not a violation)."""
    two = [SETUP + (0.0, 0.5), ("w1", "commit", OK, {"group": 7}, 1.0, 1.5), ("w2", "commit", OK, {"group": 7}, 2.0, 2.5)]
    res = RULE.check(history("revalidation", two))
    assert res.verdict is Verdict.INVALID and "already held 1 refund" in res.witnesses[0].explanation
    over = [SETUP + (0.0, 0.5),
            ("admin", "set_policy", OK, {"group": 7, "args": {"refund_limit": 50}, "result": "committed"}, 1.0, 1.5),
            ("w1", "commit", OK, {"group": 7}, 2.0, 2.5)]
    res = RULE.check(history("revalidation", over))
    assert res.verdict is Verdict.INVALID and "amount 80 > refund_limit 50" in res.witnesses[0].explanation
    equal = [over[0], over[1][:3] + ({"group": 7, "args": {"refund_limit": 80}, "result": "committed"}, 1.0, 1.5), over[2]]
    assert RULE.check(history("revalidation", equal)).verdict is Verdict.VALID  # amount <= limit, not <


def release(status: str, outcome: str, oracle: str, released: bool, stale: bool = False, group: int = 1):
    return ("step", "release", status, {"group": group, "oracle": oracle, "outcome": outcome, "released": released,
                                        "payload_stale": stale})


@pytest.mark.parametrize("row,verdict,words", [
    (release(OK, "BLOCK", "BLOCK", False), Verdict.VALID, None),
    (release(OK, "KEEP", "BLOCK", True), Verdict.INVALID, "false allow"),
    (release(OK, "KEEP", "REFRESH", True, stale=True), Verdict.INVALID, "stale payload"),
    (release(OK, "REPLAN", "KEEP", False), Verdict.INVALID, "decided REPLAN"),
    pytest.param(release(INDET, "BLOCK", "BLOCK", False), Verdict.UNKNOWN, "died", marks=pytest.mark.planted(
        "analysis.revalidation.checkers:OracleAgreement._one", 'if op.indeterminate:',
        'if False:')),
])
def test_oracle_agreement_three_valued(row, verdict, words):
    """Bug class: an indeterminate release judged by the outcome it carries (VALID here) instead of unknown;
    a disagreement with the declared oracle passed."""
    res = AGREE.check(history("revalidation", [row]))
    assert res.verdict is verdict
    if words:
        assert words in res.witnesses[0].explanation


@pytest.mark.planted("analysis.revalidation.checkers:OracleAgreement.judge",
                     'if any(op.indeterminate for op in ops):',
                     'if False:')
def test_oracle_agreement_a_step_that_died_before_the_release_is_unknown():
    """Bug class: an execution whose step process died before its release skipped (the checker would answer
    VALID over the other executions) instead of unknown."""
    rows = [release(OK, "KEEP", "KEEP", True, group=1), ("step", "validate", INDET, {"group": 2}),
            ("step", "validate", OK, {"group": 3})]
    res = AGREE.check(history("revalidation", rows))
    assert res.verdict is Verdict.UNKNOWN and "never ran" in res.witnesses[0].explanation
    assert "1 valid, 0 invalid, 1 unknown" in res.summary


@pytest.mark.planted("analysis.revalidation.checkers:verdicts_by_group",
                     'gv.verdict.rank > prev.verdict.rank',
                     'True')
def test_verdicts_by_group_keeps_the_worst_per_group():
    """Bug class: unknown folded into valid when several checkers judge one group (the last or the best verdict
    kept instead of the worst)."""
    rows = pair(OK, INDET, group=1) + pair(OK, FAIL, group=2) + pair(OK, OK, group=3)
    h = history("revalidation", rows)
    got = {g: v.verdict for g, v in verdicts_by_group(h).items()}
    assert got == {1: Verdict.UNKNOWN, 2: Verdict.VALID, 3: Verdict.INVALID}
    h = history("revalidation", pair(OK, FAIL, group=1) + [release(INDET, "KEEP", "KEEP", True)])
    for order in ([PAIR, AGREE], [AGREE, PAIR]):  # neither the first nor the last verdict: the worst
        assert verdicts_by_group(h, order)[1].verdict is Verdict.UNKNOWN
