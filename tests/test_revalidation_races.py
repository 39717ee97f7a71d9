"""Race pairs and cross-resource histories on real SQLite and PostgreSQL (ATR paper §5, "Races").

Every test runs the literal interleavings of ``faults/races.py`` through the
interpreter: actor processes with their own connections, the database
deciding.  The ``unchecked`` binding (the token ignored) shows the pair
assertion can fail; a deliberately wrong inline expectation shows the
step-by-step check can fail.
"""
from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from analysis.revalidation_races import report, table
from faults.races import (CROSS_RESOURCE, HISTORIES, POLICY_CHANGE_IN_FLIGHT, RACE_PAIR, Step, by_binding,
                          expected_commits)
from runners.experiment import Options
from runners.experiments.revalidation_races import RevalidationRaces
from runners.interleaving import Interpreter
from runners.race_store import open_store


class Lab:
    """One database for a test module; one interpreter (its actor processes) per binding."""

    def __init__(self, backend: str, dsn: str | None = None):
        self.store = open_store(backend, dsn)
        self.interpreters: dict[str, Interpreter] = {}
        self.case = 0

    def run(self, history, binding: str, n: int = 1):
        if binding not in self.interpreters:
            self.interpreters[binding] = Interpreter(self.store, binding)
        out = []
        for _ in range(n):
            self.case += 1
            out.append(self.interpreters[binding].run(history, self.case))
        return out

    def close(self) -> None:
        for interpreter in self.interpreters.values():
            interpreter.close()
        self.store.drop()


@pytest.fixture(scope="module")
def sqlite_lab():
    lab = Lab("sqlite")
    yield lab
    lab.close()


@pytest.fixture(scope="module")
def pg_lab(pg_dsn):
    lab = Lab("postgres", pg_dsn)
    yield lab
    lab.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def lab(request):
    return request.getfixturevalue("sqlite_lab" if request.param == "sqlite" else "pg_lab")


def _explain(executions) -> str:
    bad = [x for x in executions if not x.as_expected or x.errors]
    return "; ".join(f"case {x.case}: {x.mismatch} {x.errors}" for x in bad[:3])


# ------------------------------------------------------------------ race pairs
def test_race_pairs_commit_exactly_once(lab):
    runs = lab.run(RACE_PAIR, "target_cas", n=100)
    assert [x.effects for x in runs] == [1] * 100  # refunds on the target row, read from the database
    assert all(x.commits_reported == 1 and x.rejections == 1 for x in runs)
    assert all(x.as_expected for x in runs), _explain(runs)


def test_a_commit_that_ignores_the_token_refunds_twice(lab):
    """The broken control: the same race with the token ignored breaks 'exactly one' in every pair."""
    runs = lab.run(RACE_PAIR, "unchecked", n=20)
    assert [x.effects for x in runs] == [2] * 20
    assert all(x.as_expected for x in runs), _explain(runs)


@pytest.mark.postgres
def test_postgres_race_attempts_really_overlap(pg_lab):
    """The two commit transactions are in flight at the same time (the second waits on the row lock)."""
    runs = pg_lab.run(RACE_PAIR, "target_cas", n=30)
    overlapping = 0
    for x in runs:
        a, b = next(s for s in x.steps if s.op == "together").members
        overlapping += min(a.end_ns, b.end_ns) > max(a.start_ns, b.start_ns)
    assert overlapping >= 10


# ------------------------------------------------------- cross-resource histories
@pytest.mark.parametrize("history", CROSS_RESOURCE, ids=lambda h: h.name)
def test_target_only_cas_commits_and_the_policy_token_rejects(lab, history):
    (unsafe,) = lab.run(history, "target_cas")
    (checked,) = lab.run(history, "policy_token")
    assert unsafe.effects == 1 and unsafe.commits_reported == 1  # a false allow: the policy was false at commit
    assert checked.effects == 0 and checked.rejections == 1
    assert unsafe.as_expected and checked.as_expected, _explain([unsafe, checked])


def test_the_policy_token_waits_for_a_policy_change_in_flight_then_rejects(lab):
    (x,) = lab.run(POLICY_CHANGE_IN_FLIGHT, "policy_token")
    assert [s.result for s in x.steps if s.actor == "agent" and s.op in ("commit", "await")] == ["blocks", "rejected"]
    assert x.effects == 0 and x.as_expected, _explain([x])


# ------------------------------------------------------ the literal interleavings
@pytest.mark.parametrize("name, binding", [(h.name, b) for h in HISTORIES.values() for b in h.bindings])
def test_every_step_meets_its_inline_expectation(lab, name, binding):
    history = HISTORIES[name]
    (x,) = lab.run(history, binding)
    assert len(x.steps) == len(history.steps)
    for result in x.steps:
        assert result.ok, f"{name}/{binding}: {result.describe()}"
    assert x.effects == expected_commits(history, binding) and not x.errors


def test_a_wrong_inline_expectation_is_reported(sqlite_lab):
    steps = list(CROSS_RESOURCE[0].steps)
    commit = next(i for i, s in enumerate(steps) if s.op == "commit")
    steps[commit] = Step("agent", "commit", expect=by_binding(target_cas="committed", policy_token="committed"))
    (x,) = sqlite_lab.run(replace(CROSS_RESOURCE[0], steps=tuple(steps)), "policy_token")
    assert not x.as_expected and x.mismatch.startswith("agent commit: got 'rejected'")


# ------------------------------------------------------------- experiment end to end
def test_cells_records_and_table():
    experiment = RevalidationRaces()
    options = Options(extra={"repetitions": 3})
    cells = experiment.cells("quick", 1, options)
    wanted = {("race_pair", "target_cas"), ("limit_drops", "target_cas"), ("limit_drops", "policy_token")}
    frames = []
    for cell in cells:
        if (cell.p["history"], cell.p["binding"]) in wanted:
            frame = pd.DataFrame(experiment.run_cell(cell, options))
            for key, value in cell.params:
                frame[key] = value
            frames.append(frame)
    records = pd.concat(frames, ignore_index=True)
    tab = table(records).set_index(["history", "binding"])
    assert tab.loc[("race_pair", "target_cas"), "one_commit"] == 3
    assert tab.loc[("all", "target_cas"), "false_allows"] == 3
    assert tab.loc[("all", "policy_token"), ["rejections", "false_allows"]].tolist() == [3, 0]
    section = report(table(records), records)
    assert any(r["metric"].endswith("pairs with exactly one commit") and r["ours"].startswith("3 of 3") for r in section.rows)
