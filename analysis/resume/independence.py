"""The independence matrix (``resume_independence``): which property each fault switch breaks.

Serves the paper's 39-cell independence matrix (arXiv 2608.03836): 6 fault
switches x 6 properties on its TLA+ model plus 3 cells of a state-rebuild
model; here reproduced empirically on the implementation, the sequencer with
one switch at a time (mechanisms/resume/faulted.py) run through every
fault-matrix cell.  A cell of the matrix is "violated" if any fault cell
gives the property's checker an invalid verdict, "holds" if all are valid.
The paper's cells come from data/reference/resume.toml; the report names
every cell that differs.
"""
from __future__ import annotations

import pandas as pd

from analysis.reference import reference
from analysis.report import Matrix, Section, row
from analysis.resume.verdicts import ORDER, by_property

COLUMNS = ["fault_switch", "property", "verdict", "witness"]


def _switch(runtime: str) -> str:
    return runtime.split("+", 1)[1] if "+" in runtime else runtime


def table(records: pd.DataFrame) -> pd.DataFrame:
    rec = records.assign(fault_switch=records["runtime"].map(_switch))
    t = by_property(rec, "fault_switch", "fault_switch")
    t["witness"] = [f"{c}: {w}" if c else "" for c, w in zip(t["witness_cell"], t["witness"])]
    return t[COLUMNS]


def paper_cells() -> dict[tuple[str, str], str]:
    out = {}
    for v in reference("resume_independence").get("values", []):
        for prop in v["checked"]:
            out[(v["switch"], prop)] = "violated" if prop in v["breaks"] else "holds"
    return out


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    switches = list(dict.fromkeys(tab["fault_switch"]))
    cells = {(s, p): v for s, p, v in zip(tab["fault_switch"], tab["property"], tab["verdict"])}
    paper = {k: v for k, v in paper_cells().items() if k[0] in switches}
    m = Matrix("fault switch x property (sequencer with one switch on)", switches, list(ORDER), cells, paper)
    diffs = m.differences()
    rows = [row("matrix cells compared with the paper", len(paper), len(paper_cells()), "size"),
            row("cells that differ from the paper", len(diffs), None, "count")]
    partial = [(v["switch"], v["checked"]) for v in reference("resume_independence").get("values", [])
               if len(v["checked"]) < len(ORDER) - 1]  # switches the paper checked on a companion model only
    notes = ("Each switch is a variant of the sequencer (mechanisms/resume/faulted.py), run through every fault-matrix "
             "cell with real SIGKILL; the paper checks a TLA+ model, the lab checks the implementation. "
             + "".join(f"The paper checks {sw} on {len(props)} properties ({', '.join(props)}); the lab reports all six "
                       f"for it and compares those {len(props)}. " for sw, props in partial)
             + "Liveness is not part of the paper's matrix.")
    if diffs:
        notes += " Differences: " + "; ".join(f"{r} x {c}: ours {o}, paper {p}" for r, c, o, p in diffs) + "."
    return Section("resume_independence", "Resume independence matrix: fault switch x property", rows, notes,
                   matrices=[m])
