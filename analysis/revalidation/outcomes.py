"""Table ``revalidation_outcomes``: controlled outcomes per workload × mechanism × mutation class (ATR paper Table 3).

One row per workload × mechanism × mutation class, beside the totals: the
rows whose ``workload`` is ``all`` sum every workload, the rows whose
``mutation_class`` is ``all`` sum every class.  The counting rules (invalid
effects, false allows, false blocks, unnecessary replans, oracle agreement,
premises per change) live in :mod:`analysis.revalidation.counting`; the
report states them.
"""
from __future__ import annotations

import pandas as pd

from analysis.reference import paper_value, reference
from analysis.report import Section, markdown_table, row
from analysis.revalidation.counting import NOTES, order_with_all, plural, run_counts, with_all, with_counts
from vocabulary.revalidation import MUTATION_CLASSES

KEYS = ["workload", "mechanism", "mutation_class"]
COLUMNS = [*KEYS, "executions", "oracle_agreement", "false_allows", "false_blocks", "invalid_effects",
           "unnecessary_replans", "premises_per_change"]
COUNT_COLUMNS = ["false_allows", "false_blocks", "invalid_effects", "unnecessary_replans"]


def _aggregate(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    g = frame.groupby(keys, sort=False)
    return pd.DataFrame({
        "executions": g.size(),
        "oracle_agreement": g["agree"].mean(),
        "false_allows": g["false_allow"].sum(),
        "false_blocks": g["false_block"].sum(),
        "invalid_effects": g["invalid_effect"].sum(),
        "unnecessary_replans": g["unnecessary_replan"].sum(),
        "premises_per_change": g["premises_per_change"].mean(),
    }).reset_index()


def table(records: pd.DataFrame) -> pd.DataFrame:
    frame = with_all(with_counts(records, KEYS), ["workload", "mutation_class"])
    out = _aggregate(frame, KEYS)[COLUMNS]
    seen = list(dict.fromkeys(records["mutation_class"]))
    classes = [c for c in MUTATION_CLASSES if c in seen] + [c for c in seen if c not in MUTATION_CLASSES] + ["all"]
    out["workload"] = pd.Categorical(out["workload"], order_with_all(records["workload"]), ordered=True)
    out["mechanism"] = pd.Categorical(out["mechanism"], list(dict.fromkeys(records["mechanism"])), ordered=True)
    out["mutation_class"] = pd.Categorical(out["mutation_class"], classes, ordered=True)
    out = out.sort_values(KEYS).reset_index(drop=True)
    return out.astype({"workload": str, "mechanism": str, "mutation_class": str, **dict.fromkeys(COUNT_COLUMNS, int)})


def totals(tab: pd.DataFrame) -> pd.DataFrame:
    """The rows over every workload and every class: one per mechanism."""
    return tab[(tab["workload"] == "all") & (tab["mutation_class"] == "all")]


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    ref = reference("revalidation_outcomes")
    paper_n = ref.get("executions_per_mechanism")
    rows = []
    for _, t in totals(tab).iterrows():
        m, n = t["mechanism"], int(t["executions"])
        rows.append(row(f"{m}: executions", n, paper_n, "size"))
        agreement = paper_value("revalidation_outcomes", mechanism=m, metric="oracle_agreement")
        rows.append(row(f"{m}: oracle agreement", t["oracle_agreement"], agreement and agreement["value"], "share"))
        for metric in COUNT_COLUMNS:
            p = paper_value("revalidation_outcomes", mechanism=m, metric=metric)
            rows.append(row(f"{m}: {metric.replace('_', ' ')}", int(t[metric]), p and p["value"], "count",
                            ours_of=n, paper_of=paper_n))
    counts = run_counts(records)
    per_workload = tab[(tab["workload"] != "all") & (tab["mutation_class"] == "all")]
    view = pd.DataFrame({
        "workload": per_workload["workload"], "mechanism": per_workload["mechanism"],
        "executions": per_workload["executions"],
        "oracle agreement": per_workload["oracle_agreement"].map(lambda x: f"{100 * x:.2f}%"),
        **{c.replace("_", " "): per_workload[c] for c in COUNT_COLUMNS},
    })
    notes = (
        f"This run: {plural(counts['workloads'], 'workload')} × {plural(counts['mutation_classes'], 'mutation class')} "
        f"= {plural(counts['mutation_cases'], 'mutation case')}, under {plural(counts['schedules'], 'schedule')}, "
        f"{plural(counts['mechanisms'], 'mechanism')}, {counts['executions']:,} executions in all; counts are computed "
        "from this run's records (one per execution). " + NOTES + " The oracle does not depend on the schedule "
        "(schedule s7's first change is one the case's oracle dominates, and the loader checks every such pair; see "
        "`scenarios/revalidation/schedules.toml`). The workloads, their mutation cases and the schedules are the lab's "
        "declarations where the paper is silent. Where the run is smaller than the paper's, counts are compared as "
        "shares. The table has a row per workload beside the totals (`workload = all`).\n\n"
        "**Per workload** (every mutation class):\n\n" + markdown_table(view)
    )
    return Section("revalidation_outcomes", "Controlled outcomes of the four mechanisms", rows, notes)
