"""Agno 3.1 (requires_confirmation paused, continue_run from its SQLite or PostgreSQL db in a new process).

Two rows: Agno's default (``agno@3.1``, ``checkpoint="runs"``) and its durable setting (``agno[tool-batch]@3.1``,
``checkpoint="tool-batch"``).  The env is built from its lock on first use (``data/envs/agno-3.1``), every crash is a
real SIGKILL of a child of the env's fork server and every recovery a new process.  Per row: one fault cell (a
SIGKILL after the gated effect of a resume, then recovery), a k=2 race on SQLite and on PostgreSQL, and a SIGKILL
before notify (where the rows differ), as ``test_resume_framework_crewai.py`` does; the assertions tie each verdict
to what the ledger and Agno's ``agno_runs`` row hold, so that a wrong lab or adapter fails, whatever the release
under test does.
"""
from __future__ import annotations

import pytest
from test_adapter_conformance import env_group
from test_resume_framework_adapters import _calls, _ledger, judged_fault, recoveries

RUNTIMES = ("agno@3.1", "agno[tool-batch]@3.1")
pytestmark = env_group(RUNTIMES[0])  # on the worker that holds the env's servers




@pytest.mark.planted("analysis.resume.checkers:EffectExactlyOnce.judge", "if len(rows) > 1:", "if len(rows) > 2:")
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_fault_cell_sigkill_after_gated_effect(runtime):
    """SIGKILL after the gated effect (charge) of a resume, recovery in a new process, then the lab's retry of the
    resume when the run is parked again.  The kill is a real signal 9 of the resume's own process.  In both rows
    nothing was written between the pause and the kill (the default writes a run at its terminal states only; the
    tool-batch checkpoint writes the confirmed tool's result only with the next turn's, and act's turn never ended),
    so the stored run is still PAUSED with its requirement unanswered: the recovery runs nothing and answers parked,
    and the retried resume runs approve, act and notify again.  Each verdict is tied to the ledger: EO is invalid
    exactly when some effect fired twice, CO exactly when the interrupt consumed more than one value, PC exactly when
    a call after the kill ran a node below the frontier the checkpoints had when it began (planted bugs: a 'crash'
    that unwinds instead of dying; a recovery in the killed process; an adapter that reads a checkpoint Agno never
    committed and continues past the interrupt without the human's answer; a checker that misses a second firing or
    consumption)."""
    records, history, verdicts, witnesses, effects, traces, checkpoints, fired, consumed = judged_fault(
        runtime)
    assert verdicts["liveness"] == "valid"
    below = False
    recovers = _calls(history, "recover")
    assert recovers
    for rec, run, label, frontier in recoveries(history, checkpoints):
        assert fired[(run, "2:act", "charge")] >= 1  # the killed resume's charge is in the ledger
        assert frontier == 1  # the pause (prepare's result, approve's requirement): nothing after it was written
        # the recovery runs nothing: the stored run waits for its confirmation
        assert rec.value["state"] == "parked" and not [t for t in traces if t.value.get("op") == label]
        retry = [op for op in _calls(history, "resume") if op.value["run"] == run and op.index > rec.index]
        assert retry and retry[0].value["state"] == "done"
        mine = [t.value["node"] for t in traces if t.value.get("op") == retry[0].value["op"]
                and t.value.get("kind") == "node"]
        assert mine == ["approve", "act", "notify"]
        below = below or any(t.value["step"] < frontier for t in traces if t.value.get("kind") == "node"
                             and t.value.get("op") in (label, retry[0].value["op"]))
        assert fired[(run, "2:act", "charge")] == 2 and fired[(run, "0:prepare", "reserve")] == 1
        assert consumed[run] == 2
    assert (verdicts["PC"] == "invalid") == below


@pytest.mark.planted("driftlab_frameworks.agno:AgnoAdapter.resume", "if not mine:", "if True:")  # invented refusal
@pytest.mark.parametrize("backend", ("sqlite", "postgres"))
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_race_k2(runtime, backend, request):
    """Two racers forked from the env's warm server answer one paused run at one barrier: both answer, and every
    gated firing and every consumption in the ledger carries the label of the racer that made it.  Each racer
    loads the PAUSED run and confirms its requirement on its own copy (RunRequirement.confirm checks the copy, not
    the store; SqliteDb and PostgresDb upsert the run row without a check of what the other racer wrote), so a
    racer that loaded the run before the other's continuation wrote it is served too: each served racer consumed
    once and charged once (or, when Agno's continuation found the tool already run, neither: silently accepted, CO
    invalid), and answers the store's head when it returned (done, or parked when the other racer's
    row was written last); a refused one is Agno's own 'This requirement does not require confirmation' (it loaded
    the row the other's continuation wrote) with nothing of its own in the ledger.  Which a racer gets depends on
    timing (this lab's k=2 runs mostly served both; the quick profile saw refusals on PostgreSQL); CO and EO judge
    exactly what the ledger holds (planted bugs: racers that never answer or whose answers are lost; a refusal
    invented by the adapter instead of Agno's own; an adapter that runs a node itself, which would charge without a
    consumption of its own; a checker that misses two consumptions of one interrupt)."""
    from runners.experiment import Options
    from runners.resume.concurrency import race_cell

    if backend == "postgres":
        request.getfixturevalue("pg_dsn")  # skips (or fails, if required) without a reachable PostgreSQL
    out = race_cell("resume_frameworks", runtime, backend, 2, 0.0, 1, 7, Options())
    r, history = out.records, out.history
    assert history.meta.get("backend") == backend, history.meta
    assert r["indeterminate"] == [0] and r["served"][0] + r["refused"][0] == 2, r
    racers = [op for op in history.operations if op.actor.startswith("racer-")]
    consumed = [op for op in _ledger(history, "trace") if op.value.get("kind") == "consume"]
    charged = [op for op in _ledger(history, "effect") if op.value.get("effect") == "charge"]
    assert len(racers) == 2 and len(charged) == r["effects_fired"][0] == len(consumed)
    # EO's rule: an effect fired twice, or a finished run one of whose effects never fired (a racer's row written over
    # the other's can finish the run without its notify: a lost effect)
    fired = [(e.value["task"], e.value["effect"]) for e in _ledger(history, "effect")]
    done = any(cp.value["next"] is None for cp in _ledger(history, "checkpoint"))
    lost = done and len(set(fired)) < 3  # prepare's, the charge and the email
    assert (r["eo_verdict"][0] == "invalid") == (len(fired) > len(set(fired)) or lost), (fired, done)
    inert = False
    for racer in racers:
        label = racer.value["op"]
        mine_c = [t for t in consumed if t.value["op"] == label]
        mine_e = [e for e in charged if e.value["op"] == label]
        if racer.value["state"] == "refused":
            assert "does not require confirmation" in racer.value["reason"] and not mine_c and not mine_e
        else:
            # its answer is the store's head when it returned: done, or the other racer's newer row (Agno upserts the
            # run row by run id: a tool-batch checkpoint of the other racer may overwrite a completed row)
            assert racer.value["state"] in ("done", "parked") and len(mine_c) == len(mine_e) <= 1, racer.value
            # served without consuming (continue_run found the tool already run): silently accepted if the value
            # was already consumed when it answered (CO's rule)
            inert = inert or (not mine_c and any(racer.end is None or t.value["at"] <= racer.end for t in consumed))
    assert (r["co_verdict"][0] == "invalid") == (len(consumed) > 1 or inert)
    assert r["served"][0] >= 1 and r["effects_fired"] == [len(charged)], r


@pytest.mark.planted("driftlab_frameworks.protocol:KillAtPoint.point", 'os.write(self.wfd, b"R\\n")',
                     "return")  # in the env server: a 'crash' point that returns instead of dying
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_sigkill_before_notify_default_vs_tool_batch(runtime, tmp_path):
    """Where the two rows differ: a SIGKILL before notify of a resume (act's charge fired, act's turn over).  With
    the default (checkpoint="runs") nothing was written since the pause: the stored run is PAUSED with its
    requirement unanswered, the recovery runs nothing and answers parked, and the answered-again resume runs
    approve and act again (a second consumption, a second charge).  With checkpoint="tool-batch" act's turn was
    written (status RUNNING): the recovery is Agno's mid-flight continue_run, which runs notify only (one
    consumption, one charge).  Planted bugs: a recovery that treats a RUNNING row as paused (it would answer parked
    for tool-batch), or one that continues a PAUSED row without the human's answer (it would run act for the
    default); a kill that unwinds or returns instead of dying (the killed call would answer; planted)."""
    from test_adapter_conformance import Cell

    from mechanisms.resume.frameworks import declared

    c = Cell(declared()[runtime], tmp_path)
    _, started = c.op("start", input="order-1")
    assert started["status"]["state"] == "parked"
    killed_label, killed = c.op("resume", crash=("before_node", "notify"), value="yes")
    assert killed.get("killed") and killed["code"] == -9, killed
    assert [e.key for e in c.effects(killed_label)] == ["charge"]
    rlabel, rec = c.op("recover")
    ran = [t.node for t in c.traces(rlabel, "node")]
    if runtime == "agno@3.1":
        assert rec["status"]["state"] == "parked" and rec["status"]["node"] == "approve" and ran == []
        again, done = c.op("resume", value="yes")
        assert done["status"]["state"] == "done"
        assert [t.node for t in c.traces(again, "node")] == ["approve", "act", "notify"]
        assert sorted(e.key for e in c.effects()) == ["charge", "charge", "email", "reserve"]
        assert len(c.traces(kind="consume")) == 2
    else:
        assert rec["status"]["state"] == "done" and ran == ["notify"]
        assert sorted(e.key for e in c.effects()) == ["charge", "email", "reserve"]
        assert len(c.traces(kind="consume")) == 1
