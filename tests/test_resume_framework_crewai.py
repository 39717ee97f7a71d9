"""CrewAI Flows 1.15 (@persist on SQLiteFlowPersistence, @human_feedback paused and resumed) under the resume harness.

The env is built from its lock on first use (``data/envs/crewai-1.15``), every crash is a real SIGKILL of a child
of the env's fork server and every recovery a new process.  One fault cell (a SIGKILL after the gated effect of a
resume, then recovery) and one k=2 race, as ``test_resume_framework_adapters.py`` does for the other frameworks;
the assertions tie each verdict to what the ledger and CrewAI's SQLite file hold, so that a wrong lab or adapter
fails, whatever the release under test does.
"""
from __future__ import annotations

import pytest
from test_adapter_conformance import env_group
from test_resume_framework_adapters import _calls, _ledger, judged_fault, recoveries

RUNTIME = "crewai@1.15"
pytestmark = env_group(RUNTIME)  # on the worker that holds the env's servers




@pytest.mark.planted("analysis.resume.checkers:EffectExactlyOnce.judge", "if len(rows) > 1:", "if len(rows) > 2:")
def test_fault_cell_sigkill_after_gated_effect():
    """SIGKILL after the gated effect (charge) of a resume, recovery in a new process, then the lab's retry of the
    resume if the run is parked again.  The kill is a real signal 9 of the resume's own process; the recovery runs
    in another process and is CrewAI's kickoff(inputs={"id": ...}), which restores the newest state and runs the flow
    from its start method: the recovery's own trace starts at prepare, re-fires reserve and parks at the interrupt
    again (its pending feedback saved anew).  Each verdict is tied to the ledger: EO is invalid exactly when some
    effect fired twice, PC exactly when the recovery ran a node below the frontier the checkpoints had when it
    began, CO exactly when the interrupt consumed more than one value (planted bugs: a 'crash' that unwinds instead
    of dying; a recovery in the killed process; an adapter that skips CrewAI's restart and runs the remaining nodes
    itself, which hides the re-run prefix; a checker that misses a second firing or consumption)."""
    records, history, verdicts, witnesses, effects, traces, checkpoints, fired, consumed = judged_fault(
        RUNTIME)
    assert verdicts["liveness"] == "valid"
    below = False
    recovers = _calls(history, "recover")
    assert recovers
    for rec, run, label, frontier in recoveries(history, checkpoints):
        assert fired[(run, "2:act", "charge")] >= 1  # the killed resume's charge is in the ledger
        assert frontier == 2  # approve's row was committed; act's was not (killed after its effect)
        mine = [t for t in traces if t.value.get("op") == label and t.value.get("kind") == "node"]
        below = below or any(t.value["step"] < frontier for t in mine)
        # CrewAI's restore runs the flow from its start method and parks again at the interrupt
        assert mine and mine[0].value["node"] == "prepare"
        assert [e.value["effect"] for e in effects if e.value.get("op") == label] == ["reserve"]
        assert rec.value["state"] == "parked" and not any(t.value.get("kind") == "consume" for t in traces
                                                          if t.value.get("op") == label)
        retry = [op for op in _calls(history, "resume") if op.value["run"] == run and op.index > rec.index]
        assert retry and retry[0].value["state"] == "done"  # the lab answered the new pause as an operator would
        assert fired[(run, "0:prepare", "reserve")] == 2 and fired[(run, "2:act", "charge")] == 2
        assert consumed[run] == 2
    assert (verdicts["PC"] == "invalid") == below


@pytest.mark.planted("driftlab_frameworks.crewai:CrewAIAdapter.resume", "if checkpoint_id is not None:", "if True:")
def test_race_k2():
    """Two racers forked from the env's warm server resume one parked interrupt at one barrier: both answer, and
    every gated firing and every consumption in the ledger carries the label of the racer that made it.
    Flow.from_pending reads the pending feedback without claiming it (clear_pending_feedback deletes it only after
    the resumed method completed), so a racer that reads it before the other's resume cleared it is served too:
    each served racer consumed the value once and charged once, a refused one is CrewAI's own 'No pending feedback'
    error with nothing of its own in the ledger (a served racer's answer is the head of the store when it returned:
    done, or parked when the other racer's rows were newer), and CO/EO judge exactly what the ledger holds.  Which of the two a
    racer gets depends on the machine's timing (in this lab's runs both were served); at least one is served
    (planted bugs: racers that never answer or whose answers are lost; a refusal invented by the adapter instead
    of CrewAI's own error; an adapter that runs the interrupt node itself from the file, which would charge
    without a consumption of its own; a checker that misses two consumptions of one interrupt)."""
    from runners.experiment import Options
    from runners.resume.concurrency import race_cell

    out = race_cell("resume_frameworks", RUNTIME, "sqlite", 2, 0.0, 1, 7, Options())
    r, history = out.records, out.history
    assert r["indeterminate"] == [0] and r["served"][0] + r["refused"][0] == 2, r
    racers = [op for op in history.operations if op.actor.startswith("racer-")]
    consumed = [op for op in _ledger(history, "trace") if op.value.get("kind") == "consume"]
    charged = [op for op in _ledger(history, "effect") if op.value.get("effect") == "charge"]
    assert len(racers) == 2 and len(charged) == r["effects_fired"][0] == len(consumed)
    assert (r["co_verdict"][0] == "invalid") == (len(consumed) > 1)
    assert (r["eo_verdict"][0] == "invalid") == (len(charged) > 1)
    for racer in racers:
        label = racer.value["op"]
        mine_c = [t for t in consumed if t.value["op"] == label]
        mine_e = [e for e in charged if e.value["op"] == label]
        if racer.value["state"] == "refused":
            assert "No pending feedback" in racer.value["reason"] and not mine_c and not mine_e
        else:
            # its answer is the store's head when it returned: done, or the other racer's newer row (still running)
            assert racer.value["state"] in ("done", "parked") and len(mine_c) == 1 and len(mine_e) == 1
    assert r["served"][0] >= 1 and r["effects_fired"] == r["served"], r
