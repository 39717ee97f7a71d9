"""LangGraph as a runtime of the isolation family: live aliases (the paper's default runtime) and SSI in checkpoints."""
from __future__ import annotations

import pytest

pytest.importorskip("langgraph")

from mechanisms import resolve  # noqa: E402
from runners.isolation.runtimes import LANGGRAPH_ROWS  # noqa: E402
from runners.isolation.langgraph_runtime import LangGraphRuntime, run_scenario_langgraph  # noqa: E402
from runners.isolation.workflow_runtime import judge, run_scenario, verdict_word  # noqa: E402
from scenarios import load_scenarios  # noqa: E402
from vocabulary.isolation import Manifest  # noqa: E402

SCENARIOS = load_scenarios((), family="isolation")["isolation"]


def verdicts(history) -> dict[str, str]:
    return {k: verdict_word(v) for k, v in judge(history).items()}


@pytest.mark.parametrize("program", ["fixed_schedule", "open_world", "opaque_tool"])
@pytest.mark.parametrize("row", sorted(LANGGRAPH_ROWS))
def test_langgraph_rows_match_the_profile_they_consult(row, program):
    """LangGraph resolving through live aliases admits what SRC admits; LangGraph with the SSI manifest carried in
    its checkpoints prevents what SSI prevents -- the same operations, judged by the same checkers."""
    mech = LANGGRAPH_ROWS[row]
    _, lg = run_scenario_langgraph(SCENARIOS[program], resolve(mech, "isolation")())
    _, lab = run_scenario(SCENARIOS[program], resolve(mech, "isolation")())
    assert verdicts(lg) == verdicts(lab)
    assert [(o.actor, o.name, o.status) for o in lg.operations] == [(o.actor, o.name, o.status) for o in lab.operations]


def test_default_langgraph_admits_all_four_anomalies():
    """Paper Table 3: the default runtime (live aliases) admits all four anomalies in the fixed schedule."""
    _, h = run_scenario_langgraph(SCENARIOS["fixed_schedule"], resolve("SRC", "isolation")())
    assert set(verdicts(h).values()) == {"occurs"}


class ForgetfulResume(LangGraphRuntime):
    """Planted bug: a resume that starts the workflow's thread anew (the manifest is not taken from the checkpoint)."""

    def resume(self, wid: str) -> None:
        super().resume(wid)
        if self.workflows[wid].state == "running":
            self.app.update_state(self._cfg(wid), {"manifest": Manifest().to_json()}, as_node="step")


def test_ssi_prevention_rests_on_the_checkpointed_manifest():
    """With the manifest dropped at resume, SSI on LangGraph shows semantic read skew: the row's prevention comes
    from LangGraph's checkpoint carrying the manifest, and a runtime that loses it is caught."""
    reg = SCENARIOS["fixed_schedule"].registry()
    rt = ForgetfulResume(reg, resolve("SSI", "isolation")())
    try:
        rt.run(SCENARIOS["fixed_schedule"].steps)
    finally:
        rt.close()
    from runners.isolation.workflow_runtime import history_meta, to_history

    h = to_history(rt.ops, history_meta(reg, SCENARIOS["fixed_schedule"].contracts))
    assert verdicts(h)["semantic_read_skew"] == "occurs"
