"""The agent scenario file: its oracle is derived from its declared premises, and a wrong one is refused.

Each test names the planted bug it catches.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from scenarios import ScenarioError, read_toml
from scenarios.agent.loader import oracle, parse_scenario
from vocabulary.agent import CHANGE_CLASSES

SCENARIO = Path(__file__).parents[1] / "scenarios" / "agent" / "refund_agent.toml"


def raw():
    return read_toml(SCENARIO)


def test_one_change_per_class_with_the_oracle_the_rules_give():
    """Catches a scenario whose premise changes do not cover the five classes, or whose declared outcomes the
    evaluator would not derive (KEEP, REFRESH, KEEP, REPLAN, BLOCK for the refund)."""
    sc = parse_scenario(SCENARIO, raw())
    assert tuple(sc.changes) == CHANGE_CLASSES
    derived = {c: oracle(sc.premises, sc.payload, sc.state, ch.field, ch.value) for c, ch in sc.changes.items()}
    assert derived == {"irrelevant": "KEEP", "presentation": "REFRESH", "predicate_preserving": "KEEP",
                       "replanning": "REPLAN", "blocking": "BLOCK"}


def test_a_declared_outcome_the_rules_do_not_give_is_refused():
    """Catches an oracle typed in instead of derived: a blocking change declared KEEP is refused at load, naming
    the field and what the premises give."""
    data = raw()
    data["changes"]["blocking"]["expect"] = "KEEP"
    with pytest.raises(ScenarioError, match=r"changes\.blocking\.expect: declared KEEP but the declared premises "
                                            r"give BLOCK"):
        parse_scenario(SCENARIO, data)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["cases"][3].update(approvers=2), r"cases\[3\]\.crash: a crash needs approvers = 1"),
    (lambda d: d["cases"][0].update(approvers=3), r"cases\[0\]\.approvers: 3 \(expected 1, 2 or 4\)"),
    (lambda d: d["crashes"]["after_effect"].update(durability="never"), r"durability: 'never'"),
    (lambda d: d["deployments"]["prompt"].update({"prompt:refund": 7}), r"version 7 is not declared"),
])
def test_malformed_cases_are_one_line_errors(edit, message):
    """Catches a loader that accepts a case the runner cannot play (a crash among racers, k outside 1/2/4, an
    unknown durability mode, a version no one published)."""
    data = raw()
    edit(data)
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(SCENARIO, data)
