"""Resume checkers, second table: FD, CV, RD, the witnesses of PC, EO, CO and liveness, frontiers at their edge
(``analysis.resume.checkers``).

Bug classes (issue 16 §7): a witness that names the wrong operation (another call's ledger rows, another run's
checkpoint); a frontier read at the wrong time (a checkpoint written as the call began counted as before it); a
fork judged against the wrong checkpoint or resume value; recoveries compared across different frontiers (or not
compared within one); a consume-once checker that credits a consumption of another step or one after the call; a
rate over the wrong population in a summary; unknown folded into valid.
"""
from __future__ import annotations

import pytest
from histories import history

from analysis.resume.checkers import CHECKERS, CO_INERT, View, check_all, verdicts
from vocabulary import Verdict
from vocabulary.resume import CO, CV, DEFAULT_GRAPH, EO, FD, LIVENESS, PC, RD, GraphSpec, NodeSpec

OK, FAIL, INDET = "ok", "fail", "indeterminate"
V, U, I = Verdict.VALID, Verdict.UNKNOWN, Verdict.INVALID
META = {"graph": DEFAULT_GRAPH.to_dict()}
PARKED = {"input": "i", "approval": None, "steps": 1, "log": ["prepare:None"]}
DONE = DEFAULT_GRAPH.expected(PARKED, 1, "yes")


def call(name, run, op, state, resume=None, status=OK, start=None, end=None, **extra):
    return ("harness", name, status, {"run": run, "op": op, "state": state, "resume": resume, **extra}, start, end)


def cp(run, step, values, created, parked=False, checkpoint=None):
    return ("store", "checkpoint", OK, {"run": run, "step": step, "values": values, "created": created,
                                        "parked": parked, "checkpoint": checkpoint}, created, created)


def eff(run, task, key, op, at):
    return ("ledger", "effect", OK, {"run": run, "task": task, "effect": key, "op": op, "at": at}, at, at)


def tr(run, step, node, kind, op, at, resume=None):
    return ("ledger", "trace", OK, {"run": run, "step": step, "node": node, "kind": kind, "op": op, "at": at,
                                    "resume": resume}, at, at)


def parked(run="r1", t=1.0):
    return [call("start", run, "s", "parked", start=t - 0.5, end=t), cp(run, 1, PARKED, t, True)]


def judge(name, rows, meta=META):
    r = (CO_INERT if name == "inert" else CHECKERS[name]).check(history("resume", rows, meta))
    return r.verdict, [(w.steps, w.explanation) for w in r.witnesses], r.summary


# ------------------------------------------------------------------ FD
FORK = [call("fork", "f1", "fk", "parked", start=0.5, end=1, from_run="r1", from_checkpoint="c1"),
        cp("f1", 1, PARKED, 1.0, True), call("resume", "f1", "a", "done", "yes", start=2, end=3)]


@pytest.mark.planted("analysis.resume.checkers:ForkDeterminism.judge",
                     'if got != want:',
                     'if False:')
def test_fork_determinism_compares_with_the_graph_from_the_forked_checkpoint():
    """Bug class: a fork judged against the wrong checkpoint or resume value (or not judged): a fork that ended
    where the graph says holds; one that ended with another approval is named with both states."""
    assert judge(FD, FORK + [cp("f1", 4, DONE, 3.0)]) == (V, [], "1 forks resumed to the end")
    assert judge(FD, FORK + [cp("f1", 4, {**DONE, "approval": "no"}, 3.0)]) == (I, [((0, 2, 3), (
        "run f1 was forked from checkpoint c1 of run r1 and resumed with 'yes', but ended with approval 'no' and log "
        "['prepare:None', 'approve:yes', 'act:yes', 'notify:yes']; the graph gives approval 'yes' and log "
        "['prepare:None', 'approve:yes', 'act:yes', 'notify:yes']."))], "1 forks resumed to the end; 1 violation(s)")


def planted_fd(old, new):
    return pytest.mark.planted("analysis.resume.checkers:ForkDeterminism.judge", old, new)


@pytest.mark.parametrize("rows", [
    pytest.param(FORK, marks=planted_fd("or not v.done(run):", ":")),                      # not done
    FORK[:2] + [cp("f1", 4, {**DONE, "approval": "no"}, 3.0)],                    # never resumed
    pytest.param([FORK[0], call("resume", "f1", "a", "refused", "yes", start=2, end=3),
                  cp("f1", 4, {**DONE, "approval": "no"}, 3)],
                 marks=planted_fd('and c.value.get("state") != REFUSED]', "]")),        # refused
    FORK[:2] + [call("resume", "f1", "a", None, "yes", status=INDET, start=2), cp("f1", 4, {**DONE, "approval": "no"}, 3)],
    pytest.param([call("fork", "f1", "fk", None, status=INDET, start=0.5), *FORK[1:],
                  cp("f1", 4, {**DONE, "approval": "no"}, 3)],
                 marks=planted_fd('c.name == FORK and c.status == "ok"]', "c.name == FORK]")),  # a killed fork
    [FORK[0], call("resume", "f1", "a", "done", "yes", start=2, end=3)],          # no checkpoint at all for the fork
    [*FORK, cp("f2", 4, {**DONE, "approval": "no"}, 3.0)],                        # another run is done
])
def test_fork_determinism_judges_only_forks_resumed_to_the_end(rows):
    """Bug class: a fork judged on a refused, killed or missing resume (or one not done, or a killed fork), which
    is vacuous, not a violation."""
    assert judge(FD, rows + [eff("x", "0:prepare", "reserve", "s", 0.1)]) == (
        V, [], "0 forks resumed to the end (vacuous)")


@pytest.mark.planted("analysis.resume.checkers:ForkDeterminism.judge",
                     'first, value = cps[0].value, resumes[0].value.get("resume")',
                     'first, value = cps[0].value, resumes[-1].value.get("resume")')
def test_fork_determinism_uses_the_first_resume_and_the_first_checkpoint():
    """Bug class: a fork judged with a later resume's value or from its head instead of the forked checkpoint."""
    rows = FORK + [call("resume", "f1", "b", "done", "no", start=4, end=5), cp("f1", 4, DONE, 3.0)]
    assert judge(FD, rows)[0] is V
    late_first = [FORK[0], cp("f1", 4, DONE, 3.0), cp("f1", 1, PARKED, 1.0, True), FORK[2]]  # created order, not rows
    assert judge(FD, late_first)[0] is V


# ------------------------------------------------------------------ CV
@pytest.mark.planted("analysis.resume.checkers:CheckpointValidity.judge",
                     'f"was persisted with a schema-invalid state: {\'; \'.join(problems)}.")))',
                     'f"was persisted with a schema-invalid state: {problems[0]}.")))')
def test_checkpoint_validity_names_each_invalid_checkpoint():
    """Bug class: a witness that names the wrong checkpoint, or a schema problem hidden by another."""
    rows = [cp("r1", 1, {**PARKED, "steps": "x"}, 1.0, True, "c9"), cp("r1", 2, {"input": "i"}, 2.0, False, "c10"),
            cp("r1", 3, PARKED, 3.0, False, "c11")]
    assert judge(CV, rows) == (I, [
        ((0,), "checkpoint c9 of run r1 (step 1) was persisted with a schema-invalid state: steps='x' is a str, "
               "not int."),
        ((1,), "checkpoint c10 of run r1 (step 2) was persisted with a schema-invalid state: missing field "
               "'approval'; missing field 'steps'; missing field 'log'.")], "3 checkpoints; 2 violation(s)")
    assert judge(CV, rows[2:]) == (V, [], "1 checkpoints")
    assert judge(CV, [cp("r1", 1, None, 1.0)])[0] is I  # a checkpoint with no values at all


@pytest.mark.planted("analysis.resume.checkers:_result",
                     'summary + (f"; {len(witnesses)} violation(s)" if witnesses else "")',
                     'summary + (f"; {len(witnesses[:5])} violation(s)" if witnesses else "")')
def test_at_most_five_witnesses_but_every_violation_counted():
    """Bug class: a rate over the wrong population: the summary counts every violation, the witnesses are the
    first five."""
    rows = [cp(f"r{i}", 1, {"input": "i"}, float(i), checkpoint=f"c{i}") for i in range(7)]
    verdict, ws, summary = judge(CV, rows)
    assert verdict is I and len(ws) == 5 and summary == "7 checkpoints; 7 violation(s)"
    assert [s for s, _ in ws] == [(0,), (1,), (2,), (3,), (4,)]


# ------------------------------------------------------------------ PC
@pytest.mark.planted("analysis.resume.checkers:PrefixConsistency.judge",
                     'if row.value.get("kind") in (NODE_RUN, MEMO) and',
                     'if row.value.get("kind") == NODE_RUN and')
def test_prefix_consistency_witness_for_a_memo_replay_below_the_frontier():
    """Bug class: a witness that names the wrong operation (another call's trace), and a memo replay below the
    frontier passed."""
    rows = parked() + [call("resume", "r1", "a", "done", "yes", start=2, end=3),
                       tr("r1", 0, "prepare", "memo", "a", 2.1)]
    assert judge(PC, rows) == (I, [((2, 3), (
        "resume a of run r1 began when the run's durable frontier was step 1, then replayed node prepare at step 0, "
        "at or before that frontier."))], "1 resume/recover calls; 1 violation(s)")


@pytest.mark.planted("analysis.resume.checkers:PrefixConsistency.judge",
                     'break',
                     'return _result(self.name, out, f"{judged} resume/recover calls")')
def test_prefix_consistency_judges_every_call_and_one_witness_each():
    """Bug class: PC that stops at the first violating call (or reports one call's rows twice), reads the ledger
    rows of another call, or counts the start call as a resume."""
    rows = parked() + [call("resume", "r1", "a", "done", "yes", start=2, end=3),
                       tr("r1", 0, "prepare", "node", "a", 2.1), tr("r1", 0, "prepare", "node", "a", 2.2),
                       call("recover", "r1", "b", "done", start=4, end=5), tr("r1", 0, "prepare", "node", "b", 4.1),
                       tr("r1", 0, "prepare", "consume", "b", 4.2), tr("r1", 0, "prepare", "node", "s", 4.3)]
    verdict, ws, summary = judge(PC, rows)
    assert verdict is I and summary == "2 resume/recover calls; 2 violation(s)"
    assert [s for s, _ in ws] == [(2, 3), (5, 6)]
    assert ws[0][1].startswith("resume a of run r1") and ws[1][1].startswith("recover b of run r1")
    assert "then ran node prepare at step 0" in ws[1][1]


@pytest.mark.planted("analysis.resume.checkers:View.frontier",
                     '(c.value.get("created") or 0) < t]',
                     '(c.value.get("created") or 0) <= t]')
def test_the_frontier_counts_only_checkpoints_created_before_the_call():
    """Bug class: a frontier read at the wrong time: a checkpoint created exactly as the call began (or after) is
    not part of the frontier the call began from."""
    rows = parked() + [cp("r1", 3, DONE, 2.0), call("resume", "r1", "a", "done", "yes", start=2, end=3),
                       tr("r1", 2, "act", "node", "a", 2.5)]
    assert judge(PC, rows)[0] is V
    rows[2] = cp("r1", 3, DONE, 1.9)
    assert judge(PC, rows)[0] is I
    v = View.of(history("resume", rows, META))
    assert v.frontier("r1", None) == 3 and v.frontier("r1", 1.0) == -1 and v.frontier("r9", None) == -1


# ------------------------------------------------------------------ EO
@pytest.mark.planted("analysis.resume.checkers:EffectExactlyOnce.judge",
                     'if int(task.split(":")[0]) >= first and',
                     'if')
def test_effect_exactly_once_witnesses():
    """Bug class: a witness that names the wrong operation (calls listed twice or unsorted), or a done run's
    effects required from before the checkpoint it began from (a fork of step 1 never ran step 0)."""
    rows = [cp("r1", 1, PARKED, 1.0, True), cp("r1", 4, DONE, 3.0)] + [
        eff("r1", "2:act", "charge", o, 1.0) for o in ("b", "a", "b")]
    assert judge(EO, rows) == (I, [
        ((2, 3, 4), "effect charge of task 2:act in run r1 fired 3 times (during a, b); exactly-once allows one."),
        ((1,), "run r1 is done but effect email of task 3:notify never fired.")], "3 firings over 1 runs; 2 violation(s)")
    ok = [cp("r1", 1, PARKED, 1.0, True), cp("r1", 4, DONE, 3.0), eff("r1", "2:act", "charge", "a", 2),
          eff("r1", "3:notify", "email", "a", 2)]
    assert judge(EO, ok) == (V, [], "2 firings over 1 runs")
    two_runs = ok + [eff("r2", "2:act", "charge", "b", 2)]  # one firing each in two runs
    assert judge(EO, two_runs)[0] is V
    at_step_2 = [cp("r1", 2, PARKED, 1.0), cp("r1", 4, DONE, 3.0), eff("r1", "3:notify", "email", "a", 2)]
    assert judge(EO, at_step_2)[1] == [((1,), "run r1 is done but effect charge of task 2:act never fired.")]


# ------------------------------------------------------------------ CO
@pytest.mark.planted("analysis.resume.checkers:ConsumeOnce.judge",
                     'out.append(Witness((call.index, *(e.index for e in fired)), (',
                     'out.append(Witness((call.index,), (')
def test_consume_once_witnesses_name_both_consumptions_and_the_gated_effect():
    """Bug class: a witness that names the wrong operation: both consumptions with their values; the resume that
    consumed nothing and still fired the gated effect, with that effect."""
    rows = parked() + [call("resume", "r1", "a", "done", "yes", start=2, end=3),
                       tr("r1", 1, "approve", "consume", "a", 2.5, "yes"),
                       call("resume", "r1", "b", "done", "no", start=4, end=5),
                       tr("r1", 1, "approve", "consume", "b", 4.5, "no"),
                       call("resume", "r1", "c", "done", "no", start=6, end=7), eff("r1", "2:act", "charge", "c", 6.5),
                       eff("r1", "3:notify", "email", "c", 6.6)]
    assert judge(CO, rows) == (I, [
        ((3, 5), "the interrupt of run r1 consumed 2 resume values ('yes', 'no'); consume-once allows one."),
        ((6, 7), "resume c of run r1 with 'no' consumed nothing, yet fired the interrupt's gated effect charge again.")],
        "2 consumptions over 1 runs; 2 violation(s)")


@pytest.mark.planted("analysis.resume.checkers:ConsumeOnce.judge",
                     'and self.refusal_required:',
                     ':')
def test_consume_once_silently_accepted_witness_and_the_inert_reading():
    """Bug class: a consume-once checker that accepts a second value; the inert reading (REMIT's) accepts it, the
    lab's refuses it; the witness names the consumer and the resume answered."""
    rows = parked() + [call("resume", "r1", "a", "done", "yes", start=2, end=3),
                       tr("r1", 1, "approve", "consume", "a", 2.5, "yes"),
                       call("resume", "r1", "b", "done", "no", start=4, end=5)]
    assert judge(CO, rows) == (I, [((3, 4), (
        "the interrupt of run r1 was consumed by a (value 'yes'); resume b with 'no' was then answered 'done' "
        "instead of being refused: its value was silently accepted and never consulted."))],
        "1 consumptions over 1 runs; 1 violation(s)")
    assert judge("inert", rows) == (V, [], "1 consumptions over 1 runs")
    fired = rows + [eff("r1", "2:act", "charge", "b", 4.5)]
    assert judge("inert", fired)[0] is I  # the inert reading still forbids the gated effect


@pytest.mark.parametrize("state,verdict", [("refused", V), pytest.param("failed", V, marks=pytest.mark.planted(
    "analysis.resume.checkers:ConsumeOnce.judge", "not in (REFUSED, FAILED)", "not in (REFUSED,)")),
    ("done", I), ("parked", I)])
def test_consume_once_second_resume_answers(state, verdict):
    """Bug class: a checker that reads a loud answer as silent acceptance (a second resume that failed with the
    framework's error, e.g. pydantic-graph's file lock, reached its caller as an error), or that lets an answer
    which reports success (done, parked) pass for a refusal."""
    rows = parked() + [call("resume", "r1", "a", "done", "yes", start=2, end=3),
                       tr("r1", 1, "approve", "consume", "a", 2.5, "yes"),
                       call("resume", "r1", "b", state, "no", status="fail" if state == "failed" else OK,
                            start=4, end=5)]
    assert judge(CO, rows)[0] is verdict


@pytest.mark.parametrize("consume_at,step,verdict", [
    (5.0, 1, I),     # consumed at the very end of b's call: before b was answered
    pytest.param(5.5, 1, V, marks=pytest.mark.planted(  # consumed only after b was answered: not refusable for it
        "analysis.resume.checkers:ConsumeOnce.judge", '(call.end is None or (t.value.get("at") or 0) <= call.end)',
        "True")),
    pytest.param(2.5, 2, V, marks=pytest.mark.planted(  # a consume row of another step is not the interrupt's
        "analysis.resume.checkers:ConsumeOnce.judge", 'and t.value.get("step") == gate:', ":")),
])
def test_consume_once_earlier_consumption_edges(consume_at, step, verdict):
    """Bug class: a consume-once checker that credits a consumption of another step, or one after the call was
    answered, as the earlier consumer."""
    rows = parked() + [call("resume", "r1", "b", "done", "no", start=4, end=5),
                       call("resume", "r1", "a", "done", "yes", start=2, end=6),
                       tr("r1", step, "approve", "consume", "a", consume_at, "yes")]
    assert judge(CO, rows)[0] is verdict


@pytest.mark.planted("analysis.resume.checkers:ConsumeOnce.judge",
                     'fired = [e for e in v.own(v.effects, call) if e.value.get("task") == gated_task]',
                     'fired = list(v.own(v.effects, call))')
def test_consume_once_on_a_graph_without_a_gated_effect():
    """Bug class: a gated effect assumed where the graph has none (no effect-bearing node after the interrupt)."""
    graph = GraphSpec("g", (NodeSpec("prepare", ("reserve",)), NodeSpec("approve", (), interrupt=True),
                            NodeSpec("end")))
    rows = parked() + [call("resume", "r1", "a", "done", "yes", start=2, end=3),
                       tr("r1", 1, "approve", "consume", "a", 2.5, "yes"),
                       call("resume", "r1", "b", "refused", "no", start=4, end=5),
                       eff("r1", "0:prepare", "reserve", "b", 4.5)]
    assert judge(CO, rows, {"graph": graph.to_dict()})[0] is V


# ------------------------------------------------------------------ RD
def rd_rows(second_fires: bool, **second):
    kw = {"group": "g", **second}
    rows = [cp("r1", 1, PARKED, 1.0, True), cp("r2", 1, PARKED, 1.0, True),
            call("recover", "r1", "x", "done", start=2, end=3, group="g"), eff("r1", "2:act", "charge", "x", 2.5),
            tr("r1", 2, "act", "node", "x", 2.4),
            call("recover", "r2", "y", "done", start=2, end=3, **kw)]
    if second_fires:
        rows += [eff("r2", "2:act", "charge", "y", 2.5), tr("r2", 2, "act", "node", "y", 2.4)]
    return rows


@pytest.mark.planted("analysis.resume.checkers:RecoveryDeterminism.judge",
                     'if len(sigs) > 1:',
                     'if False:')
def test_recovery_determinism_compares_recoveries_from_one_frontier():
    """Bug class: recoveries from one frontier that end differently passed; a witness that names the wrong
    recoveries or counts another call's rows."""
    assert judge(RD, rd_rows(False)) == (I, [((2, 5), (
        "recoveries x (run r1) and y (run r2) both began at frontier step 1 with the same state, but one fired 1 "
        "effects and ran 1 trace rows, the other 0 and 0: recovery is not deterministic."))],
        "1 recovery pairs compared; 1 violation(s)")
    assert judge(RD, rd_rows(True)) == (V, [], "1 recovery pairs compared")


@pytest.mark.planted("analysis.resume.checkers:RecoveryDeterminism.judge",
                     'classes[(call.value.get("group"), call.value.get("ordinal", 0), f, state, json.dumps(fired),',
                     'classes[(None, 0, f, state, json.dumps(fired),')
@pytest.mark.parametrize("second", [{"group": "h"}, {"ordinal": 1}])
def test_recovery_determinism_never_compares_across_groups_or_ordinals(second):
    """Bug class: recoveries compared across different groups or different recovery ordinals."""
    assert judge(RD, rd_rows(False, **second)) == (V, [], "0 recovery pairs compared (vacuous)")


@pytest.mark.planted("analysis.resume.checkers:RecoveryDeterminism.judge",
                     'f, state, json.dumps(fired),',
                     'f, json.dumps(fired),')
def test_recovery_determinism_never_compares_across_frontiers_states_or_ledgers():
    """Bug class: recoveries compared across different frontiers, states, effects already fired or consumptions
    made before they began (they need not end alike)."""
    base = rd_rows(False)
    other_state = [cp("r1", 1, PARKED, 1.0, True), cp("r2", 1, {**PARKED, "input": "j"}, 1.0, True), *base[2:]]
    other_frontier = [cp("r1", 1, PARKED, 1.0, True), cp("r2", 1, PARKED, 1.0, True), cp("r2", 2, PARKED, 1.5),
                      *base[2:]]
    fired_before = base + [eff("r2", "0:prepare", "reserve", "s", 0.5)]
    consumed_before = base + [tr("r2", 1, "approve", "consume", "s", 0.5, "yes")]
    for rows in (other_state, other_frontier, fired_before, consumed_before):
        assert judge(RD, rows)[2] == "0 recovery pairs compared (vacuous)"
    later = base + [eff("r2", "0:prepare", "reserve", "s", 2.0), tr("r2", 1, "approve", "consume", "s", 2.0)]
    assert judge(RD, later)[2].startswith("1 recovery pairs compared")  # rows at or after the start are its own


@pytest.mark.planted("analysis.resume.checkers:RecoveryDeterminism.judge",
                     'compared += len(calls) - 1',
                     'compared += len(calls)')
def test_recovery_determinism_ignores_killed_recoveries_and_counts_pairs():
    """Bug class: a killed recovery (no outcome) compared, or a rate over the wrong population (three recoveries
    are two comparisons)."""
    killed = rd_rows(False)[:-1] + [call("recover", "r2", "y", None, status=INDET, start=2, group="g")]
    assert judge(RD, killed) == (V, [], "0 recovery pairs compared (vacuous)")
    three = rd_rows(True) + [cp("r3", 1, PARKED, 1.0, True), call("recover", "r3", "z", "done", start=2, end=3,
                                                                       group="g"),
                             eff("r3", "2:act", "charge", "z", 2.5), tr("r3", 2, "act", "node", "z", 2.4)]
    assert judge(RD, three) == (V, [], "2 recovery pairs compared")
    differs = [(*r[:3], {**r[3], "values": {"x": 1}}, *r[4:]) if r[3].get("op") == "z" and r[1] == "recover" else r
               for r in three]
    got = judge(RD, differs)
    assert got[0] is I and got[1][0][0] == (2, 9)


# ------------------------------------------------------------------ liveness and the whole set
@pytest.mark.planted("analysis.resume.checkers:Liveness.judge",
                     'if not any(c.value.get("parked") for c in v.checkpoints_of(run)):',
                     'if False:')
def test_liveness_witness_names_the_first_refusal_reason():
    """Bug class: a witness that names the wrong operation or reason; a run that never parked, or whose resumes
    were all killed, judged."""
    rows = parked() + [call("resume", "r1", "a", "refused", "yes", start=2, end=3, reason="already consumed"),
                       call("resume", "r1", "b", "refused", "yes", start=4, end=5)]
    assert judge(LIVENESS, rows) == (I, [((2, 3), (
        "run r1 parked at its interrupt and every one of its 2 resumes was refused (first: already consumed): "
        "refusing everything is not conformance."))], "1 parked runs resumed, 0 crashed runs recovered; 1 violation(s)")
    no_reason = parked() + [call("resume", "r1", "a", "refused", "yes", start=2, end=3)]
    assert "(first: no reason given)" in judge(LIVENESS, no_reason)[1][0][1]
    never_parked = [cp("r1", 1, PARKED, 1.0), call("resume", "r1", "a", "refused", "yes", start=2, end=3)]
    assert judge(LIVENESS, never_parked) == (V, [], "0 parked runs resumed, 0 crashed runs recovered")
    consumed = no_reason + [tr("r1", 1, "approve", "consume", "a", 2.5, "yes")]
    assert judge(LIVENESS, consumed)[0] is V  # the value was consumed although the answer said refused


@pytest.mark.planted("analysis.resume.checkers:_missing",
                     'if v.graph is None:',
                     'if False:')
def test_check_all_and_verdicts_name_every_property():
    """Bug class: unknown folded into valid: every property of a history with no graph is unknown and says why."""
    rows = parked()
    got = check_all(history("resume", rows, {}))
    assert list(got) == [PC, EO, FD, CV, CO, RD, LIVENESS]
    assert {r.summary for r in got.values()} == {"the history's meta has no 'graph': nothing to judge against"}
    assert verdicts(history("resume", rows, {"graph": "not a dict"})) == {p: U for p in got}
    bare = check_all(history("resume", [call("start", "r1", "s", "parked", start=0, end=1)], META))
    assert {r.summary for r in bare.values()} == {"the history holds no ledger or checkpoint entries"}
    assert verdicts(history("resume", rows, META)) == {p: V for p in got}


@pytest.mark.planted("analysis.resume.checkers:View.runs",
                     'for op in self.calls + self.checkpoints + self.effects + self.traces:',
                     'for op in self.calls + self.checkpoints:')
def test_view_splits_the_history_and_lists_runs_in_order():
    """Bug class: an operation read as the wrong kind (a call taken for a ledger row), or a run missed."""
    rows = [eff("r2", "0:prepare", "reserve", "s", 0.1), *parked("r1"), ("x", "other", OK, {"run": "r9"}),
            tr("r3", 0, "prepare", "node", "s", 0.2), call("start", None, "s", "parked")]
    v = View.of(history("resume", rows, META))
    assert [len(v.calls), len(v.effects), len(v.traces), len(v.checkpoints)] == [2, 1, 1, 1]
    assert v.runs() == ["r1", "r2", "r3"] and v.has_stores
    assert v.head("r1").index == 2 and v.head("r9") is None and not v.done("r1")
    assert View.of(history("resume", rows[4:5], META)).has_stores
    assert not View.of(history("resume", rows[1:2], META)).has_stores
    assert View.of(history("resume", rows[:1], META)).has_stores


# ------------------------------------------------------------------ results name their checker; scans go on
@pytest.mark.planted("analysis.resume.checkers:_missing",
                     "return CheckResult(name, Verdict.UNKNOWN, summary=\"the history's meta has no 'graph'",
                     "return CheckResult(\"\", Verdict.UNKNOWN, summary=\"the history's meta has no 'graph'")
def test_every_result_names_its_property():
    """Bug class: a result that names no property (or another), whatever the path: no graph, no stores, judged."""
    histories = [history("resume", parked(), {}), history("resume", [call("start", "r1", "s", "parked")], META),
                 history("resume", parked() + [call("resume", "r1", "a", "refused", "y", start=2, end=3)], META)]
    for h in histories:
        for name, result in check_all(h).items():
            assert result.checker == name
    assert CO_INERT.check(histories[2]).checker == "CO (inert)"


@pytest.mark.planted("analysis.resume.checkers:EffectExactlyOnce.judge",
                     'continue',
                     'break')
def test_scans_go_on_past_what_they_skip():
    """Bug class: a checker that stops at the first run, call or class it skips instead of going on to the next
    (a run not done for EO, a run never parked or never resumed for liveness, a fork not resumed for FD, a resume
    that consumed for CO, a lone recovery for RD)."""
    eo = [cp("r0", 1, PARKED, 1.0, True), cp("r1", 1, PARKED, 1.0, True), cp("r1", 4, DONE, 3.0)]
    assert judge(EO, eo)[1] == [((2,), "run r1 is done but effect charge of task 2:act never fired."),
                                ((2,), "run r1 is done but effect email of task 3:notify never fired.")]
    live = [call("start", "r0", "s0", "done", start=0, end=0.5), cp("r0", 1, PARKED, 1.0), *parked("r2"), *parked("r1"),
            call("resume", "r1", "a", "refused", "y", start=2, end=3)]
    assert judge(LIVENESS, live)[0] is I
    fd = [call("fork", "f0", "f0", "parked", start=0.5, end=1), cp("f0", 1, PARKED, 1.0, True),
          *FORK, cp("f1", 4, DONE, 3.0),
          call("fork", "f2", "f2", "parked", start=0.5, end=1), cp("f2", 1, PARKED, 1.0, True),
          call("resume", "f2", "b", "done", "no", start=2, end=3), cp("f2", 4, {**DONE, "approval": "yes"}, 3.0)]
    verdict, ws, summary = judge(FD, fd)
    assert verdict is I and summary == "2 forks resumed to the end; 1 violation(s)" and "run f2" in ws[0][1]
    co = parked() + [call("resume", "r1", "a", "done", "yes", start=2, end=3),
                     tr("r1", 1, "approve", "consume", "a", 2.5, "yes"),
                     call("resume", "r1", "b", "refused", "no", start=4, end=5), eff("r1", "2:act", "charge", "b", 4.5),
                     call("resume", "r1", "c", "done", "no", start=6, end=7)]
    assert [s for s, _ in judge(CO, co)[1]] == [(4, 5), (3, 6)]


# ------------------------------------------------------------------ consume once: labels and times
@pytest.mark.planted("analysis.resume.checkers:ConsumeOnce.judge",
                     '(t.value.get("at") or 0) <= call.end',
                     '(t.value.get("at") or float("inf")) <= call.end')
def test_consume_once_edges_of_labels_and_times():
    """Bug class: a consume-once checker that takes a resume's own consumption for an earlier one (a resume with
    an empty label), misses an earlier consumption that carries no label, or misplaces one that carries no time
    (no time: before the call)."""
    own = parked() + [call("resume", "r1", "", "done", "yes", start=2, end=3),
                      tr("r1", 1, "approve", "consume", "", 2.5, "yes")]
    assert judge(CO, own)[0] is V
    unlabelled = parked() + [tr("r1", 1, "approve", "consume", None, 2.5, "yes"),
                             call("resume", "r1", "b", "done", "no", start=4, end=5)]
    assert judge(CO, unlabelled)[0] is I
    timeless = parked() + [("ledger", "trace", OK, {"run": "r1", "step": 1, "kind": "consume", "op": "a"}),
                           call("resume", "r1", "b", "done", "no", start=0.2, end=0.8)]
    assert judge(CO, timeless)[0] is I


# ------------------------------------------------------------------ the view
@pytest.mark.planted("analysis.resume.checkers:View.checkpoints_of",
                     'key=lambda c: (c.value.get("created") or 0, c.index))',
                     'key=lambda c: c.index)')
def test_checkpoints_are_ordered_by_creation_not_by_history_order():
    """Bug class: a frontier or head read from history order: the done checkpoint listed before the parked one
    is still the head; one created at t = 0 (the clock's origin) comes before one created at t = 0.5."""
    rows = [cp("r1", 4, DONE, 3.0), cp("r1", 1, PARKED, 1.0, True)]
    assert judge(EO, rows)[1] == [((0,), "run r1 is done but effect charge of task 2:act never fired."),
                                  ((0,), "run r1 is done but effect email of task 3:notify never fired.")]
    origin = [cp("r1", 4, DONE, 0.5), cp("r1", 1, PARKED, 0.0, True)]
    v = View.of(history("resume", origin, META))
    assert [c.index for c in v.checkpoints_of("r1")] == [1, 0] and v.done("r1")
    assert v.frontier("r1", 0.25) == 1  # created at t = 0, before the call at 0.25
    h = history("resume", origin, META)
    assert View.of(h).history is h and View.of(h).graph == DEFAULT_GRAPH


# ------------------------------------------------------------------ RD: what makes two recoveries comparable
def rd_pair(x_extra=(), y_extra=(), x_value=None, y_value=None, r1_cps=None, r2_cps=None, start=2.0, lead=()):
    """Runs r1 and r2 parked alike; recoveries x (of r1) and y (of r2) in group g, each with its ledger rows."""
    end = None if start is None else start + 1

    def recover(run, op, value):
        r = call("recover", run, op, "done", start=start, end=end, group="g")
        return (*r[:3], {**r[3], **(value or {})}, *r[4:])

    return [*lead, *(r1_cps or [cp("r1", 1, PARKED, 1.0, True)]), *(r2_cps or [cp("r2", 1, PARKED, 1.0, True)]),
            recover("r1", "x", x_value), *x_extra, recover("r2", "y", y_value), *y_extra]


@pytest.mark.parametrize("x_extra,y_extra,x_value,y_value", [
    ([eff("r1", "2:act", "charge", "x", 2.5)], [eff("r2", "3:notify", "charge", "y", 2.5)], None, None),  # task
    ([eff("r1", "2:act", "charge", "x", 2.5)], [eff("r2", "2:act", "email", "y", 2.5)], None, None),     # effect key
    ([tr("r1", 2, "act", "node", "x", 2.5)], [tr("r2", 3, "act", "node", "y", 2.5)], None, None),        # step
    ([tr("r1", 2, "act", "node", "x", 2.5)], [tr("r2", 2, "act", "memo", "y", 2.5)], None, None),        # kind
    ([], [], {"state": "failed"}, None),                                                                  # outcome
    pytest.param([], [], {"values": {"approval": "yes"}}, {"values": {"approval": "no"}},            # final state
                 marks=pytest.mark.planted("analysis.resume.checkers:_signature", '"values": call.value.get("values"), ',
                                           "")),
])
def test_recoveries_that_end_differently_in_one_respect_are_not_deterministic(x_extra, y_extra, x_value, y_value):
    """Bug class: recovery determinism blind to one way two recoveries from one frontier can differ: the tasks or
    effect keys they fired, the steps or kinds of the nodes they ran, their outcome or their final state."""
    assert judge(RD, rd_pair(x_extra, y_extra, x_value, y_value))[0] is I
    same = rd_pair(x_extra, [(*r[:3], {**r[3], "run": "r2", "op": "y"}, *r[4:]) for r in x_extra], x_value, x_value)
    assert judge(RD, same)[0] is V


@pytest.mark.planted("analysis.resume.checkers:_signature",
                     'sort_keys=True, default=str)',
                     'sort_keys=True)')
def test_recovery_final_states_that_json_cannot_write_are_still_compared():
    """Bug class: a signature that fails on a final state JSON cannot write (an object kept in memory)."""
    from pathlib import Path
    assert judge(RD, rd_pair(x_value={"values": {"p": Path("/a")}}, y_value={"values": {"p": Path("/b")}}))[0] is I
    assert judge(RD, rd_pair(x_value={"values": {"p": Path("/a")}}, y_value={"values": {"p": Path("/a")}}))[0] is V


@pytest.mark.planted("analysis.resume.checkers:RecoveryDeterminism.judge",
                     '(c.value.get("created") or 0) < (call.start or 0)',
                     'True')
def test_recovery_frontier_state_is_read_before_the_recovery_began():
    """Bug class: a frontier read at the wrong time: a checkpoint the recovery itself wrote (at or after its
    start) is not the state it began from; the state's key order does not matter; a run with no checkpoint yet
    began from no state (still comparable)."""
    rewritten = [cp("r1", 1, PARKED, 1.0, True), cp("r1", 1, {**PARKED, "input": "other"}, 2.0),
                 cp("r1", 4, DONE, 2.5)]
    assert judge(RD, rd_pair(r1_cps=rewritten))[2] == "1 recovery pairs compared"
    reordered = [cp("r2", 1, dict(reversed(list(PARKED.items()))), 1.0, True)]
    assert judge(RD, rd_pair(r2_cps=reordered))[2].startswith("1 recovery pairs compared")
    none = rd_pair(r1_cps=[eff("r1", "0:prepare", "reserve", "s", 3.5)], r2_cps=[eff("r2", "0:prepare", "reserve",
                                                                                      "s", 3.5)])
    assert judge(RD, none)[2].startswith("1 recovery pairs compared")
    origin = rd_pair(r1_cps=[cp("r1", 1, PARKED, 0.0, True)], r2_cps=[cp("r2", 1, PARKED, 0.2, True)], start=0.5)
    assert judge(RD, origin)[2].startswith("1 recovery pairs compared")  # created at t = 0: before the recovery


@pytest.mark.planted("analysis.resume.checkers:RecoveryDeterminism.judge",
                     'if e.value.get("run") == run and (e.value.get("at") or 0) < t0)',
                     'if (e.value.get("at") or 0) < t0)')
def test_recovery_ledger_before_it_is_its_own_runs_and_timeless_rows_count_as_before():
    """Bug class: recoveries compared on another run's ledger (r1's effects fired during its own recovery are not
    part of r2's frontier), or a ledger row without a time (or at t = 0) not counted as before the recovery."""
    rows = [cp("r1", 1, PARKED, 1.0, True), cp("r2", 1, PARKED, 1.0, True),
            call("recover", "r1", "x", "done", start=2, end=3, group="g"), eff("r1", "2:act", "charge", "x", 2.5),
            tr("r1", 1, "approve", "consume", "x", 2.4),
            call("recover", "r2", "y", "done", start=5, end=6, group="g"), eff("r2", "2:act", "charge", "y", 5.5),
            tr("r2", 1, "approve", "consume", "y", 5.4)]
    assert judge(RD, rows)[2] == "1 recovery pairs compared"
    timeless_effect = ("ledger", "effect", OK, {"run": "r1", "task": "0:prepare", "effect": "reserve", "op": "s"})
    timeless_consume = ("ledger", "trace", OK, {"run": "r1", "step": 1, "kind": "consume", "op": "s"})
    for row in (timeless_effect, timeless_consume):
        assert judge(RD, rd_pair(lead=[row], start=0.5))[2] == "0 recovery pairs compared (vacuous)"
        also = (*row[:3], {**row[3], "run": "r2"})
        assert judge(RD, rd_pair(lead=[row, also], start=0.5))[2] == "1 recovery pairs compared"
    for other in (eff("r2", "3:notify", "reserve", "s", 0.1), eff("r2", "0:prepare", "email", "s", 0.1)):
        # fired before alike except for the task, or the effect key: not one frontier
        assert judge(RD, rd_pair(lead=[eff("r1", "0:prepare", "reserve", "s", 0.1), other]))[2] == \
            "0 recovery pairs compared (vacuous)"
    at_origin = eff("r1", "0:prepare", "reserve", "s", 0.0)
    assert judge(RD, rd_pair(lead=[at_origin], start=0.5))[2] == "0 recovery pairs compared (vacuous)"
    no_start = rd_pair(lead=[eff("r1", "0:prepare", "reserve", "s", 0.5)], start=None)
    assert judge(RD, no_start)[2] == "1 recovery pairs compared"  # no start time: nothing is known to precede it
    unlike = rd_pair(r1_cps=[cp("r1", 1, PARKED, 0.5, True)], r2_cps=[cp("r2", 1, {**PARKED, "input": "j"}, 0.5,
                                                                        True)], start=None)
    assert judge(RD, unlike)[2] == "1 recovery pairs compared"


@pytest.mark.planted("analysis.resume.checkers:RecoveryDeterminism.judge",
                     'call.value.get("ordinal", 0)',
                     'call.value.get("ordinal")')
def test_recovery_ordinal_defaults_to_the_first_and_classes_are_counted_apart():
    """Bug class: a recovery without an ordinal not taken as the first one (ordinal 0); a rate over the wrong
    population (pairs of every class summed, a lone recovery's class not skipped past)."""
    assert judge(RD, rd_pair(x_value={"ordinal": 0}))[2] == "1 recovery pairs compared"
    lone = [cp("r0", 1, PARKED, 1.0, True), call("start", "r0", "s", "parked", start=0.1, end=0.2),
            call("recover", "r0", "w", "done", start=2, end=3, group="lone")]
    two_classes = rd_pair(lead=lone) + [cp("r3", 1, PARKED, 1.0, True), cp("r4", 1, PARKED, 1.0, True),
                                        call("recover", "r3", "u", "done", start=2, end=3, group="h"),
                                        call("recover", "r4", "v", "failed", start=2, end=3, group="h")]
    verdict, ws, summary = judge(RD, two_classes)
    assert summary == "2 recovery pairs compared; 1 violation(s)" and ws[0][0] == (len(lone) + 6, len(lone) + 7)
