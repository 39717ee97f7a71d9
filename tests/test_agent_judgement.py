"""The agent family's judgement and counting rules, on literal histories and records.

Each test names the planted bug it catches; nothing here runs a process.
"""
from __future__ import annotations

import pandas as pd
import pytest

from analysis.agent.checkers import CHECKERS, Completes, failures, judge
from analysis.agent.matrix import agreement, independence, table
from vocabulary import History, Operation, Verdict
from vocabulary.agent import FAILURES, NEEDLESS_REPLAN, NEVER_COMPLETES, STACKS, STALE_RELEASE, resume_graph


def history(*ops: tuple) -> History:
    """Operations as (name, status, value) triples, with the agent's graph in the header."""
    return History("agent", tuple(Operation(i, "a", name, status, float(i), None if status == "indeterminate"
                                            else float(i) + 0.5, value) for i, (name, status, value) in enumerate(ops)),
                   {"graph": resume_graph(), "contracts": [], "versions": {}})


def cp(step: int, t: float) -> tuple:
    return ("checkpoint", "ok", {"run": "r0", "step": step, "created": t, "values": {}, "group": "0"})


def test_completes_flags_a_recovery_that_parks_again():
    """Catches a judgement that takes a recovery's answer for completion: the approval was consumed by a killed
    resume, the recovery parked the run again, so the run is not done (invalid, witness names the calls)."""
    h = history(("start", "ok", {"run": "r0", "op": "start", "state": "parked"}),
                ("resume", "indeterminate", {"run": "r0", "op": "resume#1"}),
                ("recover", "ok", {"run": "r0", "op": "recover#1", "state": "parked"}), cp(1, 1.0))
    r = Completes().check(h)
    assert r.verdict is Verdict.INVALID
    assert "resume#1 indeterminate" in r.witnesses[0].explanation and "1 of 4" in r.witnesses[0].explanation


def test_completes_is_unknown_when_the_last_call_died_and_valid_when_done():
    """Catches a checker that counts unknown as valid, or flags a finished run: a run whose last call died is
    unknown; a run whose head has every node done is valid."""
    died = history(("start", "ok", {"run": "r0", "op": "start", "state": "parked"}),
                   ("resume", "indeterminate", {"run": "r0", "op": "resume#1"}), cp(1, 1.0))
    assert Completes().check(died).verdict is Verdict.UNKNOWN
    done = history(("start", "ok", {"run": "r0", "op": "start", "state": "parked"}),
                   ("resume", "ok", {"run": "r0", "op": "resume#1", "state": "done"}), cp(1, 1.0), cp(4, 2.0))
    assert Completes().check(done).verdict is Verdict.VALID


def release(oracle: str, outcome: str, released: bool, stale: bool = False) -> History:
    return history(("release", "ok", {"group": "0", "oracle": oracle, "outcome": outcome, "released": released,
                                      "payload_stale": stale, "mechanism": "m"}))


@pytest.mark.parametrize("oracle, outcome, released, stale, expect", [
    ("BLOCK", "KEEP", True, False, STALE_RELEASE),
    ("REPLAN", "KEEP", True, False, STALE_RELEASE),
    ("REFRESH", "KEEP", True, True, STALE_RELEASE),
    ("KEEP", "REPLAN", False, False, NEEDLESS_REPLAN),
    ("REFRESH", "BLOCK", False, False, NEEDLESS_REPLAN),
    ("KEEP", "KEEP", True, False, None),
    ("REFRESH", "REFRESH", True, False, None),
    ("BLOCK", "BLOCK", False, False, None),
])
def test_oracle_disagreements_are_split_into_stale_releases_and_needless_replans(oracle, outcome, released, stale,
                                                                                 expect):
    """Catches a counting rule that files a safe action's replan as a stale release (or the reverse), or counts an
    agreeing decision at all: each disagreement lands in exactly one column, agreements in none."""
    found = failures(release(oracle, outcome, released, stale))
    bad = {f for f in (STALE_RELEASE, NEEDLESS_REPLAN) if found[f]["verdict"] == "invalid"}
    assert bad == ({expect} if expect else set())


def test_the_agent_runs_every_familys_checkers_through_the_registry():
    """Catches a composition that drops a family: the agent's checkers are the three families' (by the shared
    registry) and its own, and judge() answers for every failure column's checker."""
    families = {name.split("/")[0] for name in CHECKERS if "/" in name}
    assert families == {"revalidation", "isolation", "resume"} and "completes" in CHECKERS
    results = judge(release("KEEP", "KEEP", True))
    assert set(failures(release("KEEP", "KEEP", True), results)) == set(FAILURES)


def records(counts: dict) -> pd.DataFrame:
    """One record per (stack, failure) with the given verdict; every other failure valid."""
    rows = []
    for stack in STACKS:
        row = {"backend": "sqlite", "stack": stack, "case": "c", "repetition": 0, "change": "blocking",
               "oracle": "BLOCK", "outcome": "BLOCK"}
        for f in FAILURES:
            row[f] = counts.get((stack, f), "valid")
            row[f"{f}_witness"] = "w" if row[f] == "invalid" else ""
        rows.append(row)
    return pd.DataFrame(rows)


def test_independence_flags_a_layer_that_leaks_its_own_failure_and_one_that_removes_anothers():
    """Catches a matrix that would call a stack independent when a layer leaves one of its own failures (once
    still double-fires) or removes another layer's (pinning hides a stale release)."""
    from vocabulary.agent import expected_failures
    shows = {(s, f): "invalid" for s in STACKS for f in expected_failures(s)}
    assert independence(table(records(shows))) == []
    leak = {**shows, ("once", "double_effect"): "invalid"}
    hide = {k: v for k, v in shows.items() if k != ("pinning", STALE_RELEASE)}
    assert independence(table(records(leak))) == [("sqlite", "once", "double_effect", 1)]
    assert independence(table(records(hide))) == [("sqlite", "pinning", STALE_RELEASE, 0)]


def test_agreement_counts_false_allows_and_blocks_of_premises_stacks_only():
    """Catches an agreement count that mixes in the stacks without the premises layer, or swaps allows and
    blocks."""
    rec = pd.DataFrame([
        {"backend": "sqlite", "stack": "premises", "change": "blocking", "oracle": "BLOCK", "outcome": "KEEP"},
        {"backend": "sqlite", "stack": "once+premises", "change": "irrelevant", "oracle": "KEEP", "outcome": "REPLAN"},
        {"backend": "sqlite", "stack": "premises", "change": "presentation", "oracle": "REFRESH", "outcome": "REFRESH"},
        {"backend": "sqlite", "stack": "stock", "change": "blocking", "oracle": "BLOCK", "outcome": "KEEP"},
    ])
    got = agreement(rec).iloc[0]
    assert (got["decisions"], got["agree"], got["false_allows"], got["false_blocks"]) == (3, 1, 1, 1)
    assert NEVER_COMPLETES in FAILURES


def test_failures_beyond_stock_name_the_execution_and_what_stock_came_to():
    """Catches a report that would let a failure a layer uncovered pass as one the layer caused: the once layer
    completes a run stock never completed, so its read skew there is listed with "stock never completed there"."""
    from analysis.agent.matrix import beyond_stock

    rows = []
    for stack, skew, never in (("stock", "valid", "invalid"), ("once", "invalid", "valid")):
        row = {"backend": "sqlite", "stack": stack, "case": "crash_consumed", "repetition": 0}
        row.update({f: "valid" for f in FAILURES})
        row.update(read_skew=skew, never_completes=never)
        rows.append(row)
    assert beyond_stock(pd.DataFrame(rows)) == [
        "sqlite/once/read_skew in crash_consumed#0 (stock never completed there)"]
