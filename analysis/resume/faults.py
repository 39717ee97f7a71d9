"""The fault matrix table and report section (``resume_faults``).

Serves the paper's fault matrix (arXiv 2608.03836: crash points x operations,
39 cells on its model): every lab cell on every runtime, with real SIGKILL of
real child processes and recovery in a fresh process.  One row per runtime x
cell x property: the verdict folded over repetitions (worst first), the
effects fired per repetition (mean) beside the oracle's count, and the first
witness.
"""
from __future__ import annotations

import pandas as pd

from analysis.reference import reference
from analysis.resume.langgraph_findings import note as langgraph_note
from analysis.resume.langgraph_findings import remit_faults
from analysis.report import Matrix, Section, row
from analysis.resume.verdicts import worst_verdict

COLUMNS = ["runtime", "cell", "crash_point", "operation", "property", "verdict", "effects_fired", "effects_expected",
           "witness"]


def table(records: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (rt, cell, prop), g in records.groupby(["runtime", "fault_cell", "property"], sort=False):
        wit = g.loc[g["witness"] != "", "witness"]
        out.append({"runtime": rt, "cell": cell, "crash_point": g["crash_point"].iloc[0],
                    "operation": g["operation"].iloc[0], "property": prop, "verdict": worst_verdict(g["verdict"]),
                    "effects_fired": float(g["effects_fired"].mean()), "effects_expected": int(g["effects_expected"].iloc[0]),
                    "witness": wit.iloc[0] if len(wit) else ""})
    return pd.DataFrame(out, columns=COLUMNS)


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    ref = reference("resume_faults")
    cells = list(dict.fromkeys(tab["cell"]))
    runtimes = list(dict.fromkeys(tab["runtime"]))
    rows = [row("fault-matrix cells", len(cells), ref.get("cells"), "size")]
    for rt in runtimes:
        t = tab[tab["runtime"] == rt]
        bad = t[t["verdict"] == "invalid"]
        rows.append(row(f"{rt}: cells with a violated property", bad["cell"].nunique(), None, "count", ours_of=len(cells)))
        extra = t.drop_duplicates("cell")
        rows.append(row(f"{rt}: effects fired / expected (all cells)", float(extra["effects_fired"].sum()) /
                        max(1, int(extra["effects_expected"].sum())), None, "value"))
    kills = int(records.drop_duplicates(["runtime", "fault_cell", "repetition"])["sigkills"].sum())
    cellmap = {}
    for (rt, cell), g in tab.groupby(["runtime", "cell"], sort=False):
        bad = [p for p, v in zip(g["property"], g["verdict"]) if v == "invalid"]
        na = all(v == "not applicable" for v in g["verdict"])
        unk = [p for p, v in zip(g["property"], g["verdict"]) if v == "unknown"]
        cellmap[(cell, rt)] = "n/a" if na else ("violates " + ",".join(bad) if bad else
                                                 ("unknown " + ",".join(unk) if unk else "holds"))
    notes = (f"Every crash is a real SIGKILL of a real child process ({kills} children killed by signal 9 in this run; "
             f"each recovery is a new process).  The paper's {ref.get('cells', 'fault-matrix')} cells are not published one by one; the lab's "
             f"{len(cells)} cells are declared in scenarios/resume/cell_*.toml (each replica run twice so that "
             "recoveries from one frontier can be compared).  Verdicts are the worst over repetitions.")
    notes = " ".join(x for x in (notes, langgraph_note(faults=tab), remit_faults(tab, records)) if x)  # the paper's LangGraph findings beside this run's
    return Section("resume_faults", "Resume fault matrix: crash points x operations", rows, notes,
                   matrices=[Matrix("cell x runtime (properties violated)", cells, runtimes, cellmap)])
