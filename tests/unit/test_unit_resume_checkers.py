"""Resume checkers on hand-written histories: calls, checkpoints, ledger rows, one per line.

Bug classes (issue 16 §7): a consume-once checker that accepts a second, different value; a liveness checker
that credits a resume of another run; unknown folded into valid (a history with nothing to judge by).
"""
from __future__ import annotations

import pytest
from histories import history

from analysis.resume.checkers import CHECKERS, check_all
from vocabulary import Verdict
from vocabulary.resume import CO, DEFAULT_GRAPH, EO, LIVENESS, PC, STORES_READ

OK, INDET = "ok", "indeterminate"
META = {"graph": DEFAULT_GRAPH.to_dict()}
PARKED_STATE = {"input": "i", "approval": None, "steps": 1, "log": ["prepare:None"]}


def call(name, run, op, state, resume=None, status=OK, start=None, end=None):
    return ("harness", name, status, {"run": run, "op": op, "state": state, "resume": resume}, start, end)


def parked(run, t=1.0, op="s"):
    return [call("start", run, op, "parked", start=t - 0.5, end=t),
            ("store", "checkpoint", OK, {"run": run, "step": 1, "values": PARKED_STATE, "created": t, "parked": True},
             t, t)]


def consume(run, op, value, at):
    return ("ledger", "trace", OK, {"run": run, "step": 1, "node": "approve", "kind": "consume", "resume": value,
                                    "op": op, "at": at}, at, at)


def gated(run, op, at):
    return ("ledger", "effect", OK, {"run": run, "task": "2:act", "effect": "charge", "op": op, "at": at}, at, at)


CK = "analysis.resume.checkers:"  # where the planted variants go (tests/planting.py)


def verdict(name, rows, meta=META) -> Verdict:
    return CHECKERS[name].check(history("resume", rows, meta)).verdict


# ------------------------------------------------------------------ consume once
def test_one_consumption_and_a_refused_second_resume_hold():
    rows = parked("r1") + [call("resume", "r1", "a", "done", "yes", start=2, end=3), consume("r1", "a", "yes", 2.5),
                           gated("r1", "a", 2.6), call("resume", "r1", "b", "refused", "no", start=4, end=5)]
    assert verdict(CO, rows) is Verdict.VALID


@pytest.mark.parametrize("second", ["no", pytest.param("yes", marks=pytest.mark.planted(
    "analysis.resume.checkers:ConsumeOnce.judge", "if len(rows) > 1:",
    "if len({r.value.get('resume') for r in rows}) > 1:"))])
def test_a_second_consumption_is_invalid_whatever_its_value(second):
    """Bug class: a consume-once checker that accepts a second, different value (or the same value twice): two
    consumptions of one interrupt are a violation."""
    rows = parked("r1") + [call("resume", "r1", "a", "done", "yes", start=2, end=3), consume("r1", "a", "yes", 2.5),
                           call("resume", "r1", "b", "done", second, start=4, end=5), consume("r1", "b", second, 4.5)]
    res = CHECKERS[CO].check(history("resume", rows, META))
    assert res.verdict is Verdict.INVALID and "consumed 2 resume values" in res.witnesses[0].explanation


@pytest.mark.planted('analysis.resume.checkers:ConsumeOnce.judge',
                     'if earlier and call.value.get("state") not in (REFUSED, FAILED) and self.refusal_required:',
                     'if False:')
def test_a_second_value_silently_accepted_is_invalid():
    """Bug class: a consume-once checker that accepts a second, different value: the second resume consumed
    nothing but was answered 'done' instead of refused."""
    rows = parked("r1") + [call("resume", "r1", "a", "done", "yes", start=2, end=3), consume("r1", "a", "yes", 2.5),
                           call("resume", "r1", "b", "done", "no", start=4, end=5)]
    res = CHECKERS[CO].check(history("resume", rows, META))
    assert res.verdict is Verdict.INVALID and "instead of being refused" in res.witnesses[0].explanation


@pytest.mark.planted('analysis.resume.checkers:ConsumeOnce.judge',
                     'if fired:',
                     'if False:')
def test_a_second_resume_that_fires_the_gated_effect_is_invalid():
    """Bug class: a consume-once checker blind to a resume that consumed nothing yet fired the gated effect."""
    rows = parked("r1") + [call("resume", "r1", "a", "done", "yes", start=2, end=3), consume("r1", "a", "yes", 2.5),
                           gated("r1", "a", 2.6), call("resume", "r1", "b", "refused", "no", start=4, end=5),
                           gated("r1", "b", 4.5)]
    assert verdict(CO, rows) is Verdict.INVALID


@pytest.mark.planted('analysis.resume.checkers:ConsumeOnce.judge',
                     'earlier = [t for t in consumes.get(run, [])',
                     'earlier = [t for rs in consumes.values() for t in rs')
def test_consumptions_of_two_runs_are_two_interrupts():
    """Bug class: consumptions counted over the whole history instead of per run (one each is correct), and a
    consumption of another run taken as the earlier consumer of this one."""
    rows = parked("r1") + parked("r2") + parked("r3") + [
        call("resume", "r1", "a", "done", "yes", start=2, end=3), consume("r1", "a", "yes", 2.5),
        call("resume", "r2", "b", "done", "no", start=4, end=5), consume("r2", "b", "no", 4.5),
        call("resume", "r3", "c", "parked", "x", start=6, end=7)]  # r3's interrupt never consumed: nothing to refuse
    assert verdict(CO, rows) is Verdict.VALID


@pytest.mark.planted('analysis.resume.checkers:ConsumeOnce.judge',
                     'if call.name != RESUME or call.indeterminate:',
                     'if call.name != RESUME:')
def test_a_killed_second_resume_is_not_judged_as_answered():
    """Bug class: an indeterminate resume (its process killed, no answer) judged as a completed one that was
    'answered' instead of refused."""
    rows = parked("r1") + [call("resume", "r1", "a", "done", "yes", start=2, end=3), consume("r1", "a", "yes", 2.5),
                           call("resume", "r1", "b", None, "no", status=INDET, start=4, end=None)]
    assert verdict(CO, rows) is Verdict.VALID


# ------------------------------------------------------------------ liveness
@pytest.mark.planted("analysis.resume.checkers:Liveness.judge",
                     'consumed = any(t.value.get("kind") == CONSUME and t.value.get("run") == run for t in v.traces)',
                     'consumed = any(t.value.get("kind") == CONSUME for t in v.traces)')
def test_liveness_is_per_run():
    """Bug class: a liveness checker that credits a resume of another run: r1's only resume was refused while
    r2's was served; r1 is still not live."""
    rows = parked("r1") + parked("r2") + [
        call("resume", "r1", "a", "refused", "yes", start=2, end=3),
        call("resume", "r2", "b", "done", "yes", start=4, end=5), consume("r2", "b", "yes", 4.5)]
    res = CHECKERS[LIVENESS].check(history("resume", rows, META))
    assert res.verdict is Verdict.INVALID and "run r1" in res.witnesses[0].explanation
    assert "2 parked runs resumed" in res.summary


@pytest.mark.planted("analysis.resume.checkers:Liveness.judge",
                     'if not consumed and all(c.value.get("state") == REFUSED for c in resumes):',
                     'if any(c.value.get("state") == REFUSED for c in resumes):')
def test_liveness_holds_when_one_resume_of_the_run_was_served():
    """Bug class: liveness demanding that every resume be served (refusing the second is the gate's job)."""
    rows = parked("r1") + [call("resume", "r1", "a", "done", "yes", start=2, end=3), consume("r1", "a", "yes", 2.5),
                           call("resume", "r1", "b", "refused", "no", start=4, end=5)]
    assert verdict(LIVENESS, rows) is Verdict.VALID
    killed = parked("r1") + [call("resume", "r1", "a", None, "yes", status=INDET, start=2)]
    assert CHECKERS[LIVENESS].check(history("resume", killed, META)).summary.startswith("0 parked runs")


def _killed_resume(run, recoveries, done_at=None, parked_at=1.0):
    """r parked at ``parked_at``, its resume killed at 2, then recoveries (state, start) in order."""
    rows = parked(run, t=parked_at) + [call("resume", run, "k", None, "yes", status=INDET, start=2)]
    for i, (state, start) in enumerate(recoveries):
        rows.append(call("recover", run, f"r{i}", state, status=OK if state in ("parked", "done") else "fail",
                         start=start, end=start + 0.5))
    if done_at is not None:
        done = {"input": "i", "approval": "yes", "steps": 4, "log": []}
        rows.append(("store", "checkpoint", OK, {"run": run, "step": 4, "values": done, "created": done_at,
                                                 "parked": False}, done_at, done_at))
    return rows


@pytest.mark.parametrize("recoveries,done_at,parked_at,expected", [
    pytest.param([("failed", 3)], None, 1.0, Verdict.INVALID, marks=pytest.mark.planted(  # stuck for good
        f"{CK}Liveness.judge", 'if all(c.status == "fail" for c in after):', "if False:")),
    ([("refused", 3), ("failed", 4)], None, 1.0, Verdict.INVALID),  # every recovery, not only the first
    pytest.param([("failed", 3), ("parked", 4)], None, 1.0, Verdict.VALID, marks=pytest.mark.planted(  # continued
        f"{CK}Liveness.judge", 'if all(c.status == "fail" for c in after):', 'if any(c.status == "fail" for c in after):')),
    ([("failed", 3)], 5.0, 1.0, Verdict.VALID),  # finished in the end (another call continued it)
    pytest.param([("failed", 3)], None, 3.5, Verdict.VALID, marks=pytest.mark.planted(  # nothing durable yet
        f"{CK}Liveness.judge", '(c.value.get("created") or 0) < (recoveries[0].start or 0)', "True")),
    ([], None, 1.0, Verdict.VALID),  # no recovery made: nothing to judge
], ids=["one-failed", "all-failed", "second-served", "done-later", "not-durable-yet", "no-recovery"])
def test_liveness_after_a_crash_needs_one_recovery_that_continues(recoveries, done_at, parked_at, expected):
    """Bug classes: a killed run that every recovery fails to restore (pydantic-graph's GraphRuntimeError, REMIT's
    claim held by the dead process) read as live because no resume was refused; and the reverse: a run credited
    as stuck although a later recovery served it, although it finished, or although nothing of it was durable
    when it was recovered (checkpoints written afterwards by another call do not count)."""
    rows = _killed_resume("r1", recoveries, done_at, parked_at)
    res = CHECKERS[LIVENESS].check(history("resume", rows, META))
    assert res.verdict is expected, res
    if expected is Verdict.INVALID:
        assert "run r1 was killed" in res.witnesses[0].explanation


@pytest.mark.planted("analysis.resume.checkers:Liveness.judge",
                     'after = [c for c in calls if kills and c.index > kills[-1] and not c.indeterminate]',
                     'after = [c for c in calls if kills and not c.indeterminate]')
def test_liveness_after_a_crash_names_the_kill_and_the_failed_calls_and_counts_runs():
    """Bug classes: a recovery witness naming the wrong operations or reason; the summary miscounting the crashed
    runs it judged; a recovery made before the kill, or a resume that continued the run after a failed recovery,
    ignored (the first credits a stuck run, the second blames a run that was continued)."""
    def failed(run, op, start, reason=None):
        value = {"run": run, "op": op, "state": "failed", **({"reason": reason} if reason else {})}
        return ("harness", "recover", "fail", value, start, start + 0.5)

    rows = _killed_resume("r1", []) + [failed("r1", "r0", 3, "GraphRuntimeError: Unable to restore snapshot")]
    res = CHECKERS[LIVENESS].check(history("resume", rows, META))
    assert res.verdict is Verdict.INVALID and res.witnesses[0].steps == (2, 3)
    assert res.witnesses[0].explanation == (
        "run r1 was killed (#2) short of its last node with checkpoints in its store, and every one of the 1 calls "
        "after the kill failed (first: GraphRuntimeError: Unable to restore snapshot): a run that cannot be "
        "continued after a crash is not conformance.")
    assert res.summary == "0 parked runs resumed, 1 crashed runs recovered; 1 violation(s)"
    no_reason = _killed_resume("r1", []) + [failed("r1", "r0", 3)]
    explanation = CHECKERS[LIVENESS].check(history("resume", no_reason, META)).witnesses[0].explanation
    assert "(first: no reason given)" in explanation
    two = rows + _killed_resume("r2", [], parked_at=1.2) + [failed("r2", "r0", 3.2)]
    assert CHECKERS[LIVENESS].check(history("resume", two, META)).summary.startswith(
        "0 parked runs resumed, 2 crashed runs recovered")
    served_before = parked("r1") + [call("recover", "r1", "e", "parked", start=1.5, end=1.6),
                                    call("resume", "r1", "k", None, "yes", status=INDET, start=2),
                                    failed("r1", "r0", 3)]
    assert CHECKERS[LIVENESS].check(history("resume", served_before, META)).verdict is Verdict.INVALID
    resumed_after = rows + [call("resume", "r1", "z", "parked", "yes", start=4, end=5)]
    assert CHECKERS[LIVENESS].check(history("resume", resumed_after, META)).verdict is Verdict.VALID


# ------------------------------------------------------------------ nothing to judge by
@pytest.mark.planted("analysis.resume.checkers:_missing",
                     'if need_stores and not v.has_stores:',
                     'if False:')
def test_no_graph_or_no_stores_is_unknown_never_valid():
    """Bug class: unknown folded into valid: without the graph, or without any ledger or checkpoint entry, every
    property is unknown."""
    rows = parked("r1") + [call("resume", "r1", "a", "done", "yes", start=2, end=3)]
    assert {r.verdict for r in check_all(history("resume", rows, {})).values()} == {Verdict.UNKNOWN}
    calls_only = [r for r in rows if r[1] != "checkpoint"]
    assert {r.verdict for r in check_all(history("resume", calls_only, META)).values()} == {Verdict.UNKNOWN}
    for flag in (False, "true", 1):  # only the harness's exact word counts
        flagged = history("resume", calls_only, {**META, STORES_READ: flag})
        assert {r.verdict for r in check_all(flagged).values()} == {Verdict.UNKNOWN}


@pytest.mark.planted("analysis.resume.checkers:View.has_stores",
                     'or self.stores_read',
                     'or False')
def test_stores_read_and_empty_is_judged_not_unknown():
    """Bug class: a run killed before anything of it was durable (no checkpoint, effect or trace) judged unknown
    although the harness read the stores (meta stores_read: true), hiding every other cell's verdict in the fold;
    and the reverse: the flag must not make a killed call's missing effects pass where the stores do hold them."""
    killed = [call("start", "r1", "a", None, None, status=INDET, start=0),
              call("recover", "r1", "b", "refused", None, start=1, end=2)]
    results = check_all(history("resume", killed, {**META, STORES_READ: True}))
    assert {r.verdict for r in results.values()} == {Verdict.VALID}
    twice = parked("r1") + [call("resume", "r1", "a", "done", "yes", start=2, end=3), consume("r1", "a", "yes", 2.5),
                            call("resume", "r1", "b", "done", "no", start=4, end=5), consume("r1", "b", "no", 4.5)]
    assert verdict(CO, twice) is Verdict.INVALID
    assert check_all(history("resume", twice, {**META, STORES_READ: True}))[CO].verdict is Verdict.INVALID


# ------------------------------------------------------------------ effects and prefix
@pytest.mark.planted('analysis.resume.checkers:EffectExactlyOnce.judge',
                     'if len(rows) > 1:',
                     "if len({r.value.get('effect') for r in rows}) > 1:")
def test_effect_fired_twice_or_missing_from_a_done_run():
    """Bug class: EO counting distinct keys (a second firing passes) or never checking a done run's missing effect."""
    done = {"input": "i", "approval": "yes", "steps": 4, "log": []}
    base = parked("r1") + [("store", "checkpoint", OK, {"run": "r1", "step": 4, "values": done, "created": 3.0,
                                                        "parked": False}, 3, 3)]
    fired = [("ledger", "effect", OK, {"run": "r1", "task": t, "effect": k, "op": "s", "at": 1.0}, 1, 1)
             for t, k in DEFAULT_GRAPH.effect_keys()]
    assert verdict(EO, base + fired) is Verdict.VALID
    assert verdict(EO, base + fired + fired[1:2]) is Verdict.INVALID
    assert verdict(EO, base + fired[:-1]) is Verdict.INVALID


@pytest.mark.planted("analysis.resume.checkers:PrefixConsistency.judge",
                     'row.value.get("step", 0) < f',
                     'row.value.get("step", 0) <= f')
def test_prefix_consistency_flags_a_node_run_below_the_frontier():
    """Bug class: PC comparing with the wrong frontier (a re-run of a node the run had already checkpointed
    passes) or flagging the first node after the frontier."""
    rows = parked("r1") + [call("resume", "r1", "a", "done", "yes", start=2, end=3),
                           ("ledger", "trace", OK, {"run": "r1", "step": 0, "node": "prepare", "kind": "node",
                                                    "op": "a", "at": 2.1}, 2.1, 2.1)]
    assert verdict(PC, rows) is Verdict.INVALID
    rows[-1] = ("ledger", "trace", OK, {"run": "r1", "step": 1, "node": "approve", "kind": "node", "op": "a",
                                        "at": 2.1}, 2.1, 2.1)
    assert verdict(PC, rows) is Verdict.VALID
