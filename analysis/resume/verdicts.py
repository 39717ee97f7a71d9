"""Verdict tables of the resume family: per-cell property verdicts folded over repetitions and cells.

Serves the fault matrix, the independence matrix and the conformance profile
of "Resume Means Resume" (arXiv 2608.03836).  Pure functions of records
(one row per execution x property, written by ``runners/resume/common.py``):
a property is **violated** in a set of executions if any of them is
invalid, **holds** if all are valid, **unknown** otherwise (unknown is never
counted as holding), and **not applicable** if the runtime could not reach
the cell's crash point.
"""
from __future__ import annotations

import pandas as pd

HOLDS, VIOLATED, UNKNOWN, NA = "holds", "violated", "unknown", "not applicable"
ORDER = ("PC", "EO", "FD", "CV", "CO", "RD", "liveness")


def fold(verdicts) -> str:
    """valid/invalid/unknown/not applicable of several executions -> holds/violated/unknown/not applicable."""
    vs = set(verdicts)
    if "invalid" in vs:
        return VIOLATED
    if "unknown" in vs:
        return UNKNOWN
    if vs and vs <= {"not applicable"}:
        return NA
    return HOLDS


def worst_verdict(verdicts) -> str:
    """The worst checker verdict of several executions (invalid > unknown > valid)."""
    vs = set(verdicts)
    for v in ("invalid", "unknown", "valid"):
        if v in vs:
            return v
    return "not applicable"


def by_property(records: pd.DataFrame, row_key: str, row_name: str) -> pd.DataFrame:
    """rows x property: verdict folded over every cell and repetition, and the first violating cell."""
    out = []
    for (row, prop), group in records.groupby([row_key, "property"], sort=False):
        verdict = fold(group["verdict"])
        bad = group[group["verdict"] == "invalid"]
        out.append({row_name: row, "property": prop, "verdict": verdict,
                    "witness_cell": bad["fault_cell"].iloc[0] if len(bad) else "",
                    "witness": bad["witness"].iloc[0] if len(bad) else ""})
    frame = pd.DataFrame(out)
    if frame.empty:
        return frame
    frame["_o"] = frame["property"].map({p: i for i, p in enumerate(ORDER)})
    return frame.sort_values([row_name, "_o"], kind="stable").drop(columns="_o").reset_index(drop=True)
