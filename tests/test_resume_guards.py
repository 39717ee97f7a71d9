"""``resume_guards``: LangGraph + each guard a user can install, judged on what it claims (issue 26 §4).

Real LangGraph, real resume-guard 1.0.0 and agent-ledger 0.2.1 adopted as their READMEs say, real SIGKILLs,
recoveries in new processes, k racing processes; the analysis on synthetic records for the counting rules.  Each
test names the bug class it catches.
"""
from __future__ import annotations

import pandas as pd
import pytest

from analysis.resume import guards


def _fault(runtime: str, cell: str, backend: str):
    from runners.experiment import Options
    from runners.resume import common as rc

    records, _history = rc.run_fault_cell("resume_guards", runtime, cell, 1, 7, Options(), backend)
    return pd.DataFrame(records)


@pytest.mark.parametrize("runtime, backend", [
    pytest.param("langgraph+resume-guard", "sqlite", marks=pytest.mark.planted(  # the effect fired beside the guard
        "mechanisms.resume.effect_guards:LangGraphResumeGuardRuntime.fire_effect",
        'self._effects().run_effect(run_id, "", task, key, "lab-effect", call)', 'call("beside the guard")')),
    pytest.param("langgraph+agent-ledger", "postgres", marks=pytest.mark.postgres)])
def test_an_effect_ledger_keeps_the_killed_nodes_effect_to_one(runtime, backend, request):
    """SIGKILL after the gated effect, recovery in a new process: the ledger hands the recorded result back and
    the effect fires once (stock LangGraph fires it twice in the same cell).

    Planted bugs caught: an adapter that fires the effect beside the guard instead of through it (EO would be
    violated, as for stock LangGraph; planted on resume-guard's row), a guard whose ledger lives in the killed
    process's memory."""
    if backend == "postgres":
        request.getfixturevalue("pg_dsn")
    t = _fault(runtime, "crash_resume_after_effect_act", backend)
    eo = t[t["property"] == "EO"]
    assert set(eo["verdict"]) == {"valid"} and int(eo["sigkills"].iloc[0]) >= 1
    assert (eo["effects_fired"] == eo["effects_expected"]).all()


@pytest.mark.planted("faults.resume.sigkill:KillAtPoint.point", "(name, node) == tuple(self.crash)",
                     '(name, node) == ("before_node", self.crash[1])')  # the kill lands before act, not after it
def test_stock_langgraph_in_the_same_cell_fires_twice():
    """The control: the same cell on stock LangGraph re-runs the killed node's effect (so the test above can fail).

    Planted bug caught: a cell whose kill lands where no effect is at stake (every row would pass)."""
    t = _fault("langgraph", "crash_resume_after_effect_act", "sqlite")
    assert "invalid" in set(t.loc[t["property"] == "EO", "verdict"])


def rec(runtime, covers, prop, verdict, *, k=0, cell="c1", fired=1):
    return {"runtime": runtime, "covers": covers, "adoption_lines": "3", "fault_cell": cell, "cell": f"{runtime}/{cell}",
            "k": k, "repetition": 0, "property": prop, "verdict": verdict, "co_inert": verdict, "witness": "w.",
            "effects_fired": fired}


@pytest.mark.planted("analysis.resume.guards:table", "if prop in cov else NOT_COVERED",
                     "if True else NOT_COVERED")  # judged on every property
@pytest.mark.planted("analysis.resume.guards:table", 'faults = t[(t["k"] == 0) & t["property"].isin(cov)]',
                     'faults = t[(t["k"] == 0)]')  # the fault-cell count including the uncovered property
@pytest.mark.planted("analysis.resume.guards:table", "if prop in cov else NOT_COVERED",
                     'if prop in cov and prop != "CO" else NOT_COVERED')  # a claimed property's violation hidden
def test_a_property_outside_the_guards_claim_is_not_covered_never_violated():
    """Bug classes: an effect ledger scored as violating consume-once (a property it never claims); its fault-cell
    count including the uncovered property; a claimed property's violation hidden by the same rule."""
    records = pd.DataFrame([rec("ledger", "EO,liveness", "EO", "valid"), rec("ledger", "EO,liveness", "CO", "invalid"),
                            rec("ledger", "EO,liveness", "liveness", "valid"),
                            rec("full", "PC,EO,FD,CV,CO,RD,liveness", "CO", "invalid"),
                            rec("full", "PC,EO,FD,CV,CO,RD,liveness", "EO", "valid")])
    tab = guards.table(records).set_index("runtime")
    assert tab.loc["ledger", "CO"] == guards.NOT_COVERED and tab.loc["ledger", "EO"] == "holds"
    assert tab.loc["ledger", "fault_cells_violated"] == 0
    assert tab.loc["full", "CO"] == "violates" and tab.loc["full", "fault_cells_violated"] == 1
    found = {f.subject: f.text for f in guards.findings(tab.reset_index(), records)}
    assert found["ledger"].startswith("claims only EO, liveness: holds everything it claims")
    assert "breaks CO" in found["full"]


@pytest.mark.planted("analysis.resume.guards:table", 'races = t[(t["k"] > 0)].drop_duplicates(subset=["cell", "repetition"])',
                     'races = t[(t["k"] > 0)]')  # a race counted once per property row
def test_saturation_is_over_races_once_each():
    """Bug class: a race counted once per property row (its saturation weighted by the number of properties)."""
    records = pd.DataFrame([rec("g", "EO", p, "valid", k=2, cell="race", fired=f) for p, f in (("EO", 1), ("CO", 1))]
                           + [rec("g", "EO", "EO", "valid", k=4, cell="race4", fired=4)])
    tab = guards.table(records).set_index("runtime")
    assert tab.loc["g", "races"] == 2 and tab.loc["g", "saturation_mean"] == pytest.approx((0.5 + 1.0) / 2)
