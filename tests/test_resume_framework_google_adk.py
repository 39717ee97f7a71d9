"""Google ADK 2.13 (a resumable App, a confirmation-gated tool, DatabaseSessionService) under the resume harness.

The env is built from its lock on first use (``data/envs/google-adk-2.13``), every crash is a real SIGKILL of a
child of the env's fork server and every recovery a new process.  One fault cell (a SIGKILL after the gated effect
of a resume, then recovery) and a k=2 race on SQLite and on PostgreSQL, as ``test_resume_framework_crewai.py``
does; the assertions tie each verdict to what the ledger and ADK's session events hold, so that a wrong lab or
adapter fails, whatever the release under test does.
"""
from __future__ import annotations

import pytest
from test_adapter_conformance import env_group
from test_resume_framework_adapters import _calls, _ledger, judged_fault, recoveries

RUNTIME = "google-adk@2.13"
pytestmark = env_group(RUNTIME)  # on the worker that holds the env's servers




@pytest.mark.planted("analysis.resume.checkers:EffectExactlyOnce.judge", "if len(rows) > 1:", "if len(rows) > 2:")
def test_fault_cell_sigkill_after_gated_effect():
    """SIGKILL after the gated effect (charge) of a resume, recovery in a new process.  The kill is a real signal 9
    of the resume's own process; the recovery is ADK's resume of the session's newest invocation
    (run_async(invocation_id=...)), which continues from the last event: the function call to act was written,
    its response was not, so ADK runs act again (its documented at-least-once) and goes on to notify.  Each verdict
    is tied to the ledger: EO is invalid exactly when some effect fired twice, PC exactly when the recovery ran a
    node below the frontier the checkpoints had when it began, CO exactly when the interrupt consumed more than one
    value (planted bugs: a 'crash' that unwinds instead of dying; a recovery in the killed process; an adapter whose
    recovery skips the killed node or restarts the run from prepare; a checker that misses a second firing)."""
    records, history, verdicts, witnesses, effects, traces, checkpoints, fired, consumed = judged_fault(
        RUNTIME)
    assert verdicts["liveness"] == "valid"
    below = False
    recovers = _calls(history, "recover")
    assert recovers
    for rec, run, label, frontier in recoveries(history, checkpoints):
        assert fired[(run, "2:act", "charge")] >= 1  # the killed resume's charge is in the ledger
        assert frontier == 2  # approve's response event was committed; act's was not (killed after its effect)
        mine = [t for t in traces if t.value.get("op") == label and t.value.get("kind") == "node"]
        below = below or any(t.value["step"] < frontier for t in mine)
        # ADK resumes the invocation at its last event: the call to act, answered by running act again
        assert [t.value["node"] for t in mine] == ["act", "notify"]
        assert [e.value["effect"] for e in effects if e.value.get("op") == label] == ["charge", "email"]
        assert rec.value["state"] == "done"
        assert fired[(run, "2:act", "charge")] == 2 and fired[(run, "0:prepare", "reserve")] == 1
        assert consumed[run] == 1
    assert (verdicts["PC"] == "invalid") == below

def _race_tied_to_the_ledger(backend: str) -> None:
    """One k=2 race on ``backend``, every answer and verdict tied to what the ledger holds (the two tests below)."""
    from runners.experiment import Options
    from runners.resume.concurrency import race_cell

    out = race_cell("resume_frameworks", RUNTIME, backend, 2, 0.0, 1, 7, Options())
    r, history = out.records, out.history
    assert history.meta.get("backend") == backend, history.meta
    assert r["indeterminate"] == [0] and r["served"][0] + r["refused"][0] + r["failed"][0] == 2, r
    racers = [op for op in history.operations if op.actor.startswith("racer-")]
    consumed = [op for op in _ledger(history, "trace") if op.value.get("kind") == "consume"]
    charged = [op for op in _ledger(history, "effect") if op.value.get("effect") == "charge"]
    assert len(racers) == 2 and len(charged) == r["effects_fired"][0]
    assert (r["co_verdict"][0] == "invalid") == (len(consumed) > 1)
    assert (r["eo_verdict"][0] == "invalid") == (len(charged) > 1)
    for racer in racers:
        label = racer.value["op"]
        mine_c = [t for t in consumed if t.value["op"] == label]
        mine_e = [e for e in charged if e.value["op"] == label]
        if racer.value["state"] in ("refused", "failed"):
            assert racer.value["reason"].startswith("StaleSessionError: "), racer.value
            assert not mine_e and len(mine_c) <= 1
            assert racer.value["state"] == ("failed" if mine_c else "refused")
        else:
            assert racer.value["state"] == "done" and len(mine_c) == len(mine_e) <= 1
    assert r["served"][0] >= 1 and len(charged) >= 1, r



@pytest.mark.planted("driftlab_frameworks.google_adk:GoogleADKAdapter.resume", "if not calls:", "if True:")
def test_race_k2():
    """Two racers forked from the env's warm server answer one parked confirmation at one barrier: both answer,
    and every gated firing and every consumption in the ledger carries the label of the racer that made it.  ADK's
    DatabaseSessionService checks a session's storage revision at each append (StaleSessionError), but on SQLite
    without a row lock (row-level locking is used on PostgreSQL and MySQL only): two answers to one
    adk_request_confirmation call can both pass the check and be appended, both racers then run the confirmed tool,
    and the one whose next append comes second fails there.  So a failed racer may hold one consumption (never a
    charge: it fails before act); a racer refused with StaleSessionError ran nothing; a served one consumed once and
    charged once, or nothing if the other's invocation had already ended (ADK answers a stray confirmation of a
    finished invocation by running nothing).  In this lab's runs the loser consumed and failed.  CO and EO judge
    exactly what the ledger holds (planted bugs: racers that never answer or whose answers are lost; a refusal
    invented by the adapter instead of ADK's StaleSessionError (planted below: every resume refused before it
    answers the confirmation); a StaleSessionError after a node ran recorded as a refusal; an adapter that runs a
    node itself, which would charge without a consumption of its own; a checker that misses two consumptions of one
    interrupt)."""
    _race_tied_to_the_ledger("sqlite")


@pytest.mark.planted("driftlab_frameworks.google_adk:GoogleADKAdapter.resume", "if not calls:", "if True:")
def test_race_k2_postgres(pg_dsn):
    """The same race on PostgreSQL, where ADK's stale-session check locks the session's row (SELECT ... FOR
    UPDATE): the check and the append are one step, so a racer that loaded the session before the other's answer
    was appended is refused at its own answer's append, before any node (StaleSessionError, refused: nothing of
    its own in the ledger).  A racer that loaded it just after the other's answer was appended (and before that
    invocation's next append) still appends a second answer to the same confirmation call, runs the confirmed tool
    and fails at its next append (failed, one consumption, no charge): the lab's quick profile saw both.  The
    verdicts are tied to the ledger whatever the timing: CO is invalid exactly when two consumptions are in the
    ledger, EO exactly when two charges are.  Planted bugs as in the SQLite race, and a lab that runs the
    PostgreSQL cell on SQLite (the history's backend is checked)."""
    _race_tied_to_the_ledger("postgres")
