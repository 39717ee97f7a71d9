"""Apache Burr 0.43 (ApplicationBuilder, halt_before, SQLitePersister, initialize_from) under the resume harness.

The env is built from its lock on first use (``data/envs/apache-burr-0.43``), every crash is a real SIGKILL of a
child of the env's fork server and every recovery a new process.  One fault cell (a SIGKILL after the gated effect of
a resume, then recovery) and one k=2 race, as ``test_resume_framework_adapters.py`` does for the other frameworks;
the assertions tie each verdict to what the ledger and Burr's ``burr_state`` table hold, so that a wrong lab or
adapter fails, whatever the release under test does.
"""
from __future__ import annotations

import pytest
from test_adapter_conformance import env_group
from test_resume_framework_adapters import _calls, judged_fault, recoveries

RUNTIME = "apache-burr@0.43"
pytestmark = env_group(RUNTIME)  # on the worker that holds the env's servers




@pytest.mark.planted("analysis.resume.checkers:EffectExactlyOnce.judge", "if len(rows) > 1:", "if len(rows) > 2:")
def test_fault_cell_sigkill_after_gated_effect():
    """SIGKILL after the gated effect (charge) of a resume, recovery in a new process.  The kill is a real signal 9 of
    the resume's own process, after act fired its charge and before Burr's PersisterHook inserted act's row; the
    recovery builds the application with initialize_from(resume_at_next_action=True), which loads the row of the
    highest sequence id (approve's) and runs act again under the same sequence id: the ledger holds two charges and
    EO is invalid with a witness naming them, PC holds (the recovery ran nothing below the frontier the rows had when
    it began), CO holds (one consumption), and Burr's table ends with one row per sequence id, 0..3, in graph order.
    Planted bugs this catches: a 'crash' that unwinds instead of dying (Burr would record a 'failed' row or finish
    the run, and no recovery would re-run act); a recovery in the killed process; an adapter that reads the table
    and answers done without re-running act, or that skips Burr and re-runs from the start (prepare's reserve
    twice, PC invalid); a checker that misses a second firing or consumption."""
    records, history, verdicts, witnesses, effects, traces, checkpoints, fired, consumed = judged_fault(
        RUNTIME)
    assert verdicts["liveness"] == "valid"
    recovers = _calls(history, "recover")
    assert recovers
    below = False
    for rec, run, label, frontier in recoveries(history, checkpoints):
        assert frontier == 2  # approve's row was committed; act's was not (killed after its effect)
        mine = [t.value["node"] for t in traces if t.value.get("op") == label and t.value.get("kind") == "node"]
        below = below or any(t.value["step"] < frontier for t in traces
                             if t.value.get("op") == label and t.value.get("kind") == "node")
        assert mine == ["act", "notify"]  # Burr's next action after approve's row, then the rest
        assert [e.value["effect"] for e in effects if e.value.get("op") == label] == ["charge", "email"]
        assert rec.value["state"] == "done"
        assert fired[(run, "2:act", "charge")] == 2 and fired[(run, "0:prepare", "reserve")] == 1
        assert consumed[run] == 1
        # Burr's table: one row per sequence id, in graph order (act's row is the recovery's, same sequence id)
        ids = [c.value["checkpoint"] for c in checkpoints if c.value["run"] == run]
        assert ids[-4:] == ["burr_state/0/prepare", "burr_state/1/approve", "burr_state/2/act",
                            "burr_state/3/notify"], ids
    assert (verdicts["PC"] == "invalid") == below


#: Burr's own failure of a second insert of one (partition_key, app_id, sequence_id, position)
UNIQUE = "IntegrityError: UNIQUE constraint failed: burr_state."


@pytest.mark.planted("driftlab_frameworks.burr:BurrAdapter.resume", "if not self._rows(run_id):", "if True:")
def test_race_k2():
    """Two racers forked from the env's warm server resume one parked application at one barrier.  Both load the
    parked row (sequence id 0, prepare's) and run approve with their value; Burr's primary key lets one insert
    approve's row and the other's insert fails (sqlite3.IntegrityError from PersisterHook, raised out of
    Application.run after the action ran): the loser *consumed* the value and is reported failed with Burr's own
    error, and stops there (no charge of its own), so EO holds and CO is invalid exactly when the ledger holds two
    consumptions.  A racer that loads after the winner's approve row runs act (and fires a charge) before its own
    insert fails: the ledger says so and EO judges it; one that loads after the winner finished finds no next
    action, runs nothing and answers done (its value silently accepted: CO).  Planted bugs this catches: racers
    whose answers are lost; an adapter that turns Burr's IntegrityError into parked/done (a served racer that
    consumed without charging) or invents a refusal; a CO/EO verdict that disagrees with the ledger."""
    from runners.experiment import Options
    from runners.resume.concurrency import race_cell

    out = race_cell("resume_frameworks", RUNTIME, "sqlite", 2, 0.0, 1, 7, Options())
    r, history = out.records, out.history
    racers = [op for op in history.operations if op.actor.startswith("racer-")]
    assert r["indeterminate"] == [0] and len(racers) == 2
    states = [op.value["state"] for op in racers]
    assert (r["served"][0], r["refused"][0], r["failed"][0]) == (
        sum(s in ("parked", "done") for s in states), states.count("refused"), states.count("failed"))
    assert r["served"][0] >= 1 and r["refused"] == [0]  # Burr never refuses before running an action
    ledger = [op.value for op in history.operations if op.name in ("trace", "effect")]
    consumed = [v["op"] for v in ledger if v.get("kind") == "consume"]
    charged = [v["op"] for v in ledger if v.get("effect") == "charge"]
    assert r["effects_fired"] == [len(charged)]
    for racer in racers:
        label, state = racer.value["op"], racer.value["state"]
        if state == "failed":
            assert racer.value["reason"].startswith(UNIQUE), racer.value
            # a loser that loaded the parked row consumed and stopped at approve's insert: no charge of its own
            assert consumed.count(label) + charged.count(label) <= 1
        else:  # served: it ran approve and the rest, or (loading after the winner finished) nothing at all
            assert state == "done" and (consumed.count(label), charged.count(label)) in ((1, 1), (0, 0))
    inert = [op for op in racers if op.value["state"] == "done" and op.value["op"] not in consumed]
    charged_unconsumed = [label for label in charged if label not in consumed]  # a loser that loaded a later row
    assert r["co_verdict"] == ["invalid" if len(consumed) > 1 or inert or charged_unconsumed else "valid"]
    fired = [(v["task"], v["effect"]) for v in ledger if "effect" in v]
    assert r["eo_verdict"] == ["invalid" if len(fired) > len(set(fired)) else "valid"]
