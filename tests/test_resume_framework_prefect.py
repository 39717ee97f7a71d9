"""Prefect 3.9 (a local Prefect server on SQLite, suspend_flow_run / resume_flow_run, persisted task results) under
the resume harness.

The env is built from its lock on first use (``data/envs/prefect-3.9``); the adapter starts one Prefect server per
env fork server (about 20 s, once).  Every crash is a real SIGKILL of a child of the env's fork server and every
recovery a new process.  One fault cell (a SIGKILL after the gated effect of a resume, then recovery) and one k=2
race, as ``test_resume_framework_adapters.py`` does for the other frameworks; the assertions tie each verdict to what
the ledger and Prefect's own stores (the server's flow run state, the persisted task result records) hold, so that a
wrong lab or adapter fails, whatever the release under test does.
"""
from __future__ import annotations

from collections import Counter

import pytest
from test_adapter_conformance import env_group
from test_resume_framework_adapters import _calls, _fault, _ledger, judged_fault, recoveries

RUNTIME = "prefect@3.9"
pytestmark = env_group(RUNTIME)  # on the worker that holds the env's servers
#: `prefect flow-run retry`'s refusal of a run not in a terminal state (prefect/cli/flow_run.py)
NOT_TERMINAL = "is in state 'RUNNING' and cannot be retried"




@pytest.mark.planted("driftlab_frameworks.protocol:KillAtPoint.point", 'os.write(self.wfd, b"R\\n")',
                     "return")  # in the env server: a 'crash' point that returns instead of dying
def test_fault_cell_sigkill_after_gated_effect():
    """SIGKILL after the gated effect (charge) of a resume, recovery in a new process.  The kill is a real signal 9 of
    the process that resumed the flow run and was executing it (Prefect's engine, act's task after its charge, before
    its result record was written); the server still holds the run RUNNING (nothing tells it the engine died: stock
    Prefect detects that only with heartbeats and an automation the user adds), so the recovery, which retries as
    `prefect flow-run retry` does, is refused by that command's own rule (terminal runs only), runs nothing and fires
    nothing: liveness is invalid with a witness naming the refusal, EO and CO hold (one charge, one consumption), and
    Prefect's result records end at approve's (step 2), none of act's.  Planted bugs this catches: a 'crash' that
    unwinds instead of dying (Prefect's engine would mark the run CRASHED and the retry would run it); a recovery in
    the killed process; an adapter that forces the run's state or runs the remaining tasks itself behind Prefect's
    back (an answer other than the retry's refusal, or a second charge); a liveness checker that counts a refused
    recovery as progress."""
    records, history, verdicts, witnesses, effects, traces, checkpoints, fired, consumed = judged_fault(
        RUNTIME)
    recovers = _calls(history, "recover")
    assert recovers
    for rec, run, label, frontier in recoveries(history, checkpoints):
        assert fired[(run, "2:act", "charge")] >= 1  # the killed resume's charge is in the ledger
        mine = [op for op in (*effects, *traces) if op.value.get("op") == label]
        # stock Prefect has nothing that moves a RUNNING run whose engine died: the retry's rule refuses it
        assert rec.value["state"] == "refused" and NOT_TERMINAL in rec.value["reason"], rec.value
        assert not mine  # the retry's refusal comes before any task
        steps = sorted(c.value["step"] for c in checkpoints if c.value["run"] == run)
        assert steps == [1, 2], steps  # prepare's and approve's result records; act's was never written
        assert fired[(run, "2:act", "charge")] == 1 and consumed[run] == 1
    assert verdicts["liveness"] == "invalid" and NOT_TERMINAL in witnesses["liveness"]
    assert verdicts["EO"] == "valid" and verdicts["CO"] == "valid"


@pytest.mark.planted("driftlab_frameworks.prefect:PrefectAdapter.resume", "if fr is None:", "if True:")  # refusal
def test_race_k2():
    """Two racers forked from the env's warm server resume one suspended flow run at one barrier, each with
    resume_flow_run and then Prefect's engine on the run.  The server resumes a paused run once; a racer whose client
    already saw the run not paused gets NotPausedError (refused, loudly, nothing of its own in the ledger); a racer
    whose client read it paused just before the other's resume committed gets the server's ABORT ("Cannot resume a
    flow run that is not paused"), which resume_flow_run does not raise (it raises on REJECT only), and its engine
    then runs no task of the run: it answers the run's state with nothing consumed or fired (silently accepted: CO
    invalid, when the winner had consumed the value before that answer; one that answered first is not).  Either way one racer consumed the value and charged once, so EO holds.  Planted bugs this catches:
    racers whose answers are lost; an adapter that runs the flow's tasks outside Prefect's engine and its server's
    one-submission rule (two consumptions); a refusal invented by the adapter instead of Prefect's own
    NotPausedError (or its server's rejection of the second resume); a CO/EO verdict that disagrees with the ledger and the racers' answers."""
    from runners.experiment import Options
    from runners.resume.concurrency import race_cell

    out = race_cell("resume_frameworks", RUNTIME, "sqlite", 2, 0.0, 1, 7, Options())
    r, history = out.records, out.history
    racers = [op for op in history.operations if op.actor.startswith("racer-")]
    assert r["indeterminate"] == [0] and len(racers) == 2
    states = [op.value["state"] for op in racers]
    assert (r["served"][0], r["refused"][0], r["failed"][0]) == (
        sum(s in ("parked", "done") for s in states), states.count("refused"), states.count("failed"))
    ledger = [op.value for op in history.operations if op.name in ("trace", "effect")]
    consumed = [v["op"] for v in ledger if v.get("kind") == "consume"]
    charged = [v["op"] for v in ledger if v.get("effect") == "charge"]
    assert len(consumed) == 1 and charged == consumed and r["effects_fired"] == [1]
    winner = consumed[0]
    consumed_at = next(v["at"] for v in ledger if v.get("kind") == "consume")
    inert = False
    for racer in racers:
        label, state = racer.value["op"], racer.value["state"]
        if label == winner:
            assert state == "done"
            continue
        assert not [v for v in ledger if v.get("op") == label]  # the loser ran no task
        if state == "refused":
            # Prefect's own two: the run read not paused, or (both read it paused) the server rejected the second
            assert racer.value["reason"].startswith(("NotPausedError: Cannot resume a run that isn't paused",
                                                     "RuntimeError: Cannot resume this run")), racer
        else:
            assert state in ("done", "parked")
            # silently accepted only if the value was already consumed when it answered: a loser that answered the
            # run's state before the winner consumed could not have been refused for it (CO's rule, either way)
            inert = inert or racer.end is None or consumed_at <= racer.end
    assert r["co_verdict"] == ["invalid" if inert else "valid"]
    fired = [(v["task"], v["effect"]) for v in ledger if "effect" in v]
    assert len(fired) == len(set(fired)) and r["eo_verdict"] == ["valid"]


@pytest.mark.planted("analysis.resume.checkers:EffectExactlyOnce.judge", "if len(rows) > 1:", "if len(rows) > 2:")
def test_fault_cell_crashed_retry():
    """The crashed-retry row: what a user adds so that a SIGKILLed flow run can be retried (the documented zombie-flow
    automation's action, CRASHED, then `prefect flow-run retry`).  SIGKILL after act's charge; the recovery, in a new
    process, re-executes the flow run from its start: prepare and approve are not run again (their persisted results
    are cache hits under the default cache policy, inputs + task source + flow run id; the human's value comes back
    from Prefect's saved run input, not a second consumption), act is (its result was never written): the ledger
    holds two charges, one reserve and one consumption, EO is invalid with a witness naming the charge, PC and CO hold,
    and the run is done.  Planted bugs this catches: a retry that bypasses Prefect's result cache (prepare's reserve
    twice, or a second consumption); an adapter that answers done without re-running act; a checker that misses
    the second charge."""
    records, history = _fault("prefect[crashed-retry]@3.9", "crash_resume_after_effect_act")
    verdicts = dict(zip(records["property"], records["verdict"]))
    witnesses = dict(zip(records["property"], records["witness"]))
    assert records["sigkills"][0] >= 1 and records["processes"][0] >= 3
    effects, traces = _ledger(history, "effect"), _ledger(history, "trace")
    fired = Counter((e.value["run"], e.value["task"], e.value["effect"]) for e in effects)
    consumed = Counter(t.value["run"] for t in traces if t.value.get("kind") == "consume")
    recovers = _calls(history, "recover")
    assert recovers and verdicts["liveness"] == "valid"
    for rec in recovers:
        run, label = rec.value["run"], rec.value["op"]
        assert rec.value["state"] == "done"
        ran = [t.value["node"] for t in traces if t.value.get("op") == label and t.value.get("kind") == "node"]
        assert ran == ["act", "notify"], ran  # prepare and approve: cache hits of the same flow run
        assert fired[(run, "2:act", "charge")] == 2 and fired[(run, "0:prepare", "reserve")] == 1
        assert consumed[run] == 1
    assert verdicts["EO"] == "invalid" and "charge" in witnesses["EO"]
    assert verdicts["PC"] == "valid" and verdicts["CO"] == "valid"


@pytest.mark.planted("driftlab_frameworks.prefect:PrefectAdapter.recover",  # in the env server: the adapter
                     "self._execute(run_id, fr.id, worker=False)",  # removes Prefect's locks before the retry
                     '__import__("shutil").rmtree(self.root / run_id / "locks"); '
                     "self._execute(run_id, fr.id, worker=False)")
def test_serializable_cache_retry_waits_on_the_dead_holders_lock(tmp_path):
    """The documented safe cache configuration for concurrent executions (SERIALIZABLE isolation with a
    FileSystemLockManager) together with the crashed-retry recovery: the SIGKILLed engine held the lock of act's cache
    key (Prefect's transaction takes it with no acquire or hold timeout), nothing releases it, and the retry waits on
    it forever: the env's server cuts the recovery at the call's limit, an error, never an answer; the ledger holds the
    killed call's one charge and nothing of the recovery.  This is why the lab has no row for that combination (a hang
    stops a run).  Planted bug this catches: an adapter that removes or times out Prefect's lock itself."""
    from dataclasses import replace

    from test_adapter_conformance import Cell

    from mechanisms.resume.frameworks import declared

    base = declared()["prefect[serializable-cache]@3.9"]
    d = replace(base, name="prefect[serializable-cache+crashed-retry]@3.9",
                options={"isolation": "SERIALIZABLE", "zombies": "crashed"}, aliases=())
    c = Cell(d, tmp_path)
    _, started = c.op("start", input="order-1")
    assert started["status"]["state"] == "parked"
    label, killed = c.op("resume", crash=("after_effect", "act"), value="yes")
    assert killed.get("killed") and killed["code"] == -9
    reply = c.call("recover", {"run_id": c.run}, "run-1/recover#3", timeout=15)
    assert "status" not in reply and "no answer within" in reply["error"], reply
    assert [(e.task, e.key) for e in c.effects(label)] == [("2:act", "charge")]
    assert not c.effects("run-1/recover#3") and not c.traces("run-1/recover#3", "node")
    assert list((tmp_path / f"{c.backend.namespace.lower()}prefect-results" / "run-1" / "locks").iterdir())
