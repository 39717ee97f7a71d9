"""The LangGraph findings note and the guard-overhead ratios: pure functions of the resume tables.

Each test pins a counting rule with a small literal table and names the planted bug it catches.
"""
from __future__ import annotations

import pandas as pd
import pytest

from analysis.resume.langgraph_findings import findings, guard_summary, note, overhead_ratios

FAULT_COLUMNS = ["runtime", "cell", "crash_point", "operation", "property", "verdict", "effects_fired",
                 "effects_expected", "witness"]


def faults(*rows) -> pd.DataFrame:
    return pd.DataFrame([dict(zip(FAULT_COLUMNS, r)) for r in rows], columns=FAULT_COLUMNS)


STOCK_FAULTS = faults(
    ("langgraph", "second_resume_head", "-", "resume", "CO", "invalid", 6, 6, "consumed twice"),
    ("langgraph", "invalid_state", "-", "start", "CV", "valid", 6, 6, ""),
    ("langgraph", "crash_resume_after_effect_act", "after_effect", "resume", "EO", "invalid", 8, 6, "fired twice"),
    ("langgraph", "crash_start_parked_approve", "parked", "start", "EO", "unknown", 6, 6, "killed"),
    ("langgraph+guard", "second_resume_head", "-", "resume", "CO", "valid", 6, 6, ""),
    ("langgraph+guard", "crash_resume_after_effect_act", "after_effect", "resume", "EO", "valid", 6, 6, ""),
)


def conc(runtime, sats, k=2, fired=None):
    return pd.DataFrame([{"runtime": runtime, "backend": "postgres" if i % 2 else "sqlite", "k": k, "jitter_ms": float(i),
                          "repetitions": 2, "effects_fired_mean": (fired if fired is not None else s * k),
                          "saturation": s, "served_mean": s * k, "refused_mean": k - s * k, "indeterminate": 0}
                         for i, s in enumerate(sats)])


@pytest.mark.planted("analysis.resume.langgraph_findings:_fault_finding", 'bad = t[t["verdict"] == "invalid"]',
                     'bad = t[t["verdict"] != "valid"]')  # unknown counted as a violation
@pytest.mark.planted("analysis.resume.langgraph_findings:_cells", "return t[t[\"cell\"].map(lambda c: any(fnmatch(c, p) for p in patterns))]",
                     "return faults[faults[\"runtime\"] == runtime]")  # any cell's verdict
def test_each_finding_is_read_from_its_own_cells():
    """CO from second_resume_head, CV from invalid_state, EO from the crash_* cells only.

    Planted bugs caught: counting an 'unknown' verdict as a violation (crash_start_parked_approve is unknown: the
    EO finding must say 1 of 2 cells, not 2 of 2); reading CV from any cell's verdict (it is valid here: "differs";
    only invalid_state judges CV in this table, so the plant reads every cell's verdict, whatever its property).
    """
    got = {f.id: f for f in findings(STOCK_FAULTS, None)}
    assert got["second_resume"].reproduced is True
    assert got["invalid_state"].reproduced is False and "0 of 1" in got["invalid_state"].measured
    assert got["sigkill_reexecution"].reproduced is True and "1 of 2" in got["sigkill_reexecution"].measured
    assert got["saturation"].reproduced is None


@pytest.mark.planted("analysis.resume.langgraph_findings:_saturation_finding", "same = len(sat) >=",
                     'same = float(t["saturation"].mean()) * len(t) >=')  # a mean over cells
def test_saturation_counts_cells_at_one():
    """36 of 40 at 1.0 reproduces; 20 of 40 differs (planted bug: a mean over cells instead of a count)."""
    assert findings(None, conc("langgraph", [1.0] * 36 + [0.95] * 4))[-1].reproduced is True
    low = findings(None, conc("langgraph", [1.0] * 20 + [0.99] * 20))[-1]
    assert low.reproduced is False and "20 of 40" in low.measured


@pytest.mark.planted("analysis.resume.langgraph_findings:guard_summary", 'dup = int((g["effects_fired_mean"] > 1.0).sum())',
                     'dup = int((g["saturation"] > 1.0).sum())')
def test_guard_summary_counts_fixed_violations_and_duplicates():
    """The guard fixes 2 of 2 stock violations; a concurrency cell with 1.5 gated effects per race is a duplicate
    (planted bug: comparing saturation instead of effects per race, which is 1/k for a correct gate)."""
    lines = guard_summary(STOCK_FAULTS, conc("langgraph+guard", [0.5, 0.5], fired=1.0))
    assert "holds 2 of the 2" in lines[0] and "0 with more than one" in lines[1]
    dup = guard_summary(None, conc("langgraph+guard", [0.75, 0.5], fired=1.5))
    assert "2 with more than one" in dup[0]


def test_note_is_empty_without_langgraph_rows():
    assert note(faults(("naive", "invalid_state", "-", "start", "CV", "invalid", 6, 6, "x")), None) == ""
    assert "DIFFERS from 1.2.9" in note(STOCK_FAULTS, None)


@pytest.mark.planted("analysis.resume.langgraph_findings:overhead_ratios", 'one["ratio"] = one["stack_us"] / one["stock"]',
                     'one["ratio"] = one["stock"] / one["stack_us"]')
def test_overhead_ratio_is_guard_over_stock_medians():
    """ratio = median(guard) / median(stock) per backend x operation (planted bug: the inverse ratio)."""
    def bench(saver, median, rep):
        return {"extra_info": {"saver": saver, "backend": "sqlite", "operation": "resume", "repetition": rep},
                "stats": {"median": median}}
    out = overhead_ratios({"benchmarks": [bench("stock", 0.002, 0), bench("guard", 0.0022, 0),
                                          bench("stock", 0.002, 1), bench("guard", 0.0022, 1)]})
    assert round(float(out["ratio"].iloc[0]), 3) == 1.1


@pytest.mark.planted("analysis.resume.langgraph_findings:overhead_ratios", 'one["ratio"] = one["stack_us"] / one["stock"]',
                     'one["ratio"] = one["stack_us"] / (one["guard"] if stack == "full" else one["stock"])')
@pytest.mark.planted("analysis.resume.langgraph_findings:overhead_ratios", "stack_us=lambda d: d[stack])",
                     "stack_us=lambda d: d[stack][::-1].values)")  # another repetition's stock time
def test_overhead_ratio_per_stack_pairs_each_stack_with_stock_of_its_repetition():
    """Each stack (guard, full) gets its own ratio over the stock time of the same repetition.

    Planted bugs caught: a full-stack ratio taken over the guard's time instead of stock's (it would read 1.0),
    pairing a stack with another repetition's stock time (1.25 / 0.8 instead of 1.2 each)."""
    def bench(saver, median, rep):
        return {"extra_info": {"saver": saver, "backend": "postgres", "operation": "step", "repetition": rep},
                "stats": {"median": median}}
    out = overhead_ratios({"benchmarks": [bench("stock", 0.004, 0), bench("guard", 0.0044, 0), bench("full", 0.0048, 0),
                                          bench("stock", 0.005, 1), bench("guard", 0.0055, 1), bench("full", 0.006, 1)]})
    got = {r.stack: (round(r.ratio, 3), round(r.ratio_min, 3), round(r.ratio_max, 3)) for r in out.itertuples()}
    assert got == {"full": (1.2, 1.2, 1.2), "guard": (1.1, 1.1, 1.1)}
