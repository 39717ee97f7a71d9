"""Table ``revalidation_omission``: false-allow rate vs omission probability (ATR paper §5, §7).

One row per workload × mechanism × omission rate p × linking, beside the
totals over the workloads (``workload`` = ``all``), computed from the records:

- **false_allow_rate** = false allows / executions (an effect released
  although the oracle, the blocking mutation's declared BLOCK, forbids it;
  the one definition of :mod:`analysis.revalidation.counting`),
  with its exact 95% binomial interval (``ci_low``, ``ci_high``);
- **exposed_share** = the share of executions whose critical edge matters:
  the change touches a critical edge (scenario data) and the linking leaves
  that edge missing once the fault drops it.  Conservative linking restores
  every edge, so its share is 0;
- **expected_rate** = p × exposed_share, what a mechanism that trusts the
  recorded graph (ATR) should show, and ``expected_low``/``expected_high``,
  the central 95% interval of Binomial(executions, expected_rate) / executions;
  ``within_expected`` says whether the measured rate lies inside it.  FullScan,
  run as a control, ignores the graph, so the expectation does not apply to it;
- **premises_per_change** = premises evaluated / changes applied, averaged:
  the cost of conservative linking.
"""
from __future__ import annotations

import math

import pandas as pd

from analysis.reference import reference
from analysis.report import Section, markdown_table, row
from analysis.revalidation.counting import classify, order_with_all, plural, run_counts, with_all
from analysis.stats import binomial_ci, expectation_interval

KEYS = ["workload", "mechanism", "rate", "linking"]
LINKING_ORDER = ["exact", "conservative"]
COLUMNS = [*KEYS, "executions", "omitted", "critical_share", "exposed_share", "false_allows", "false_allow_rate",
           "ci_low", "ci_high", "expected_rate", "expected_low", "expected_high", "within_expected",
           "premises_per_change", "premises_evaluated", "links"]


def table(records: pd.DataFrame) -> pd.DataFrame:
    counted = records.assign(per_change=records["premises_evaluated"] / records["changes"],
                             false_allow=classify(records)["false_allow"])
    g = with_all(counted, ["workload"]).groupby(KEYS, sort=False)
    out = pd.DataFrame({
        "executions": g.size(),
        "omitted": g["omitted"].sum(),
        "critical_share": g["critical"].mean(),
        "exposed_share": g["exposed"].mean(),
        "false_allows": g["false_allow"].sum(),
        "premises_per_change": g["per_change"].mean(),
        "premises_evaluated": g["premises_evaluated"].sum(),
        "links": g["links"].mean(),
    }).reset_index()
    out["false_allow_rate"] = out["false_allows"] / out["executions"]
    out[["ci_low", "ci_high"]] = [binomial_ci(k, n) for k, n in zip(out["false_allows"], out["executions"])]
    out["expected_rate"] = out["rate"] * out["exposed_share"]
    out[["expected_low", "expected_high"]] = [expectation_interval(n, e) for n, e in zip(out["executions"], out["expected_rate"])]
    out["within_expected"] = (out["false_allow_rate"] >= out["expected_low"]) & (out["false_allow_rate"] <= out["expected_high"])
    out["workload"] = pd.Categorical(out["workload"], order_with_all(records["workload"]), ordered=True)
    out["mechanism"] = pd.Categorical(out["mechanism"], list(dict.fromkeys(records["mechanism"])), ordered=True)
    out["linking"] = pd.Categorical(out["linking"], LINKING_ORDER, ordered=True)
    out = out.sort_values(KEYS).reset_index(drop=True).astype({"workload": str, "mechanism": str, "linking": str})
    return out[COLUMNS].astype({"omitted": int, "false_allows": int, "premises_evaluated": int})


def totals(tab: pd.DataFrame) -> pd.DataFrame:
    """The rows over every workload (one per mechanism × rate × linking)."""
    return tab[tab["workload"] == "all"].reset_index(drop=True)


def paper_rate(mechanism: str, linking: str, rate: float) -> float | None:
    for v in reference("revalidation_omission").get("values", []):
        if (v["mechanism"], v["linking"], v["metric"]) == (mechanism, linking, "false_allow_rate") \
                and math.isclose(v["rate"], rate):
            return v["value"]
    return None


def pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def cost(tab: pd.DataFrame) -> pd.DataFrame:
    """Per mechanism × rate (all workloads): what conservative linking costs and the false allows it removes."""
    pair = totals(tab).pivot_table(index=["mechanism", "rate"], columns="linking", sort=False,
                           values=["premises_per_change", "premises_evaluated", "false_allows"]).dropna()
    out = pd.DataFrame({
        "premises_per_change_exact": pair["premises_per_change"]["exact"],
        "premises_per_change_conservative": pair["premises_per_change"]["conservative"],
        "false_allows_exact": pair["false_allows"]["exact"].astype(int),
        "false_allows_conservative": pair["false_allows"]["conservative"].astype(int),
    })
    out["false_allows_removed"] = out["false_allows_exact"] - out["false_allows_conservative"]
    extra = pair["premises_evaluated"]["conservative"] - pair["premises_evaluated"]["exact"]
    out["extra_premises_per_removed"] = (extra / out["false_allows_removed"]).where(out["false_allows_removed"] > 0)
    return out.reset_index()


def report(table: pd.DataFrame, records: pd.DataFrame) -> Section:
    ref = reference("revalidation_omission")
    tab, per_workload = totals(table), table[table["workload"] != "all"]
    rows = []
    for _, t in tab.iterrows():
        paper = paper_rate(t["mechanism"], t["linking"], t["rate"])
        r = row(f"{t['mechanism']}, {t['linking']} linking, p = {100 * t['rate']:g}%: false-allow rate",
                t["false_allow_rate"], paper, "share")
        r["ours"] += f" ({t['false_allows']:,} of {t['executions']:,}; 95% CI {pct(t['ci_low'])}–{pct(t['ci_high'])})"
        if paper is not None:
            r["difference"] += " (paper value " + ("inside" if t["ci_low"] <= paper <= t["ci_high"] else "outside") + " our CI)"
        rows.append(r)

    check = pd.DataFrame({
        "mechanism": tab["mechanism"], "linking": tab["linking"], "p": tab["rate"].map(lambda x: f"{100 * x:g}%"),
        "executions": tab["executions"], "false allows": tab["false_allows"],
        "measured": tab["false_allow_rate"].map(pct),
        "95% CI": [f"{pct(a)}–{pct(b)}" for a, b in zip(tab["ci_low"], tab["ci_high"])],
        "share that matters": tab["exposed_share"].map(lambda x: f"{x:.3f}"),
        "expected (p × share)": tab["expected_rate"].map(pct),
        "95% interval of expectation": [f"{pct(a)}–{pct(b)}" for a, b in zip(tab["expected_low"], tab["expected_high"])],
        "inside": tab["within_expected"].map({True: "yes", False: "**no**"}),
    })
    c = cost(tab)
    cost_view = pd.DataFrame({
        "mechanism": c["mechanism"], "p": c["rate"].map(lambda x: f"{100 * x:g}%"),
        "premises/change exact": c["premises_per_change_exact"].map(lambda x: f"{x:.3f}"),
        "premises/change conservative": c["premises_per_change_conservative"].map(lambda x: f"{x:.3f}"),
        "false allows exact": c["false_allows_exact"], "false allows conservative": c["false_allows_conservative"],
        "removed": c["false_allows_removed"],
        "extra premises per removed false allow": c["extra_premises_per_removed"].map(
            lambda x: "n/a (none removed)" if pd.isna(x) else f"{x:,.1f}"),
    })
    critical = tab["critical_share"]
    counts = run_counts(records)
    by_workload = pd.DataFrame({
        "workload": per_workload["workload"], "mechanism": per_workload["mechanism"],
        "linking": per_workload["linking"], "p": per_workload["rate"].map(lambda x: f"{100 * x:g}%"),
        "executions": per_workload["executions"], "false allows": per_workload["false_allows"],
        "measured": per_workload["false_allow_rate"].map(pct),
        "expected (p × share)": per_workload["expected_rate"].map(pct),
        "inside": per_workload["within_expected"].map({True: "yes", False: "**no**"}),
    })
    notes = (
        f"Every execution is a blocking case: {plural(counts['workloads'], 'workload')} ("
        + ", ".join(dict.fromkeys(records["workload"])) + f"), each with its blocking variants, under "
        f"{plural(counts['schedules'], 'schedule')}; {counts['executions']:,} executions in all. The fault "
        "drops, with probability p drawn from the execution's seeded RNG, the change's critical edges: field written "
        "→ premise whose declared rule fails on the changed state with a severity that forbids release (computed "
        "from the scenario files, not from a mechanism; a variant that breaks two such premises has two, dropped "
        "together by one draw). A *false allow* is an effect released although the "
        "oracle (BLOCK) forbids it (`analysis/revalidation/counting.py`, the one definition). Share of executions "
        "whose change touches a critical edge: "
        + (f"{critical.min():.3f}" if critical.min() == critical.max() else f"{critical.min():.3f}–{critical.max():.3f} by row")
        + "; the share whose critical edge matters (still missing after "
        "linking) is measured per row, and the expectation is p × that share. A mechanism that trusts the graph "
        "(ATR) should land inside the 95% interval of its expectation; FullScan, if run, is a control that ignores "
        "the graph. Exact and conservative linking run on the same seeds, so their false allows are paired.\n\n"
        "**Does the rate track p?**\n\n" + markdown_table(check) + "\n"
        "**What conservative linking costs** (every recorded read linked to every premise; paper: "
        f"\"{ref.get('claim_conservative', 'no number published')}\"):\n\n" + markdown_table(cost_view) + "\n"
        "**Per workload** (the table's rows beside the totals, `workload = all`):\n\n" + markdown_table(by_workload)
    )
    return Section("revalidation_omission", "Dependency omission: false-allow rate vs omission probability", rows, notes)
