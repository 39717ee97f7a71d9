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

from fnmatch import fnmatch

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


#: the column each table column is read from (a test plants the wrong one and must fail)
CO_INERT_FROM = "co_inert"


def _races(t: pd.DataFrame) -> pd.DataFrame:
    """One row per race (its EO row), with saturation = gated effects fired / k (never / the expected effects)."""
    r = t[(t["k"] > 0) & (t["property"] == "EO")]
    return r.assign(saturation=r["effects_fired"] / r["k"])


def effects_per_race(t: pd.DataFrame) -> dict[str, int]:
    """How many races fired the gated effect 0, 1 or more than 1 times (the distribution, not only the mean):
    0 is a lost effect when the decision was consumed (liveness says so, with its witness)."""
    fired = _races(t)["effects_fired"]
    return {"0": int((fired == 0).sum()), "1": int((fired == 1).sum()), ">1": int((fired > 1).sum())}


def differences(runtime: str, pub: list[dict], cells: dict) -> list[str]:
    """Each published verdict that differs from this run's cell of the same runtime and property."""
    return [f"{p['property']} (artifact {p['release']}: {p['verdict']}, \"{p['finding']}\"; this run: "
            f"{cells.get((runtime, p['property']), '-')})" for p in pub
            if cells.get((runtime, p["property"])) != p["verdict"]]


def table(records: pd.DataFrame) -> pd.DataFrame:
    out = []
    for rt, t in records.groupby("runtime", sort=False):
        cells = [set(v) for _, v in t[t["k"] == 0].groupby("fault_cell")["verdict"]]  # each fault cell's verdicts
        races = _races(t)
        line = {"runtime": rt, "framework": t["framework"].iloc[0], "release": t["release"].iloc[0],
                "variant": t["variant"].iloc[0]}
        for prop in PROPS:
            line[prop] = fold(t.loc[t["property"] == prop, "verdict"])
        co_inert = t.loc[(t["property"] == "CO") & (t["verdict"] != "not applicable"), CO_INERT_FROM]
        line["CO (inert)"] = fold(co_inert)
        line.update(fault_cells_violated=sum("invalid" in v for v in cells), fault_cells=len(cells),
                    fault_cells_na=sum(v == {"not applicable"} for v in cells),
                    race_cells=int(races.groupby(["backend", "k", "jitter_ms"]).ngroups),
                    saturation_mean=float(races["saturation"].mean()),  # NaN without races
                    saturation_max=float(races["saturation"].max()))
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


#: cells whose outcome is a finding of its own (issue 14 §2), named in the report for every row that ran them
PROBES = {
    "second_resume_by_id": "a fork from the paused interrupt's checkpoint with a new resume value (same thread, "
                           "addressed by the checkpoint's id)",
    "parallel_sibling_done": "parallel siblings, one killed after its effect while the other had finished",
    "replay_past_checkpoint": "the framework's own replay fork (invoked again from a past checkpoint id, same thread)",
    "update_undeclared_key": "a state update with a key the schema does not declare",
    "pydantic_invalid_next": "a pydantic state receiving an invalid value, then a recovery and a second resume",
}


def cell_outcome(records: pd.DataFrame, runtime: str, cell: str) -> str:
    """One line: which properties the cell violated on ``runtime``, effects fired vs expected, the first witness."""
    t = records[(records["runtime"] == runtime) & (records["fault_cell"] == cell)]
    if t.empty:
        return ""
    if set(t["verdict"]) == {"not applicable"}:
        return f"n/a ({t['witness'].iloc[0]})"
    bad = t[t["verdict"] == "invalid"]
    fired, expected = t["effects_fired"].mean(), int(t["effects_expected"].iloc[0])
    if bad.empty:
        return f"every property holds ({fired:g} effects fired, {expected} expected)"
    shown = bad[bad["property"] == "CO"] if (bad["property"] == "CO").any() else bad  # CO's names the values consumed
    return (f"{', '.join(dict.fromkeys(bad['property']))} violated ({fired:g} effects fired, {expected} expected); "
            f"e.g. {shown['witness'].iloc[0].rstrip('.')}")


def changes(records: pd.DataFrame, old: str, new: str) -> list[str]:
    """(cell: property old -> new) wherever two releases' verdicts differ in this run."""
    a = records[records["runtime"] == old].groupby(["fault_cell", "property"])["verdict"].agg(fold)
    b = records[records["runtime"] == new].groupby(["fault_cell", "property"])["verdict"].agg(fold)
    both = a.index.intersection(b.index)
    return [f"{c} {p}: {a[(c, p)]} -> {b[(c, p)]}" for c, p in both if a[(c, p)] != b[(c, p)]]


def langgraph_notes(tab: pd.DataFrame, records: pd.DataFrame) -> list[str]:
    """The paper's 1.2.9 findings on 1.2.9 itself and on every other LangGraph release row; what changed since."""
    ref = reference("langgraph")
    rows = tab[(tab["framework"] == "langgraph") & (tab["release"] != "installed")]  # env rows, not the lab's own
    if rows.empty or not ref:
        return []
    out = []
    for rt in rows["runtime"]:
        parts = []
        for f in ref.get("findings", []):
            if f["id"] == "saturation":
                races = _races(records[records["runtime"] == rt])
                if len(races):
                    parts.append(f"saturation 1.0 in {int((races['saturation'] >= 0.999).sum())} of {len(races)} "
                                 f"races (paper: {ref['concurrency_cells_saturated']} of {ref['concurrency_cells']} "
                                 "cells)")
                continue
            t = records[(records["runtime"] == rt) & (records["property"] == f["property"])
                        & records["fault_cell"].map(lambda c: any(fnmatch(c, p) for p in f["cells"]))]
            if t.empty:
                continue
            bad = t[t["verdict"] == "invalid"]
            parts.append(f"\"{f['claim']}\": {f['property']} violated in {bad['fault_cell'].nunique()} of "
                         f"{t['fault_cell'].nunique()} cell(s) ({'reproduced' if len(bad) else 'NOT reproduced'})")
        out.append(f"{rt}, the paper's {ref['version']} findings: " + "; ".join(parts) + ".")
    names = list(rows["runtime"])
    paper = next((n for n in names if rows.loc[rows["runtime"] == n, "release"].iloc[0] == ref["version"]), None)
    for other in names:
        if paper and other != paper:
            diff = changes(records, paper, other)
            out.append(f"What changed from {paper} to {other}: " + ("nothing in this run's cells" if not diff
                                                                    else "; ".join(diff)) + ".")
    for cell, what in PROBES.items():
        seen = [f"{rt}: {cell_outcome(records, rt, cell)}" for rt in tab["runtime"] if cell_outcome(records, rt, cell)]
        if seen:
            out.append(f"Finding, {what} ({cell}): " + " | ".join(seen) + ".")
    return out


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
            dist = effects_per_race(records[records["runtime"] == r.runtime])
            notes.append(f"{r.runtime}: gated effects per race: {dist['0']} races fired none, {dist['1']} once, "
                         f"{dist['>1']} more than once.")
        pub = published(r.framework, r.variant) if r.release != "installed" else []
        releases = sorted({p["release"] for p in pub})
        for p in pub:
            paper[(r.runtime, p["property"])] = p["verdict"]
        differ = differences(r.runtime, pub, cells)
        text = f"{r.runtime}"
        if releases:
            text += (f" beside the artifact's {r.framework} {', '.join(releases)}: "
                     + ("every published cell agrees" if not differ else "differs in " + "; ".join(differ)))
        bad = [(prop, *first_witness(records, r.runtime, prop)) for prop in PROPS
               if cells[(r.runtime, prop)] == VIOLATES]
        if bad:
            prop, cell, wit = bad[0]
            text += f". First violation: {prop} in {cell}: {wit.rstrip('.')}"
        na = na_reasons(records, r.runtime)
        if na:
            text += f". n/a: {'; '.join(na[:6])}"
        notes.append(text + ".")
    measured = set(tab["framework"])
    absent = [v for v in reference("resume_frameworks").get("values", []) if v["framework"] not in measured]
    if absent:
        notes.append("Published in the artifact, with no row in this run: " + "; ".join(
            f"{v['framework']} {v['release']} {v['property']} {v['verdict']} ({v['finding']})" for v in absent) + ".")
    notes += langgraph_notes(tab, records)
    notes.append("A resume addressed to the parked checkpoint's id after the run went on (second_resume_by_id) is "
                 "read two ways: REMIT reads an explicit checkpoint id as fork intent and serves it its own value on a "
                 "fresh branch of the same thread; the lab reads it as a second resume of a consumed interrupt (CO, "
                 "and EO/PC when the gated node runs again).  The values in the CO witness say which a row does: "
                 "('yes', 'yes') = the first value served again (LangGraph #6663, the paper's fork finding), "
                 "('yes', 'again') = the new value served.")
    notes.append("'paper' in the grid is the artifact's published finding for the same framework at the older release "
                 "named above; CO (inert) is REMIT's reading of consume-once (a stray second resume accepted with no "
                 "effect conforms), CO the lab's (it must be refused).")
    columns = [*PROPS, "CO (inert)"]
    return Section("resume_frameworks", "Frameworks side by side: framework@release x property", rows_,
                   "\n\n".join(notes), matrices=[Matrix("framework@release x property (this run's histories)", names,
                                                        columns, cells, paper)])
