"""Table ``isolation_runtimes``: runtime x anomaly under one fixed schedule, and the open-world control (paper Table 3).

One row per (runtime, anomaly) from the records: ``occurs`` if the anomaly's
checker flagged the execution's history.  ``<runtime>/open-world`` rows are
the discovery control.  The report renders the matrix beside the paper's
stated cells and says whether static pinning fails the open-world control
(some anomaly occurs there) while SSI passes it.
"""
from __future__ import annotations

import pandas as pd

from analysis.isolation.levels import ordered, paper_cells
from analysis.reference import reference
from analysis.report import Matrix, Section, row
from vocabulary.isolation import ANOMALIES

COLUMNS = ["runtime", "anomaly", "verdict", "witness"]
RUNTIME_ORDER = ("default", "StaticPinning", "SSI", "default/open-world", "StaticPinning/open-world", "SSI/open-world",
                 "default/opaque", "StaticPinning/opaque", "SSI/opaque", "SSI+capture/opaque", "SSI+taint/opaque")


def table(records: pd.DataFrame) -> pd.DataFrame:
    order = ordered(records["runtime"], RUNTIME_ORDER)
    aorder = {a: i for i, a in enumerate(ANOMALIES)}
    t = records[COLUMNS].copy()
    t["_r"], t["_a"] = t["runtime"].map(order), t["anomaly"].map(lambda a: aorder.get(a, 99))
    return t.sort_values(["_r", "_a"]).drop(columns=["_r", "_a"]).reset_index(drop=True)


def fails(tab: pd.DataFrame, runtime: str) -> bool | None:
    """True if an anomaly occurs under ``runtime``, False if every anomaly is prevented, None if it has no row or
    a cell is unknown and none occurs (an unknown cell is never counted as prevented)."""
    t = tab[tab["runtime"] == runtime]
    if t.empty:
        return None
    if (t["verdict"] == "occurs").any():
        return True
    return False if (t["verdict"] == "prevented").all() else None


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    runtimes = list(dict.fromkeys(tab["runtime"]))
    cells = {(r.runtime, r.anomaly): r.verdict for r in tab.itertuples()}
    paper = {k: v for k, v in paper_cells("isolation_runtimes", "runtime").items() if k[0] in runtimes}
    matrix = Matrix("Runtime x anomaly (fixed schedule; '/open-world': a tool discovered mid-run; '/opaque': a tool that cannot be versioned)", runtimes,
                    [a for a in ANOMALIES if a in set(tab["anomaly"])], cells, paper)
    matches = sum(cells.get(k) == v for k, v in paper.items())
    rows = [row("matrix cells equal to the paper's stated cells", matches, len(paper), "count", ours_of=len(paper),
                paper_of=len(paper))]
    claims = []
    for rt in ("StaticPinning", "SSI", "default"):
        closed, open_ = fails(tab, rt), fails(tab, rt + "/open-world")
        if closed is None or open_ is None:
            if (tab["runtime"] == rt).any() and (tab["runtime"] == rt + "/open-world").any():
                claims.append(f"{rt}: unknown (a cell's history has an indeterminate operation), neither prevents "
                              "nor admits.")
            continue
        anomalies = ", ".join(a for a in ANOMALIES if cells.get((rt + "/open-world", a)) == "occurs") or "none"
        claims.append(f"{rt}: {'admits anomalies' if closed else 'prevents all four'} under the fixed schedule; "
                      f"{'fails' if open_ else 'passes'} the open-world control (anomalies there: {anomalies}).")
    sp = fails(tab, "StaticPinning/open-world")
    if sp is not None:
        rows.append(row("static pinning fails the open-world control (1 = yes)", float(sp), 1.0, "count"))
    opaque = records[records["runtime"].str.endswith("/opaque")]
    if not opaque.empty:
        per = opaque.groupby("runtime", sort=False).agg(refusals=("refusals", "max"), merges_refused=("merges_refused", "max"),
                                                        occurs=("verdict", lambda s: ", ".join(
                                                            a for a, v in zip(opaque.loc[s.index, "anomaly"], s)
                                                            if v == "occurs") or "none"))
        claims.append("Opaque tool (cannot be versioned; `opaque_tool.toml`): " + "; ".join(
            f"{rt}: anomalies {r.occurs}, {r.refusals} resolution(s) refused, {r.merges_refused} merge(s) refused"
            for rt, r in per.iterrows()) + ". SSI's abort policy prevents by refusing the work, capture by replaying "
            "the first response, and taint lets the read skew happen but marks the output and refuses its merge.")
    notes = ("The default runtime resolves live aliases (the SRC profile). The programs are scenario files "
             "(`scenarios/isolation/fixed_schedule.toml`, `open_world.toml`, `opaque_tool.toml`); the paper does not print its schedule, "
             "so this one is the lab's choice, written down there. Paper: "
             f"\"{reference('isolation_runtimes').get('claim_open_world', '')}\". " + " ".join(claims)
             + " SSI's rows are a conformance check of the implementation, not an empirical discovery.")
    return Section("isolation_runtimes", "Runtimes x anomalies and the open-world control (paper Table 3)", rows,
                   notes, matrices=[matrix])
