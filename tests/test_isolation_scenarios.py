"""Isolation scenario files: the built-in ones load; malformed ones are refused in one line naming file and field."""
from __future__ import annotations

import pytest

from scenarios import ScenarioError, load_scenarios
from scenarios.isolation.loader import parse_scenario

GOOD = {"family": "isolation", "name": "x", "contracts": ["index:docs@1 requires model:embed@1"],
        "steps": ["T1 start", "T1 resolve model:embed", "deploy model:embed@2", "T1 child C", "C resolve model:embed"],
        "registry": {"model:embed": {"versions": [1], "live": 1}, "index:docs": {"versions": [1]}}}


def test_builtin_scenarios_load():
    found = load_scenarios((), family="isolation")["isolation"]
    assert {"witness_read_skew", "witness_compatibility_skew", "witness_context_escape", "witness_merge_skew",
            "fixed_schedule", "open_world", "omission_pipeline"} <= set(found)
    assert {s.anomaly for s in found.values() if s.anomaly} == {"semantic_read_skew", "compatibility_skew",
                                                                 "context_escape", "merge_skew"}


@pytest.mark.parametrize("change,field", [
    ({"name": "Bad Name"}, "name"),
    ({"anomaly": "dirty_read"}, "anomaly"),
    ({"registry": {"model embed": {"versions": [1]}}}, "registry.model embed"),
    ({"registry": {"model:embed": {"versions": [1], "live": 3}}}, "registry.model:embed.live"),
    ({"contracts": ["index:docs@1 needs model:embed@1"]}, "contracts[0]"),
    ({"contracts": ["index:docs@1 requires tool:x@1"]}, "contracts[0]"),
    ({"steps": ["T1 start", "T1 jump"]}, "steps[1]"),
    ({"steps": ["T1 resolve model:embed"]}, "steps"),  # acts before it was started
    pytest.param({"steps": ["T1 start", "T1 pause", "T1 resolve model:embed"]}, "steps",  # paused
                 marks=pytest.mark.planted("scenarios.isolation.loader:_check_program",  # a paused workflow acts
                                           'if state[s.actor] != "running":', 'if state[s.actor] == "ended":')),
    ({"steps": ["T1 start", "T1 merge X"]}, "steps"),  # not a fork of T1
    ({"steps": ["T1 start", "deploy model:embed@0"]}, "steps[1]"),
    ({"steps": ["T1 start", "T1 resolve tool:none"]}, "steps"),
    ({"late": ["tool:none"]}, "late"),
    ({"colour": "blue"}, "colour"),
])
def test_malformed_scenarios_are_refused_in_one_line(change, field):
    """Planted bug caught: a parser that accepts an impossible program (it would crash the runtime mid-run;
    planted on the paused workflow's row: a paused workflow that resolves)."""
    raw = {**GOOD, **change}
    with pytest.raises(ScenarioError) as err:
        parse_scenario("bad.toml", raw)
    msg = str(err.value)
    assert msg.startswith(f"bad.toml: {field}: ") and "\n" not in msg


def test_a_users_folder_adds_a_scenario(tmp_path):
    (tmp_path / "mine.toml").write_text('family = "isolation"\nname = "mine"\nsteps = ["T1 start", "T1 resolve prompt:p"]\n'
                                        '[registry]\n"prompt:p" = { versions = [1, 2], live = 2 }\n')
    found = load_scenarios((tmp_path,), family="isolation")["isolation"]
    assert found["mine"].live == {"prompt:p": 2}
