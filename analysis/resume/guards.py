"""``resume_guards``: LangGraph + each installable guard x property, each guard judged on what it claims.

Serves issue 26 §4.  Records: the fault-matrix slice and k-racer cells of
``runners/resume/guards.py``, one row per execution x property, each carrying
the row's ``covers`` (the properties its guard claims) and ``adoption_lines``.
A property outside ``covers`` is shown as ``not covered``, never folded into
the guard's verdicts (an effect ledger does not claim consume-once; it is not
scored as violating it).  REMIT's own reading of consume-once (a stray second
resume accepted with no effect conforms) is shown beside the lab's, as in
``resume_frameworks``.  Columns: each property; ``CO (inert)``; the fault
cells with a violated *covered* property; the races and saturation (gated
effects fired / k); the lines the adoption takes.
"""
from __future__ import annotations

import pandas as pd

from analysis.report import Finding, Matrix, Section
from analysis.resume.frameworks import fold

PROPS = ("PC", "EO", "FD", "CV", "CO", "RD", "liveness")
NOT_COVERED = "not covered"
COLUMNS = ["runtime", "covers", *PROPS, "CO (inert)", "covered_held", "fault_cells_violated", "fault_cells",
           "races", "saturation_mean", "saturation_max", "adoption_lines"]


def covered(t: pd.DataFrame) -> set[str]:
    return set(str(t["covers"].iloc[0]).split(","))


def table(records: pd.DataFrame) -> pd.DataFrame:
    out = []
    for rt, t in records.groupby("runtime", sort=False):
        cov = covered(t)
        line = {"runtime": rt, "covers": ", ".join(p for p in PROPS if p in cov)}
        for prop in PROPS:
            line[prop] = fold(t.loc[t["property"] == prop, "verdict"]) if prop in cov else NOT_COVERED
        co = t.loc[(t["property"] == "CO") & (t["verdict"] != "not applicable"), "co_inert"]
        line["CO (inert)"] = (fold(co) if len(co) else "n/a") if "CO" in cov else NOT_COVERED
        line["covered_held"] = sum(line[p] == "holds" for p in PROPS if p in cov)
        faults = t[(t["k"] == 0) & t["property"].isin(cov)]
        cells = faults.groupby("fault_cell")["verdict"]
        races = t[(t["k"] > 0)].drop_duplicates(subset=["cell", "repetition"])
        sat = races["effects_fired"] / races["k"]
        bad_cells = {c for c, v in zip(faults["fault_cell"], faults["verdict"]) if v == "invalid"}
        line.update(fault_cells_violated=len(bad_cells),
                    fault_cells=int(cells.ngroups), races=len(races),
                    saturation_mean=float(sat.mean()) if len(sat) else float("nan"),
                    saturation_max=float(sat.max()) if len(sat) else float("nan"),
                    adoption_lines=int(t["adoption_lines"].astype(int).iloc[0]))
        out.append(line)
    return pd.DataFrame(out, columns=COLUMNS)


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    cells = {(r["runtime"], p): r[p] for r in tab.to_dict("records") for p in (*PROPS, "CO (inert)")}
    notes = ["Each guard adopted as its own README says (`mechanisms/resume/effect_guards.py`, the guard's and "
             "REMIT's runtimes); every number from this run's records. `not covered`: the guard does not claim the "
             "property (an effect ledger claims exactly-once effects, not consume-once or checkpoint validity), so "
             "it is not judged on it. `CO (inert)` is REMIT's reading of consume-once (a stray second resume "
             "accepted with no effect conforms), beside the lab's. Saturation: gated effects fired / k over the "
             "races. Overhead per step and per resume: `resume_overhead` times the stock saver, driftlab's guard "
             "and REMIT in one benchmark session; resume-guard and agent-ledger were not timed in this version."]
    for r in tab.to_dict("records"):
        bad = [p for p in PROPS if r[p] == "violates"]
        if bad:
            first = records[(records["runtime"] == r["runtime"]) & (records["property"] == bad[0])
                            & (records["verdict"] == "invalid")]
            cell = first["fault_cell"].iloc[0]
            notes.append(f"{r['runtime']}: violates {', '.join(bad)}; first witness ({cell}): "
                         f"{str(first['witness'].iloc[0]).rstrip('.')}.")
    return Section("resume_guards", "Guards side by side: LangGraph + each guard a user can install",
                   notes="\n\n".join(notes),
                   matrices=[Matrix("guard x property (not covered: outside the guard's own claim)",
                                    list(tab["runtime"]), [*PROPS, "CO (inert)"], cells)])


def findings(tab: pd.DataFrame, records: pd.DataFrame) -> list[Finding]:
    """One line per guard for the report's opening: what it claims, what held, saturation, adoption."""
    out = []
    for r in tab.to_dict("records"):
        cov = [p for p in PROPS if r[p] != NOT_COVERED]
        bad = [p for p in cov if r[p] == "violates"]
        verdict = ("holds everything it claims" if not bad and all(r[p] == "holds" for p in cov)
                   else f"breaks {', '.join(bad)}" if bad else "undecided on part of its claim")
        scope = "the whole contract" if len(cov) == len(PROPS) else f"only {', '.join(cov)}"
        claim = (f"claims {scope}" if r["adoption_lines"] else "no guard, judged on the whole contract")
        out.append(Finding("guards", r["runtime"],
                           f"{claim}: {verdict} ({r['fault_cells_violated']} of {r['fault_cells']} fault "
                           f"cells violated on a claimed property; saturation {r['saturation_mean']:.2f} over "
                           f"{r['races']} races; adoption {r['adoption_lines']} lines)."))
    return out
