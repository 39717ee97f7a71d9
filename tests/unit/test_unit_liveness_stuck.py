"""Liveness of a run that never reached done (issue 24 §1, §3): the same rule for every framework.

A run that was served once (it parked, or progressed) and whose every later call was refused or failed never
reaches done: a liveness violation with a witness naming its last served call and the failed ones, whether the
later calls failed after a schema-invalid state was persisted (a thread the framework cannot load again: CV *and*
liveness) or after a race whose decision was consumed and whose effect never fired (a lost effect).  Not a
violation: racers that lost to a served one (they began before it ended), a run that finished, and a run whose
graph cannot finish without a schema-invalid state when nothing invalid was persisted (refusing to persist it is
CV's conformance).  Each test keeps the planted checker it fails on (:func:`planted_without_stuck`, or a
``planted`` marker: tests/planting.py).
"""
from __future__ import annotations

import pytest
from histories import history

from analysis.resume.checkers import CHECKERS, Liveness
from vocabulary import Verdict
from vocabulary.resume import DEFAULT_GRAPH, LIVENESS, GraphSpec, NodeSpec

OK, FAIL = "ok", "fail"
META = {"graph": DEFAULT_GRAPH.to_dict()}
PARKED_STATE = {"input": "i", "approval": None, "steps": 1, "log": ["prepare:None"]}
INVALID_GRAPH = GraphSpec("approval", (NodeSpec("prepare", ("reserve",)), NodeSpec("approve", (), interrupt=True),
                                       NodeSpec("act", ("charge",)), NodeSpec("notify", ("email",), invalid=True)))


def call(name, run, op, state, status=OK, start=0.0, end=0.5, reason=""):
    return ("harness", name, status, {"run": run, "op": op, "state": state, "resume": "yes", "reason": reason},
            start, end)


def parked(run, values=PARKED_STATE):
    return [call("start", run, f"{run}/start", "parked", start=0.5, end=1.0),
            ("store", "checkpoint", OK, {"run": run, "step": 1, "values": values, "created": 1.0, "parked": True},
             1.0, 1.0)]


def consume(run, op, at):
    return ("ledger", "trace", OK, {"run": run, "step": 1, "node": "approve", "kind": "consume", "resume": "yes",
                                    "op": op, "at": at}, at, at)


def judge(rows, meta=META, checker=None):
    return (checker or CHECKERS[LIVENESS]).check(history("resume", rows, meta))


class PlantedWithoutStuck(Liveness):
    """Planted: the checker before issue 24 (a run stuck after failed calls counted under CV only, or as low
    saturation)."""

    @staticmethod
    def stuck(v, run, calls):
        return None


planted_without_stuck = PlantedWithoutStuck()


def thread_failing_after_invalid_state():
    bad = {**PARKED_STATE, "steps": "invalid"}
    return parked("r1", bad) + [call("resume", "r1", "r1/resume#2", "failed", FAIL, 2.0, 2.5, "ValidationError: x"),
                                call("recover", "r1", "r1/recover#3", "failed", FAIL, 3.0, 3.5, "ValidationError: x")]


def race_whose_decision_was_consumed_and_no_racer_served():
    return parked("race") + [consume("race", "race/resume#0", 2.1),
                             call("resume", "race", "race/resume#0", "failed", FAIL, 2.0, 2.4,
                                  "FileNotFoundError: lock"),
                             call("resume", "race", "race/resume#1", "failed", FAIL, 2.0, 2.3,
                                  "FileNotFoundError: lock")]


@pytest.mark.parametrize("rows", [thread_failing_after_invalid_state(),
                                  race_whose_decision_was_consumed_and_no_racer_served()],
                         ids=["failing-after-invalid-state", "lost-effect-race"])
def test_a_run_whose_later_calls_all_fail_is_not_live(rows):
    """Bug class: a thread whose every later call fails counted under CV only (or a race that lost its effect read as
    saturation 0 with liveness holding)."""
    res = judge(rows)
    assert res.verdict is Verdict.INVALID, res
    text = res.witnesses[0].explanation
    assert "never reached done: after " in text and "/start (#0, parked)" in text and "2 later calls" in text
    assert judge(rows, checker=planted_without_stuck).verdict is Verdict.VALID  # the planted checker misses it


@pytest.mark.planted("analysis.resume.checkers:Liveness.stuck",
                     '(c.start or 0) > (last.end or last.start or 0)',
                     '(c.start or 0) >= (last.start or 0)')
def test_racers_that_lost_to_a_served_one_are_not_stuck():
    """Bug class: losers of a race (refused while the winner was served) read as a stuck run."""
    rows = parked("race") + [consume("race", "race/resume#0", 2.1),
                             call("resume", "race", "race/resume#0", "parked", OK, 2.0, 2.6),
                             call("resume", "race", "race/resume#1", "refused", FAIL, 2.0, 2.2, "claimed")]
    assert judge(rows).verdict is Verdict.VALID


@pytest.mark.planted("analysis.resume.checkers:Liveness.stuck",
                     'if v.graph and any(n.invalid for n in v.graph.nodes) and not any(',
                     'if False and not any(')
def test_a_graph_that_cannot_finish_validly_is_not_stuck_when_nothing_invalid_was_persisted():
    """Bug class: a runtime that refuses to persist a schema-invalid state (CV holds) punished on liveness."""
    meta = {"graph": INVALID_GRAPH.to_dict()}
    rows = parked("r1") + [call("resume", "r1", "r1/resume#2", "failed", FAIL, 2.0, 2.5, "nothing persisted")]
    assert judge(rows, meta).verdict is Verdict.VALID
    bad = {**PARKED_STATE, "steps": "invalid"}  # but persisted, and then unloadable: stuck
    rows = parked("r1", bad) + [call("resume", "r1", "r1/resume#2", "failed", FAIL, 2.0, 2.5, "ValidationError")]
    assert judge(rows, meta).verdict is Verdict.INVALID


#: the stuck rule's two guards against a later served call (counting from the last served call; a served call among
#: the later ones), both gone: either alone still finds the later served call
IGNORES_LATER = ('last = max(served, key=lambda c: (c.end or c.start or 0, c.index))\n'
                 '    after = [c for c in calls if not c.indeterminate and (c.start or 0) > '
                 '(last.end or last.start or 0)\n'
                 '             and c.index != last.index]\n'
                 '    if not after or any(c.status == "ok" for c in after):')


@pytest.mark.planted("analysis.resume.checkers:Liveness.stuck", IGNORES_LATER,
                     IGNORES_LATER.replace("max(", "min(").replace(' or any(c.status == "ok" for c in after)', ""))
def test_a_served_later_call_or_a_finished_run_is_live():
    """Bug class: a stuck rule that ignores a later served call (planted: it counts from the run's first served call
    and never asks whether a later call was served)."""
    rows = thread_failing_after_invalid_state()[:-1] + [call("resume", "r1", "r1/resume#3", "parked", OK, 3.0, 3.5)]
    assert judge(rows).verdict is Verdict.VALID
