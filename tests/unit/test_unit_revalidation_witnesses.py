"""Revalidation checkers, second table: witnesses in prose, real-time order at its edges, policy transactions and
the enumeration bounds (``analysis.revalidation.checkers``).

Bug classes (issue 16 §7): a witness that names the wrong operation (the later commit first, another pair's
commit, the wrong token, the wrong reason the rule was false); real-time order misread at its edge (operations that
touch are concurrent); a policy write applied at another actor's transaction or at a refused one; an audit read
used to resolve an unknown into valid; an enumeration bound off by one (a history it can judge answered unknown, or
one it cannot judge answered valid); unknown folded into valid where per-group verdicts are aggregated.
"""
from __future__ import annotations

import pytest
from histories import history

from analysis.revalidation.checkers import CHECKERS, MAX_EFFECTS, MAX_OPTIONAL, verdicts_by_group
from vocabulary import Verdict

PAIR, RULE, AGREE = CHECKERS["one_commit_per_pair"], CHECKERS["rule_holds_at_commit"], CHECKERS["oracle_agreement"]
OK, FAIL, INDET = "ok", "fail", "indeterminate"
V, U, I = Verdict.VALID, Verdict.UNKNOWN, Verdict.INVALID


def c(actor, status, start, end, group=1, **value):
    return (actor, "commit", status, {"group": group, **value}, start, end)


def audit(state, at=3.0, group=1):
    return ("auditor", "audit", OK, {"group": group, **({"state": state} if state is not None else {})}, at, at + 0.5)


def one(checker, rows):
    r = checker.check(history("revalidation", rows))
    return r.verdict, [(w.steps, w.explanation) for w in r.witnesses], r.summary


# ------------------------------------------------------------------ one commit per pair: witnesses
@pytest.mark.parametrize("rows,verdict,witness", [
    # the commit that ended first is named first, whatever the history order
    pytest.param([c("a", OK, 0.0, 2.0, target_token=3), c("b", OK, 0.5, 1.0, target_token=4)], I,
     ((1, 0), "pair 1: b committed with token v4 at t=1.000000 s, then a committed with token v3 at t=2.000000 s: "
              "two commits of one intent."), marks=pytest.mark.planted(
        "analysis.revalidation.checkers:OneCommitPerPair._pair", "key=lambda op: (op.end or 0, op.index))",
        "key=lambda op: op.index)")),
    ([c("a", OK, 0.0, 2.0, target_token=3), c("b", OK, 0.5, 1.0, target_token=3), audit({"refunds": 2})], I,
     ((1, 0), "pair 1: b committed with token v3 at t=1.000000 s, then a committed with the same token v3 at "
              "t=2.000000 s: two commits of one intent (the target row holds 2 refunds afterwards).")),
    ([c("a", OK, 0.0, 2.0), c("b", INDET, 0.5, None), audit({"refunds": 2})], I,
     ((0, 1, 2), "pair 1: the audit read at t=3.000000 s found 2 refunds on the target after the pair (a ok, "
                 "b indeterminate): two commits of one intent.")),
    ([c("a", FAIL, 0.0, 2.0), c("b", FAIL, 0.5, 1.0), audit({"refunds": 1})], I,
     ((0, 1, 2), "pair 1: the audit read found 1 refund(s) although only 0 commit(s) answered committed and none is "
                 "indeterminate: a refused commit landed.")),
    ([c("a", OK, 0.0, 2.0, target_token=3), c("b", INDET, 0.5, None, lost="killed"), c("c", INDET, None, None)], U,
     ((0, 1, 2), "pair 1: a committed with token v3 at t=2.000000 s; b's commit started at t=0.500000 s and never "
                 "answered (killed); c's commit started at t=? and never answered: the pair holds one or two "
                 "commits, the history cannot tell which.")),
    ([c("a", FAIL, 0.0, 2.0), c("b", INDET, 0.5, None)], U,
     ((0, 1), "pair 1: no commit answered committed; b's commit started at t=0.500000 s and never answered: the "
              "pair may hold zero, one or more commits.")),
    ([c("a", FAIL, 0.0, 2.0, result="refused", refused_by="cas"), c("b", FAIL, 0.5, 1.0)], I,
     ((0, 1), "pair 1: no commit landed (a refused by cas, b fail): the pair's intent was refused twice, not "
              "exactly once.")),
])
def test_one_commit_per_pair_witnesses_name_the_commits(rows, verdict, witness):
    """Bug class: a witness that names the wrong operation: the later commit first, a token or a time of the other
    commit, the audit's count, the lost reason or the refusal of another commit."""
    got, ws, _ = one(PAIR, rows)
    assert got is verdict and ws == [witness]


@pytest.mark.parametrize("rows,verdict", [
    ([c("a", OK, 0, 1), c("b", FAIL, 2, 3), audit({"refunds": 1})], V),     # the audit agrees with one commit
    ([c("a", OK, 0, 1), c("b", FAIL, 2, 3), audit(None)], V),                # an audit that read nothing
    ([c("a", OK, 0, 1), c("b", FAIL, 2, 3), audit({"refunds": "2"})], V),    # not a count: proves nothing
    pytest.param([c("a", OK, 0, 1), c("b", INDET, 2, None), audit({"refunds": 0})], U,  # never resolves an unknown
                 marks=pytest.mark.planted("analysis.revalidation.checkers:OneCommitPerPair._pair", "if open_:",
                                           "if open_ and not isinstance(audited, int):")),
    ([c("a", FAIL, 0, 1), c("b", INDET, 2, None), audit({"refunds": 1})], U),
    ([c("a", OK, 0, 1), c("a", OK, 2, 3)], V),                                # one actor retrying: not a race pair
])
def test_one_commit_per_pair_audit_reads_only_prove_violations(rows, verdict):
    """Bug class: an audit read used to resolve an unknown into valid, or an audit that read nothing (or no count)
    taken as a violation; one actor's two commits judged as a race pair."""
    got, _, summary = one(PAIR, rows)
    assert got is verdict
    if rows[0][0] == rows[1][0]:
        assert summary == "0 race pairs: 0 valid, 0 invalid, 0 unknown"


# ------------------------------------------------------------------ the rule at commit: witnesses and edges
SETUP = ("harness", "setup", OK, {"group": 7, "state": {"amount": 80, "refund_limit": 100, "refunds_enabled": 1}},
         0.0, 0.5)


def policy(status, start, end, result="committed", actor="admin", **args):
    return (actor, "set_policy", status, {"group": 7, "args": args, "result": result}, start, end)


def commit(actor, status, start, end, **value):
    return (actor, "commit", status, {"group": 7, **value}, start, end)


@pytest.mark.planted("analysis.revalidation.checkers:RuleHoldsAtCommit._witness",
                     'why.append(f"amount {state[\'amount\']} > refund_limit {state[\'refund_limit\']}")',
                     'pass')
def test_rule_witness_names_every_reason_and_every_policy_change():
    """Bug class: a witness that names the wrong reason the rule was false (or only one of several), the wrong
    policy change, or the wrong commit and tokens."""
    rows = [SETUP, commit("w1", OK, 1.0, 1.5, target_token=2),
            policy(OK, 2.0, 2.5, refunds_enabled=0, refund_limit=50),
            commit("w2", OK, 3.0, 3.5, target_token=2, policy_token=5)]
    got, ws, summary = one(RULE, rows)
    assert got is I and summary == "1 histories: 0 valid, 1 invalid, 0 unknown"
    assert ws == [((1, 2, 3), "history 7: w2 committed the refund with token v2 and policy token v5 at t=3.500000 s, "
                              "while the target already held 1 refund(s) and amount 80 > refund_limit 50 and refunds "
                              "were disabled (admin set refunds_enabled=0, refund_limit=50 at t=2.500000 s): the "
                              "declared rule was false at commit, an effect it forbids.")]


@pytest.mark.planted("analysis.revalidation.checkers:RuleHoldsAtCommit._group",
                     "({', '.join(f'{e.op.actor} {e.op.name}' for e in optional)})",
                     '({optional[0].op.actor} {optional[0].op.name})')
def test_rule_unknown_names_the_indeterminate_operations():
    """Bug class: an indeterminate operation folded into the verdict, and an unknown that does not name the
    operations it depends on."""
    rows = [SETUP, policy(INDET, 1.0, None, refunds_enabled=0), commit("w2", INDET, 3.0, None),
            commit("w3", OK, 4.0, 4.5)]
    got, ws, _ = one(RULE, rows)
    assert got is U
    assert ws == [((2, 3), "history 7: whether the rule held at every commit depends on indeterminate operations "
                           "(admin set_policy, w2 commit); if they landed: history 7: w3 committed the refund with an "
                           "unknown token at t=4.500000 s, while the target already held 1 refund(s): the declared "
                           "rule was false at commit, an effect it forbids.")]


@pytest.mark.parametrize("policy_end,commit_start,verdict", [
    pytest.param(2.0, 2.0, V, marks=pytest.mark.planted(  # touching intervals are concurrent
        "analysis.revalidation.checkers:_before", "a.end < b.start", "a.end <= b.start")),
    (2.0, 2.01, I),
    (None, 3.0, V),     # an unanswered policy change may land at any time after it started
])
def test_rule_real_time_order_at_its_edge(policy_end, commit_start, verdict):
    """Bug class: real-time order misread at its edge: an operation that ended exactly when another started is
    not before it."""
    status = OK if policy_end is not None else INDET
    rows = [SETUP, policy(status, 1.0, policy_end, refunds_enabled=0), commit("w", OK, commit_start, 4.0)]
    assert one(RULE, rows)[0] is verdict


@pytest.mark.planted("analysis.revalidation.checkers:_before",
                     'and b.start is not None and',
                     'and')
def test_rule_an_operation_without_a_start_is_ordered_after_nothing():
    """Bug class: real-time order read from a missing time (an operation with no start is concurrent with all)."""
    rows = [SETUP, policy(OK, 1.0, 2.0, refunds_enabled=0), commit("w", OK, None, 4.0)]
    assert one(RULE, rows)[0] is V


@pytest.mark.parametrize("txn,verdict", [
    (("admin", "commit_txn", OK), I),       # the transaction committed: the policy is in effect
    (("admin", "commit_txn", INDET), U),    # may or may not have committed
    pytest.param(("admin", "commit_txn", FAIL), V, marks=pytest.mark.planted(  # refused: it never took effect
        "analysis.revalidation.checkers:RuleHoldsAtCommit._effects",
        "elif op.name == COMMIT_TXN and op.actor in pending and op.status in (OK, INDETERMINATE):",
        "elif op.name == COMMIT_TXN and op.actor in pending:")),
    (("other", "commit_txn", OK), V),       # another actor's transaction
])
def test_rule_policy_inside_a_transaction_lands_at_its_own_commit_txn(txn, verdict):
    """Bug class: a policy write applied at another actor's transaction, at a refused one, or (indeterminate)
    judged as certain."""
    rows = [SETUP, policy(OK, 1.0, 1.5, result="updated", refunds_enabled=0),
            (*txn, {"group": 7}, 2.0, 2.5), commit("w", OK, 3.0, 3.5)]
    assert one(RULE, rows)[0] is verdict


@pytest.mark.planted("analysis.revalidation.checkers:RuleHoldsAtCommit.judge",
                     'if not any(op.name == COMMIT for op in ops):',
                     'if False:')
def test_rule_skips_groups_it_cannot_read():
    """Bug class: a history this checker cannot read (no refund setup, or no commit) judged anyway."""
    no_setup = [commit("w", OK, 1.0, 1.5)]
    partial = [("harness", "setup", OK, {"group": 7, "state": {"amount": 80, "refund_limit": 100}}, 0, 0.5),
               commit("w", OK, 1.0, 1.5)]
    no_state = [("harness", "setup", OK, {"group": 7}, 0, 0.5), commit("w", OK, 1.0, 1.5)]
    no_commit = [SETUP, policy(OK, 1.0, 1.5, refunds_enabled=0)]
    for rows in (no_setup, partial, no_state, no_commit):
        assert one(RULE, rows) == (V, [], "0 histories: 0 valid, 0 invalid, 0 unknown")


def sequential(n_ok: int, n_indet: int, commit_status: str = OK):
    """``n_ok`` answered policy writes and ``n_indet`` unanswered ones (each keeps refunds enabled), one after
    another, then one commit: every choice and order keeps the rule, so the verdict is valid when judged."""
    rows, t = [SETUP], 1.0
    for i in range(n_ok + n_indet):
        indet = i >= n_ok
        rows.append(policy(INDET if indet else OK, t, None if indet else t + 0.5, refunds_enabled=1))
        t += 1.0
    rows.append(commit("w", commit_status, t, None if commit_status == INDET else t + 0.5))
    return rows


@pytest.mark.parametrize("n_ok,n_indet,commit_status,verdict", [
    (MAX_EFFECTS - 1, 0, OK, V),                      # MAX_EFFECTS effects: enumerated
    pytest.param(MAX_EFFECTS, 0, OK, U, marks=pytest.mark.planted(  # one more: too many
        "analysis.revalidation.checkers:RuleHoldsAtCommit._group", "len(effects) > MAX_EFFECTS", "len(effects) > MAX_EFFECTS + 1")),
    (MAX_EFFECTS - MAX_OPTIONAL, MAX_OPTIONAL - 1, INDET, V),  # MAX_OPTIONAL indeterminate of MAX_EFFECTS: enumerated
    (0, MAX_OPTIONAL, INDET, U),                      # one indeterminate more (still MAX_EFFECTS effects): too many
])
def test_rule_enumeration_bounds(n_ok, n_indet, commit_status, verdict):
    """Bug class: an enumeration bound off by one: a history the checker can enumerate answered unknown, or one it
    cannot answered valid."""
    rows = sequential(n_ok, n_indet, commit_status)
    assert len(rows) - 1 == MAX_EFFECTS + (n_ok == MAX_EFFECTS)
    got, ws, _ = one(RULE, rows)
    assert got is verdict
    if verdict is U:
        assert ws == [((), "history 7: too many effects to enumerate.")]


# ------------------------------------------------------------------ oracle agreement: witnesses
@pytest.mark.parametrize("value,status,verdict,text", [
    ({"oracle": "KEEP", "outcome": "KEEP", "released": True}, OK, V, None),
    pytest.param({"oracle": "REPLAN", "outcome": "KEEP", "released": True, "mechanism": "ATR"}, OK, I,
                 "execution 1: step (ATR) released the effect although the oracle is REPLAN: an invalid effect (a false "
                 "allow).", marks=pytest.mark.planted("analysis.revalidation.checkers:OracleAgreement._one",
                                                      'if released and v.get("oracle") in INVALID_WHEN_RELEASED:',
                                                      "if False:")),
    ({"oracle": "BLOCK", "outcome": "KEEP", "released": False}, OK, I,
     "execution 1: step (the mechanism) decided KEEP where the declared rules imply BLOCK."),
    ({"oracle": "REFRESH", "outcome": "KEEP", "released": True, "payload_stale": True}, OK, I,
     "execution 1: step (the mechanism) released the effect with a stale payload although the oracle is REFRESH: "
     "an invalid effect."),
    ({"oracle": "REFRESH", "outcome": "KEEP", "released": False, "payload_stale": True}, OK, I,
     "execution 1: step (the mechanism) decided KEEP where the declared rules imply REFRESH."),
    ({"oracle": "KEEP", "outcome": "KEEP", "released": True}, INDET, U,
     "execution 1: the release by step died before answering; whether the effect committed is unknown"),
])
def test_oracle_agreement_witnesses(value, status, verdict, text):
    """Bug class: a witness that names the wrong reason (a false allow called a disagreement, a stale payload that
    was never released called an invalid effect) or an indeterminate release judged by the outcome it carries."""
    got, ws, _ = one(AGREE, [("step", "release", status, {"group": 1, **value})])
    assert got is verdict
    assert ws == ([] if text is None else [((0,), text)])


@pytest.mark.planted("analysis.revalidation.checkers:OracleAgreement.judge",
                     'dead = next(op for op in ops if op.indeterminate)',
                     'dead = ops[0]')
def test_oracle_agreement_names_the_step_that_died():
    """Bug class: an execution whose step died before its release skipped, or a witness naming another step."""
    rows = [("step", "validate", OK, {"group": 2}), ("planner", "plan", INDET, {"group": 2})]
    got, ws, summary = one(AGREE, rows)
    assert got is U and summary == "1 executions: 0 valid, 0 invalid, 1 unknown"
    assert ws == [((1,), "execution 2: planner's plan died (status indeterminate), so the release never ran: the "
                         "outcome is unknown, not valid")]


@pytest.mark.planted("analysis.revalidation.checkers:verdicts_by_group",
                     'gv.verdict.rank > prev.verdict.rank',
                     'gv.verdict.rank >= prev.verdict.rank')
def test_verdicts_by_group_keeps_the_first_witness_of_the_worst_verdict():
    """Bug class: a witness that names the wrong operation when two checkers find the same worst verdict (the
    later one replaces the first), and the default set of checkers not used when none is given."""
    rows = [c("a", OK, 0, 1, target_token=1), c("b", OK, 2, 3, target_token=1),
            ("step", "release", OK, {"group": 1, "oracle": "BLOCK", "outcome": "KEEP", "released": True})]
    h = history("revalidation", rows)
    first = verdicts_by_group(h, [PAIR, AGREE])[1]
    assert first.verdict is I and first.witness.explanation.startswith("pair 1:")
    assert verdicts_by_group(h, [AGREE, PAIR])[1].witness.explanation.startswith("execution 1:")
    assert verdicts_by_group(h)[1].witness.explanation.startswith("pair 1:")
    assert verdicts_by_group(h, [])[1].witness.explanation.startswith("pair 1:")


# ------------------------------------------------------------------ results and groups name what they judged
@pytest.mark.parametrize("checker,rows,groups", [
    (PAIR, [c("a", OK, 0, 1), c("b", OK, 2, 3)], [1]),
    (PAIR, [c("a", OK, 0, 1), c("b", INDET, 2, None), audit({"refunds": 2})], [1]),
    (PAIR, [c("a", FAIL, 0, 1), c("b", FAIL, 2, 3), audit({"refunds": 1})], [1]),
    (PAIR, [c("a", FAIL, 0, 1), c("b", FAIL, 2, 3)], [1]),
    (PAIR, [c("a", OK, 0, 1), c("b", FAIL, 2, 3)], [1]),
    (RULE, [SETUP, commit("w", OK, 1, 2)], [7]),
    (RULE, [SETUP, commit("w", OK, 1, 2), commit("w", OK, 3, 4)], [7]),
    (RULE, [SETUP, commit("w", INDET, 1, None), commit("w", OK, 3, 4)], [7]),
    (RULE, sequential(MAX_EFFECTS, 0), [7]),
    (AGREE, [("step", "release", OK, {"group": 1, "oracle": "KEEP", "outcome": "KEEP"})], [1]),
    (AGREE, [("step", "release", OK, {"group": 1, "oracle": "KEEP", "outcome": "BLOCK"})], [1]),
])
@pytest.mark.planted("analysis.revalidation.checkers:verdicts_by_group", "out[gv.group] = gv", "out[None] = gv")
def test_each_verdict_names_its_group_and_each_result_its_checker(checker, rows, groups):
    """Bug class: a verdict set beside the wrong execution (a group verdict that names no group, so the worst
    verdict per group is kept for the wrong one) or a result that names no checker."""
    h = history("revalidation", rows)
    assert [g.group for g in checker.judge(h)] == groups
    assert checker.check(h).checker == checker.name
    assert set(verdicts_by_group(h, [checker])) == set(groups)


@pytest.mark.planted("analysis.revalidation.checkers:RuleHoldsAtCommit.judge",
                     'continue  # not a refund history this checker can read',
                     'break')
def test_groups_a_checker_cannot_read_do_not_stop_it():
    """Bug class: a checker that stops at the first group it cannot read (no refund setup, no commit, no release)
    instead of skipping it: the groups after it are still judged."""
    rows = [c("x", OK, 0, 1, group=1), ("x", "setup", OK, {"group": 2, "state": {}}, 0, 1),
            ("h", "setup", OK, {"group": 3, "state": {"amount": 1, "refund_limit": 1, "refunds_enabled": 1}}, 0, 1),
            ("h", "setup", OK, {"group": 4, "state": {"amount": 1, "refund_limit": 1, "refunds_enabled": 1}}, 0, 1),
            c("a", OK, 1, 2, group=4), c("b", OK, 3, 4, group=4)]
    assert [(g.group, g.verdict) for g in RULE.judge(history("revalidation", rows))] == [(4, I)]
    rows = [("step", "validate", OK, {"group": 1}),
            ("step", "release", OK, {"group": 2, "oracle": "KEEP", "outcome": "BLOCK"})]
    assert [(g.group, g.verdict) for g in AGREE.judge(history("revalidation", rows))] == [(2, I)]


@pytest.mark.planted("analysis.revalidation.checkers:OneCommitPerPair._pair",
                     'key=lambda op: (op.end or 0, op.index))',
                     "key=lambda op: (op.end or float('inf'), op.index))")
def test_a_commit_that_ended_at_the_clock_origin_is_first():
    """Bug class: a witness that names the later commit first: a commit that ended at t = 0 ended before one that
    ended at t = 0.5 (a missing end is not a time)."""
    rows = [c("a", OK, 0.0, 0.5), c("b", OK, 0.0, 0.0)]
    ws = one(PAIR, rows)[1]
    assert ws[0][0] == (1, 0) and ws[0][1].startswith("pair 1: b committed with an unknown token at t=0.000000 s, "
                                                       "then a committed")


# ------------------------------------------------------------------ the search for a real-time order
@pytest.mark.planted("analysis.revalidation.checkers:RuleHoldsAtCommit._violation",
                     'continue  # something still unplaced must come first',
                     'return False')
def test_rule_search_places_effects_in_real_time_order_not_history_order():
    """Bug class: real-time order misread: effects listed out of time order in the history (a commit recorded
    before the policy change that preceded it) are still placed in time order, and an effect that must wait does
    not end the search."""
    rows = [SETUP, commit("w", OK, 3.0, 4.0), policy(OK, 1.0, 2.0, refund_limit=200)]
    assert one(RULE, rows)[0] is V
    rows = [SETUP, commit("w", OK, 3.0, 4.0), policy(OK, 1.0, 2.0, refunds_enabled=0)]
    assert one(RULE, rows)[1] == [((2, 1), "history 7: w committed the refund with an unknown token at t=4.000000 s, "
                                           "while refunds were disabled (admin set refunds_enabled=0 at "
                                           "t=2.000000 s): the declared rule was false at commit, an effect it "
                                           "forbids.")]


@pytest.mark.planted("analysis.revalidation.checkers:RuleHoldsAtCommit._violation",
                     '                    continue\n',
                     '                    return False\n')
def test_rule_search_tries_another_order_after_a_commit_that_breaks_the_rule():
    """Bug class: a checker that gives up at the first order that breaks the rule: refunds start disabled; the
    commit overlaps the policy change that enables them, so the order policy-then-commit keeps the rule."""
    disabled = ("harness", "setup", OK, {"group": 7, "state": {"amount": 80, "refund_limit": 100,
                                                                "refunds_enabled": 0}}, 0.0, 0.5)
    rows = [disabled, commit("w", OK, 1.0, 3.0), policy(OK, 2.0, 2.5, refunds_enabled=1)]
    assert one(RULE, rows)[0] is V
    rows[2] = policy(OK, 3.5, 4.0, refunds_enabled=1)
    assert one(RULE, rows)[0] is I


@pytest.mark.planted("analysis.revalidation.checkers:RuleHoldsAtCommit._witness",
                     'if state["amount"] > state["refund_limit"]:',
                     'if state["amount"] >= state["refund_limit"]:')
def test_rule_witness_lists_every_policy_change_including_a_transactions():
    """Bug class: a witness that names the wrong reason or misses a policy change: a transaction's policy write
    (landed at its commit_txn) and a direct one are both listed; an amount equal to the limit is not a reason."""
    rows = [SETUP, policy(OK, 1.0, 1.5, result="updated", refunds_enabled=0), ("admin", "commit_txn", OK,
                                                                               {"group": 7}, 2.0, 2.5),
            policy(OK, 2.6, 2.8, actor="ops", refund_limit=80), commit("w1", OK, 3.0, 3.5)]
    assert one(RULE, rows)[1] == [((2, 3, 4), (
        "history 7: w1 committed the refund with an unknown token at t=3.500000 s, while refunds were disabled "
        "(admin set refunds_enabled=0 at t=2.500000 s; ops set refund_limit=80 at t=2.800000 s): the declared rule "
        "was false at commit, an effect it forbids."))]
    equal = [SETUP, policy(OK, 0.6, 0.8, actor="ops", refund_limit=80), commit("w1", OK, 1.0, 1.5),
             commit("w2", OK, 2.0, 2.5)]
    assert one(RULE, equal)[1] == [((1, 2, 3), (
        "history 7: w2 committed the refund with an unknown token at t=2.500000 s, while the target already held 1 "
        "refund(s) (ops set refund_limit=80 at t=0.800000 s): the declared rule was false at commit, an effect it "
        "forbids."))]
