"""Table ``revalidation_outcomes``: controlled outcomes per mechanism × mutation class (ATR paper Table 3).

Counting (DESIGN.md, "Counting"; the report states it):

- an **invalid effect** is an effect released although the oracle says
  REFRESH, REPLAN or BLOCK and the mechanism did not do what it says (for a
  REFRESH oracle: released with the stale payload, i.e. outcome KEEP);
- a **false allow** is an invalid effect whose oracle is REPLAN or BLOCK:
  the action should not have happened at all (a subset of invalid effects);
- a **false block** is REPLAN or BLOCK where the oracle says KEEP or REFRESH;
- an **unnecessary replan** is REPLAN where the oracle says KEEP (the paper's
  "safe changes");
- **premises per change** is premises evaluated / changes applied, averaged.
"""
from __future__ import annotations

import pandas as pd

from analysis.reference import paper_value, reference
from analysis.report import Section, row
from vocabulary.revalidation import MUTATION_CLASSES, Outcome

COLUMNS = ["mechanism", "mutation_class", "executions", "oracle_agreement", "false_allows", "false_blocks",
           "invalid_effects", "unnecessary_replans", "premises_per_change"]
RANK = {o.name: int(o) for o in Outcome}


def classify(records: pd.DataFrame) -> pd.DataFrame:
    """Per-execution booleans of the counting rules above."""
    outcome, oracle = records["outcome"].map(RANK), records["oracle"].map(RANK)
    released = records["released"].astype(bool)
    return pd.DataFrame({
        "mechanism": records["mechanism"], "mutation_class": records["mutation_class"],
        "agree": outcome == oracle,
        "false_allow": released & (oracle >= Outcome.REPLAN),
        "false_block": (outcome >= Outcome.REPLAN) & (oracle <= Outcome.REFRESH),
        "invalid_effect": released & (oracle > outcome),
        "unnecessary_replan": (outcome == Outcome.REPLAN) & (oracle == Outcome.KEEP),
        "premises_per_change": records["premises_evaluated"] / records["changes"],
    })


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
    c = classify(records)
    per_class = _aggregate(c, ["mechanism", "mutation_class"])
    total = _aggregate(c, ["mechanism"]).assign(mutation_class="all")
    mech_order = list(dict.fromkeys(records["mechanism"]))
    seen = set(records["mutation_class"])
    class_order = [c for c in MUTATION_CLASSES if c in seen] + sorted(seen - set(MUTATION_CLASSES)) + ["all"]
    out = pd.concat([per_class, total], ignore_index=True)[COLUMNS]
    out["mechanism"] = pd.Categorical(out["mechanism"], mech_order, ordered=True)
    out["mutation_class"] = pd.Categorical(out["mutation_class"], class_order, ordered=True)
    out = out.sort_values(["mechanism", "mutation_class"]).reset_index(drop=True)
    return out.astype({"mechanism": str, "mutation_class": str})


def report(tab: pd.DataFrame) -> Section:
    ref = reference("revalidation_outcomes")
    paper_n = ref.get("executions_per_mechanism")
    rows = []
    for _, t in tab[tab["mutation_class"] == "all"].iterrows():
        m, n = t["mechanism"], int(t["executions"])
        rows.append(row(f"{m}: executions", n, paper_n, "count"))
        agreement = paper_value("revalidation_outcomes", mechanism=m, metric="oracle_agreement")
        rows.append(row(f"{m}: oracle agreement", t["oracle_agreement"], agreement and agreement["value"], "share"))
        for metric in ("false_allows", "false_blocks", "invalid_effects", "unnecessary_replans"):
            p = paper_value("revalidation_outcomes", mechanism=m, metric=metric)
            rows.append(row(f"{m}: {metric.replace('_', ' ')}", int(t[metric]), p and p["value"], "count",
                            ours_of=n, paper_of=paper_n))
    notes = (
        "Counts are computed from this run's records (one per execution). An *invalid effect* is an effect "
        "released although the oracle says REFRESH (released with the stale payload), REPLAN or BLOCK; a "
        "*false allow* is the part of those whose oracle is REPLAN or BLOCK; a *false block* is REPLAN or BLOCK "
        "where the oracle says KEEP or REFRESH; an *unnecessary replan* is REPLAN where the oracle says KEEP "
        "(the paper's \"safe changes\" are the KEEP cases). The oracle is each mutation's declared outcome "
        "in its scenario file and does not depend on the schedule (schedule s7's first change is one the case's "
        "oracle dominates; see `scenarios/schedules.toml`). The 15 mutation cases and 7 schedules are the lab's "
        "declarations where the paper is silent. Where the run is smaller than the paper's, counts are compared "
        "as shares."
    )
    return Section("revalidation_outcomes", "Controlled outcomes of the four mechanisms", rows, notes)
