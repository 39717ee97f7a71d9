"""Table ``isolation_contract_omission``: incompatible combinations SSI admits vs contract-omission rate p.

One row per (rate, mechanism): ``incompatible_admitted`` executions out of
``executions``, their ``share`` and its exact 95% interval
(Clopper-Pearson, :func:`analysis.stats.binomial_ci`).  The report sets the
share beside its expectation, 1 - (1 - p)^k with k the number of contracts
that matter (measured per cell by dropping each contract alone), and the
central 95% interval of that expectation.  Several mechanisms appear as
extra rows when ``--mechanisms`` names them.
"""
from __future__ import annotations

import pandas as pd

from analysis.report import Section, markdown_table, row
from analysis.stats import binomial_ci, expectation_interval

COLUMNS = ["rate", "executions", "incompatible_admitted", "share", "ci_low", "ci_high"]


def table(records: pd.DataFrame) -> pd.DataFrame:
    keys = ["rate", "mechanism"] if records["mechanism"].nunique() > 1 else ["rate"]
    g = records.groupby(keys, sort=True)
    out = pd.DataFrame({"executions": g.size(), "incompatible_admitted": g["incompatible_admitted"].sum().astype(int),
                        "k": g["contracts_that_matter"].max()}).reset_index()
    out["share"] = out["incompatible_admitted"] / out["executions"]
    out[["ci_low", "ci_high"]] = [binomial_ci(k, n) for k, n in zip(out["incompatible_admitted"], out["executions"])]
    return out[[*keys[1:], *COLUMNS]] if len(keys) > 1 else out[COLUMNS]


def expected(records: pd.DataFrame, rate: float) -> float:
    k = int(records.loc[records["rate"] == rate, "contracts_that_matter"].max())
    return 1 - (1 - rate) ** k


def pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    rows, check = [], []
    for r in tab.itertuples():
        e = expected(records, r.rate)
        lo, hi = expectation_interval(r.executions, e)
        who = f"{r.mechanism}, " if "mechanism" in tab.columns else ""
        x = row(f"{who}p = {100 * r.rate:g}%: share of executions admitting an incompatible combination", r.share, None,
                "share")
        x["ours"] += f" ({r.incompatible_admitted:,} of {r.executions:,}; 95% CI {pct(r.ci_low)}-{pct(r.ci_high)})"
        rows.append(x)
        check.append({"p": f"{100 * r.rate:g}%", "measured": pct(r.share), "expected 1-(1-p)^k": pct(e),
                      "95% interval of expectation": f"{pct(lo)}-{pct(hi)}",
                      "inside": "yes" if lo <= r.share <= hi else "**no**"})
    k = int(records["contracts_that_matter"].max())
    n = int(records["contracts"].max())
    notes = ("Not in the paper: the fault makes its declaration assumption fail at a known rate. Each of the "
             f"{n} declared contracts of `omission_pipeline` is dropped with probability p (seeded, per execution) "
             "from what the mechanism sees; the compatibility-skew checker judges by all of them. "
             f"{k} of the {n} contracts matter (dropping one alone lets SSI admit an incompatible pair; measured by "
             "running), so SSI's failure rate should track 1 - (1 - p)^k: a guarantee over declared contracts "
             "degrades exactly with the declarations. Intervals are exact (Clopper-Pearson).\n\n"
             + markdown_table(pd.DataFrame(check)))
    return Section("isolation_contract_omission", "Contract omission: incompatible combinations SSI admits", rows, notes)
