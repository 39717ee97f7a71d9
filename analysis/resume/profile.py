"""The conformance profile (``resume_profile``): runtime x property, holds or violated, with the witness cell.

Serves the paper's conformance profiles (arXiv 2608.03836: "no two probed
frameworks share a conformance profile"; LangGraph 1.2.9 violates CO, CV and
EO across crashes).  Records: every fault-matrix cell plus one concurrent
resume cell per runtime; a property is violated if any cell's checker says
invalid, and the first such cell is its witness.
"""
from __future__ import annotations

import pandas as pd

from analysis.reference import reference
from analysis.report import Matrix, Section, row
from analysis.resume.verdicts import ORDER, by_property

COLUMNS = ["runtime", "property", "verdict", "witness_cell"]


def table(records: pd.DataFrame) -> pd.DataFrame:
    return by_property(records, "runtime", "runtime")[COLUMNS]


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    runtimes = list(dict.fromkeys(tab["runtime"]))
    cells = {(r, p): (v if v != "violated" else f"violated ({w})")
             for r, p, v, w in zip(tab["runtime"], tab["property"], tab["verdict"], tab["witness_cell"])}
    paper = {}
    for v in reference("resume_profile").get("values", []):
        if v["runtime"] in runtimes:
            paper[(v["runtime"], v["property"])] = cells.get((v["runtime"], v["property"]), "-") \
                if cells.get((v["runtime"], v["property"]), "").startswith(v["verdict"]) else v["verdict"]
    rows = []
    for rt in runtimes:
        held = int(((tab["runtime"] == rt) & (tab["verdict"] == "holds")).sum())
        rows.append(row(f"{rt}: properties that hold (of {len(ORDER)})", held, None, "count"))
    ref = reference("resume_profile")
    published = ", ".join(f"{v['property']} {v['verdict']}" for v in ref.get("values", []))
    notes = (f"The paper's profile ({ref.get('source', 'paper')}: {published}) is compared only when a runtime named "
             "'langgraph' is among the rows (the LangGraph adapter); 'naive' reproduces that behaviour by construction.")
    return Section("resume_profile", "Resume conformance profile: runtime x property", rows, notes,
                   matrices=[Matrix("runtime x property (witness cell)", runtimes, list(ORDER), cells, paper)])
