"""``resume_frameworks``: framework@release x property, Hermitage-style, beside the artifact's published profiles.

Serves issue 14 §4 and "Resume Means Resume" (arXiv 2608.03836), whose public
artifact profiled frameworks at pinned releases by hand.  Records: every
fault-matrix cell and the concurrency grid's race cells, run on each
framework release in its own environment (``runners/resume/frameworks.py``),
one row per execution x property with the checker's verdict and witness.

The table has one row per runtime (framework@release) and one column per
property, each ``holds`` / ``violates`` / ``unknown`` / ``n/a`` folded over
every cell of this run (violates if any execution is invalid; unknown is
never counted as holding; ``n/a`` only when the framework cannot express any
cell that judges it), plus per framework: the fault cells with a violated
property, the race cells and the concurrency saturation (gated effects fired
/ k, mean and max over the grid).  ``CO (inert)`` is the same consume-once
judged by REMIT's reading (a stray second resume accepted with no effect
conforms), shown beside the lab's, never instead of it.
"""
from __future__ import annotations

import pandas as pd

from analysis.reference import reference
from analysis.report import Matrix, Section, row

PROPS = ("PC", "EO", "FD", "CV", "CO", "RD", "liveness")
HOLDS, VIOLATES, UNKNOWN, NA = "holds", "violates", "unknown", "n/a"
SHOWN = {"valid": HOLDS, "invalid": VIOLATES, "unknown": UNKNOWN, "not applicable": NA}
COLUMNS = ["runtime", "framework", "release", "variant", *PROPS, "CO (inert)", "fault_cells_violated", "fault_cells",
           "fault_cells_na", "race_cells", "saturation_mean", "saturation_max"]


def fold(verdicts) -> str:
    vs = set(verdicts)
    for v in ("invalid", "unknown", "valid"):
        if v in vs:
            return SHOWN[v]
    return NA


def _races(t: pd.DataFrame) -> pd.DataFrame:
    r = t[(t["k"] > 0) & (t["property"] == "EO")]
    return r.assign(saturation=r["effects_fired"] / r["k"])


def table(records: pd.DataFrame) -> pd.DataFrame:
    out = []
    for rt, t in records.groupby("runtime", sort=False):
        faults = t[t["k"] == 0]
        cells = faults.groupby("fault_cell")["verdict"]
        races = _races(t)
        line = {"runtime": rt, "framework": t["framework"].iloc[0], "release": t["release"].iloc[0],
                "variant": t["variant"].iloc[0]}
        for prop in PROPS:
            line[prop] = fold(t.loc[t["property"] == prop, "verdict"])
        co_inert = t.loc[(t["property"] == "CO") & (t["verdict"] != "not applicable"), "co_inert"]
        line["CO (inert)"] = fold(co_inert) if len(co_inert) else NA
        line.update(fault_cells_violated=int(cells.apply(lambda v: "invalid" in set(v)).sum()),
                    fault_cells=int(cells.ngroups),
                    fault_cells_na=int(cells.apply(lambda v: set(v) == {"not applicable"}).sum()),
                    race_cells=int(races.groupby(["backend", "k", "jitter_ms"]).ngroups) if len(races) else 0,
                    saturation_mean=float(races["saturation"].mean()) if len(races) else float("nan"),
                    saturation_max=float(races["saturation"].max()) if len(races) else float("nan"))
        out.append(line)
    return pd.DataFrame(out, columns=COLUMNS)


def first_witness(records: pd.DataFrame, runtime: str, prop: str) -> tuple[str, str]:
    """(cell, witness) of the first execution of ``runtime`` that violates ``prop`` ("", "" if none)."""
    bad = records[(records["runtime"] == runtime) & (records["property"] == prop) & (records["verdict"] == "invalid")]
    if bad.empty:
        return "", ""
    cell = bad["fault_cell"].iloc[0]
    if int(bad["k"].iloc[0]):
        cell = f"race {bad['backend'].iloc[0]} k={int(bad['k'].iloc[0])} {float(bad['jitter_ms'].iloc[0]):g} ms"
    return cell, bad["witness"].iloc[0]


def na_reasons(records: pd.DataFrame, runtime: str) -> list[str]:
    na = records[(records["runtime"] == runtime) & (records["verdict"] == "not applicable")]
    return sorted({f"{c}: {w}" for c, w in zip(na["fault_cell"], na["witness"])})


def published(framework: str, variant: str) -> list[dict]:
    return [v for v in reference("resume_frameworks").get("values", [])
            if v["framework"] == framework and v.get("variant", "") == variant]


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    rows_, cells, paper, notes = [], {}, {}, []
    names = list(tab["runtime"])
    for line in tab.to_dict("records"):
        r = pd.Series(line)
        for prop in (*PROPS, "CO (inert)"):
            cells[(r.runtime, prop)] = line[prop]
        rows_.append(row(f"{r.runtime}: fault cells with a violated property", r.fault_cells_violated, None, "count",
                         ours_of=r.fault_cells))
        if r.race_cells:
            rows_.append(row(f"{r.runtime}: concurrency saturation, mean over {r.race_cells} race cells "
                             f"(effects fired / k)", r.saturation_mean, None))
        pub = published(r.framework, r.variant)
        releases = sorted({p["release"] for p in pub})
        for p in pub:
            paper[(r.runtime, p["property"])] = p["verdict"]
        differ = [f"{p['property']} (artifact {p['release']}: {p['verdict']}, \"{p['finding']}\"; this run: "
                  f"{cells.get((r.runtime, p['property']), '-')})" for p in pub
                  if cells.get((r.runtime, p["property"])) != p["verdict"]]
        text = f"{r.runtime}"
        if releases:
            text += (f" beside the artifact's {r.framework} {', '.join(releases)}: "
                     + ("every published cell agrees" if not differ else "differs in " + "; ".join(differ)))
        bad = [(prop, *first_witness(records, r.runtime, prop)) for prop in PROPS
               if cells[(r.runtime, prop)] == VIOLATES]
        if bad:
            prop, cell, wit = bad[0]
            text += f". First violation: {prop} in {cell}: {wit}"
        na = na_reasons(records, r.runtime)
        if na:
            text += f". n/a: {'; '.join(na[:6])}"
        notes.append(text + ".")
    measured = set(tab["framework"])
    absent = [v for v in reference("resume_frameworks").get("values", []) if v["framework"] not in measured]
    if absent:
        notes.append("Published in the artifact, with no row in this run: " + "; ".join(
            f"{v['framework']} {v['release']} {v['property']} {v['verdict']} ({v['finding']})" for v in absent) + ".")
    notes.append("'paper' in the grid is the artifact's published finding for the same framework at the older release "
                 "named above; CO (inert) is REMIT's reading of consume-once (a stray second resume accepted with no "
                 "effect conforms), CO the lab's (it must be refused).")
    columns = [*PROPS, "CO (inert)"]
    return Section("resume_frameworks", "Frameworks side by side: framework@release x property", rows_,
                   "\n\n".join(notes), matrices=[Matrix("framework@release x property (this run's histories)", names,
                                                        columns, cells, paper)])
