"""Every place that aggregates verdicts keeps ``unknown`` apart from ``valid``/``holds``.

Bug class (issue 16 §7): ``unknown`` folded into ``holds`` / ``valid`` anywhere a verdict is aggregated: the
lab-wide order and composite, ``driftlab check``'s exit code, the resume folds and tables, the isolation matrix
words, and the revalidation tables' verdict counts.
"""
from __future__ import annotations

import itertools

import pandas as pd
import pytest

import analysis.resume.faults as faults
import analysis.revalidation.durable as durable
import analysis.revalidation.races as races
from analysis.resume.verdicts import HOLDS, NA, UNKNOWN, VIOLATED, by_property, fold, worst_verdict
from runners.isolation.workflow_runtime import verdict_word
from vocabulary import CheckResult, Composite, Verdict, worst

V, U, I = Verdict.VALID, Verdict.UNKNOWN, Verdict.INVALID


@pytest.mark.parametrize("verdicts", [p for n in range(1, 4) for p in itertools.product((V, U, I), repeat=n)])
def test_worst_is_the_most_severe_in_any_order(verdicts):
    """``worst`` keeps invalid over unknown over valid, whatever the order (a fold that keeps the first, the
    last or the best fails)."""
    expect = I if I in verdicts else U if U in verdicts else V
    assert worst(verdicts) is expect and worst(iter(verdicts)) is expect


def test_order_and_exit_codes():
    assert worst([]) is V
    assert [v.rank for v in (V, U, I)] == [0, 1, 2]
    assert [v.exit_code for v in (V, I, U)] == [0, 1, 2]  # driftlab check: unknown is never exit 0


class _Fixed:
    family = "test"

    def __init__(self, name, verdict):
        self.name, self.verdict = name, verdict

    def check(self, history):
        return CheckResult(self.name, self.verdict)


def test_composite_keeps_the_worst_and_every_result():
    verdict, results = Composite([_Fixed("a", V), _Fixed("b", U), _Fixed("c", V)]).check_all(None)
    assert verdict is U and [r.checker for r in results] == ["a", "b", "c"]
    assert Composite([_Fixed("a", U), _Fixed("b", I)]).check_all(None)[0] is I


@pytest.mark.parametrize("verdicts,folded,worst_", [
    (["valid", "valid"], HOLDS, "valid"),
    (["valid", "unknown"], UNKNOWN, "unknown"),
    (["unknown", "valid"], UNKNOWN, "unknown"),
    (["unknown", "invalid", "valid"], VIOLATED, "invalid"),
    (["not applicable"], NA, "not applicable"),
    (["not applicable", "unknown"], UNKNOWN, "unknown"),
    (["not applicable", "valid"], HOLDS, "valid"),
])
def test_resume_folds(verdicts, folded, worst_):
    """The resume family's folds over repetitions and cells: unknown never holds, invalid always wins."""
    assert fold(verdicts) == folded
    assert worst_verdict(verdicts) == worst_


def test_by_property_folds_per_row_and_names_the_first_violating_cell():
    records = pd.DataFrame([
        {"runtime": "r", "property": "EO", "verdict": "valid", "fault_cell": "c1", "witness": ""},
        {"runtime": "r", "property": "EO", "verdict": "unknown", "fault_cell": "c2", "witness": ""},
        {"runtime": "r", "property": "PC", "verdict": "valid", "fault_cell": "c1", "witness": ""},
        {"runtime": "r", "property": "CO", "verdict": "invalid", "fault_cell": "c3", "witness": "w3"},
        {"runtime": "r", "property": "CO", "verdict": "invalid", "fault_cell": "c4", "witness": "w4"},
    ])
    tab = by_property(records, "runtime", "runtime")
    assert list(tab.columns) == ["runtime", "property", "verdict", "witness_cell", "witness"]
    assert list(tab.index) == [0, 1, 2]
    assert list(tab["property"]) == ["PC", "EO", "CO"]  # the paper's order
    got = {p: (v, c, w) for p, v, c, w in zip(tab["property"], tab["verdict"], tab["witness_cell"], tab["witness"])}
    assert got == {"PC": (HOLDS, "", ""), "EO": (UNKNOWN, "", ""), "CO": (VIOLATED, "c3", "w3")}


def test_resume_fault_matrix_keeps_unknown_apart():
    """The fault matrix's verdict (worst over repetitions) and its report cell: an unknown repetition is never
    shown as 'holds'."""
    base = {"runtime": "seq", "crash_point": "p", "operation": "resume", "effects_fired": 1, "effects_expected": 1,
            "sigkills": 1, "repetition": 0}
    records = pd.DataFrame([
        {**base, "fault_cell": "c1", "property": "EO", "verdict": "valid", "witness": ""},
        {**base, "fault_cell": "c1", "property": "EO", "verdict": "unknown", "witness": "", "repetition": 1},
        {**base, "fault_cell": "c2", "property": "EO", "verdict": "valid", "witness": ""},
        {**base, "fault_cell": "c3", "property": "EO", "verdict": "invalid", "witness": "w"},
        {**base, "fault_cell": "c4", "property": "EO", "verdict": "not applicable", "witness": ""},
    ])
    tab = faults.table(records)
    assert dict(zip(tab["cell"], tab["verdict"])) == {"c1": "unknown", "c2": "valid", "c3": "invalid",
                                                      "c4": "not applicable"}
    cells = faults.report(tab, records).matrices[0].cells
    assert cells == {("c1", "seq"): "unknown EO", ("c2", "seq"): "holds", ("c3", "seq"): "violates EO",
                     ("c4", "seq"): "n/a"}


def test_isolation_matrix_words():
    assert [verdict_word(CheckResult("x", v)) for v in (V, U, I)] == ["prevented", "unknown", "occurs"]


def test_revalidation_races_counts_anything_but_valid_and_invalid_as_unknown():
    base = {"backend": "sqlite", "part": "pairs", "history": "h", "binding": "target_cas", "commits": 1,
            "oracle_commits": 1, "errors": "", "overlap_us": 1.0, "rejections": 1, "as_expected": True,
            "indeterminate": 0, "lock_retries": 0, "refused_by_cas": 1}
    records = pd.DataFrame([{**base, "verdict": v} for v in ("valid", "invalid", "unknown", "", "valid")])
    t = races.table(records).iloc[0]
    assert (t["valid"], t["invalid"], t["unknown"], t["executions"]) == (2, 1, 2, 5)


def test_revalidation_durable_counts_verdicts_and_a_missing_verdict_is_unknown():
    base = {"workload": "refund", "mechanism": "ATR", "mutation_class": "blocking", "oracle": "BLOCK",
            "outcome": "BLOCK", "released": False, "payload_stale": False, "premises_evaluated": 1, "changes": 1}
    records = pd.DataFrame([{**base, "verdict": v} for v in ("valid", "unknown", "invalid", "valid")])
    total = durable.table(records).query("cell == 'all'").iloc[0]
    assert (total["valid"], total["unknown"], total["invalid"]) == (2, 1, 1)
    bare = durable.table(records.drop(columns="verdict")).query("cell == 'all'").iloc[0]
    assert (bare["valid"], bare["unknown"], bare["invalid"]) == (0, 4, 0)


@pytest.mark.planted("analysis.isolation.levels:report",
                     'agree = sum(r.verdict == word(e) for r, e in judged)',
                     'agree = sum(r.verdict in (word(e), "unknown") for r, e in judged)')
def test_isolation_levels_coverage_check_counts_an_unknown_cell_as_disagreeing():
    """Bug class: unknown folded into a verdict: an ``unknown`` cell where the guarantees say the anomaly occurs
    was counted as agreeing with them (unknown == not prevented == occurs)."""
    from analysis.isolation import levels
    from vocabulary.isolation import ANOMALIES

    rows = [{"profile": "SRC", "stability": "S0", "compatibility": "C0", "inheritance": "I0", "anomaly": a,
             "verdict": "occurs", "witness": "", "other_anomalies": ""} for a in ANOMALIES]
    rows[0]["verdict"] = "unknown"
    records = pd.DataFrame(rows)
    section = levels.report(levels.table(records), records)
    agree = next(r for r in section.rows if r["metric"].startswith("cells where the profile prevents"))
    assert agree["ours"].startswith(f"{len(ANOMALIES) - 1} of {len(ANOMALIES)}")
    assert f"SRC x {ANOMALIES[0]}: unknown, guarantees say occurs" in section.notes


@pytest.mark.planted("analysis.isolation.runtimes:fails",
                     'return False if (t["verdict"] == "prevented").all() else None',
                     'return False')
def test_isolation_runtimes_never_reads_an_unknown_cell_as_prevented():
    """Bug class: unknown folded into a verdict: a runtime whose cells are prevented or unknown was reported as
    'prevents all four' / 'passes the open-world control'."""
    from analysis.isolation import runtimes

    def tab(verdicts):
        return pd.DataFrame([{"runtime": rt, "anomaly": "semantic_read_skew", "verdict": v, "witness": ""}
                             for rt, v in verdicts])

    assert runtimes.fails(tab([("SSI", "prevented"), ("SSI", "unknown")]), "SSI") is None
    assert runtimes.fails(tab([("SSI", "prevented"), ("SSI", "prevented")]), "SSI") is False
    assert runtimes.fails(tab([("SSI", "unknown"), ("SSI", "occurs")]), "SSI") is True
    assert runtimes.fails(tab([("SSI", "occurs")]), "default") is None
