"""DBOS, LlamaIndex Workflows (both forms), Microsoft Agent Framework and Temporal under the resume harness (issue 14).

Each runs in its own uv-locked env (built from its lock on first use, then
reused), every crash a real SIGKILL of a child of the env's fork server, every
recovery a new process, verdicts from the family's checkers.  Per framework:
one fault cell (a SIGKILL after the gated effect, then recovery) and one k=2
race.  The assertions tie each verdict to what the stores hold, so that a
wrong lab (a fake kill, a lost racer, a checker or adapter that hides a
re-execution) fails, whatever the release under test does.
"""
from __future__ import annotations

from collections import Counter

import pytest
from test_adapter_conformance import env_group

RUNTIMES = ("dbos@3.4", "llamaindex[step-boundary]@2.26", "llamaindex[wait-for-event]@2.26", "agent-framework@1.23",
            "temporal@1.35")
#: frameworks whose server hands one workflow execution to one worker (DBOS's queue handoff, Temporal's matching)
ONE_EXECUTOR = ("dbos@3.4", "temporal@1.35")


def _fault(runtime: str, cell: str):
    from runners.experiment import Options
    from runners.resume import common as rc

    records, history = rc.run_fault_cell("resume_frameworks", runtime, cell, 1, 7, Options(), "sqlite")
    return records, history


def _calls(history, name: str) -> list:
    """The driver's calls named ``name`` (start, resume, recover), in history order."""
    return [op for op in history.operations if op.actor == "driver" and op.name == name]


def _ledger(history, name: str) -> list:
    """The history's entries named ``name`` (effect, trace, checkpoint)."""
    return [op for op in history.operations if op.name == name]


def judged_fault(runtime: str, cell: str = "crash_resume_after_effect_act"):
    """A framework's fault cell with the checks every fault-cell test shares: real SIGKILLs and new processes, a
    witness for every violation, EO invalid exactly when the ledger shows an effect fired twice and CO exactly when
    the interrupt consumed two values.  Returns (records, history, verdicts, witnesses, effects, traces, checkpoints,
    fired, consumed) for the test's framework-specific assertions."""
    records, history = _fault(runtime, cell)
    verdicts = dict(zip(records["property"], records["verdict"]))
    witnesses = dict(zip(records["property"], records["witness"]))
    assert records["sigkills"][0] >= 1 and records["processes"][0] >= 3
    for prop, verdict in verdicts.items():
        assert verdict != "invalid" or witnesses[prop], f"{prop} invalid without a witness"
    effects, traces, checkpoints = _ledger(history, "effect"), _ledger(history, "trace"), _ledger(history, "checkpoint")
    fired = Counter((e.value["run"], e.value["task"], e.value["effect"]) for e in effects)
    consumed = Counter(t.value["run"] for t in traces if t.value.get("kind") == "consume")
    assert (verdicts["EO"] == "invalid") == any(n > 1 for n in fired.values())
    assert (verdicts["CO"] == "invalid") == any(n > 1 for n in consumed.values())
    return records, history, verdicts, witnesses, effects, traces, checkpoints, fired, consumed


def recoveries(history, checkpoints):
    """Each recovery, with the checks every fault-cell test shares: the resume before it was SIGKILLed (indeterminate,
    signal 9) and the recovery ran in a new process.  Yields (the recovery, its run, its label, the run's durable
    frontier when it began: the highest step among the checkpoints created before it)."""
    for rec in _calls(history, "recover"):
        run, label = rec.value["run"], rec.value["op"]
        killed = [op for op in _calls(history, "resume") if op.value["run"] == run and op.index < rec.index]
        assert killed and killed[0].status == "indeterminate" and killed[0].value.get("killed_by") == 9
        assert rec.value["pid"] != killed[0].value["pid"]  # a new process
        frontier = max((c.value["step"] for c in checkpoints if c.value["run"] == run
                        and c.value["created"] < rec.start), default=-1)
        yield rec, run, label, frontier


def _fired(history, key: str) -> dict[str, int]:
    """Firings of effect ``key`` per run, read from the history's ledger entries."""
    out: dict[str, int] = {}
    for op in history.operations:
        if op.name == "effect" and op.value.get("effect") == key:
            out[op.value["run"]] = out.get(op.value["run"], 0) + 1
    return out


@pytest.mark.planted("driftlab_frameworks.protocol:KillAtPoint.point", 'os.write(self.wfd, b"R\\n")',
                     "return")  # in the env server: a 'crash' point that returns instead of dying
@pytest.mark.parametrize("runtime", [pytest.param(r, marks=env_group(r)) for r in RUNTIMES])
def test_fault_cell_sigkill_after_gated_effect(runtime):
    """SIGKILL after the gated effect (charge) of a resume, recovery in a new process: the kill is a real signal 9
    of the env's child, the run ends, and EO is invalid exactly when the ledger holds a second charge, with a witness
    naming it (planted bugs: a 'crash' that unwinds or returns instead of dying (planted), a recovery in the killed
    process, or an adapter/checker pair that hides or invents a re-execution)."""
    records, history = _fault(runtime, "crash_resume_after_effect_act")
    verdicts = dict(zip(records["property"], records["verdict"]))
    witnesses = dict(zip(records["property"], records["witness"]))
    assert records["sigkills"][0] >= 1 and records["processes"][0] >= 3
    assert verdicts["liveness"] == "valid"
    twice = any(n > 1 for n in _fired(history, "charge").values())
    assert (verdicts["EO"] == "invalid") == twice
    for prop, verdict in verdicts.items():
        assert verdict != "invalid" or witnesses[prop], f"{prop} invalid without a witness"
    if twice:
        assert "charge" in witnesses["EO"] or "email" in witnesses["EO"] or "reserve" in witnesses["EO"]


@pytest.mark.planted("driftlab_frameworks.protocol:Server.race",  # in the env server: racers' answers lost
                     'answers.append(json.loads(line) if line.endswith(b"\\n") else None)', "answers.append(None)")
@pytest.mark.parametrize("runtime", [pytest.param(r, marks=env_group(r)) for r in RUNTIMES])
def test_race_k2(runtime):
    """Two racers forked from the env's warm server resume one parked interrupt: both answer, the effects fired
    match the ledger, and where the framework's server hands a workflow to one executor (DBOS, Temporal) the gated
    effect fires once (planted bugs: racers that never overlap or whose answers are lost, or an adapter that runs
    the workflow outside the framework's own executor, which would read as double execution)."""
    from runners.experiment import Options
    from runners.resume.concurrency import race_cell

    r = race_cell("resume_frameworks", runtime, "sqlite", 2, 0.0, 1, 7, Options()).records
    assert r["indeterminate"] == [0] and r["served"][0] + r["refused"][0] + r["failed"][0] == 2
    assert r["effects_fired"][0] <= 1 or r["co_verdict"][0] == "invalid"  # a gated effect fired twice breaks CO
    if runtime in ONE_EXECUTOR:
        assert r["effects_fired"] == [1]
