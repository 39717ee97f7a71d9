"""Table ``revalidation_durable``: the durable SQLite checkpoint/resume cells (ATR paper §5, Figure 2).

Paper: "In ten durable SQLite checkpoint/resume cells, ATR evaluated 0.6
conditions per change versus 6.0 for FullScan; FullScan and ATR matched all
100 executions per method."  One row per cell (``workload/mutation_class``)
and mechanism, beside the totals: per workload (``<workload>/all``), per
class over the workloads (``all/<class>``) and over everything (cell
``all``, ``workload`` = ``mutation_class`` = ``all``):

- **oracle_agreement** — share of executions whose outcome is the mutation's
  declared oracle;
- **released**, **invalid_effects**, **false_allows** — effects committed,
  and the counts of :mod:`analysis.revalidation.counting` (the one
  definition every revalidation table uses);
- **premises_per_change** — premises the resumed process evaluated, per
  change the second actor made, averaged over executions;
- **valid**, **invalid**, **unknown** — the ``oracle_agreement`` checker's
  verdicts on the cell's history (an execution whose step process died is
  unknown, never valid).
"""
from __future__ import annotations

import pandas as pd

from analysis.reference import paper_value, reference
from analysis.report import Section, row
from analysis.revalidation.counting import NOTES, order_with_all, plural, with_all, with_counts
from vocabulary.revalidation import MUTATION_CLASSES

KEYS = ["workload", "mutation_class", "mechanism"]
COLUMNS = ["workload", "mutation_class", "cell", "mechanism", "executions", "oracle_agreement", "released",
           "invalid_effects", "false_allows", "premises_per_change", "valid", "invalid", "unknown"]


def cell_names(records: pd.DataFrame) -> pd.Series:
    """``workload/mutation_class``: a durable cell without its mechanism."""
    return records["workload"] + "/" + records["mutation_class"]


def cell_order(records: pd.DataFrame) -> list[str]:
    """Workloads in record order, mutation classes in their declared order."""
    rank = {c: i for i, c in enumerate(MUTATION_CLASSES)}
    workloads = list(dict.fromkeys(records["workload"]))
    pairs = set(zip(records["workload"], records["mutation_class"]))
    return [f"{w}/{c}" for w, c in sorted(pairs, key=lambda p: (workloads.index(p[0]), rank.get(p[1], len(rank)), p[1]))]


def _aggregate(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    g = frame.groupby(keys, sort=False)
    return pd.DataFrame({
        "executions": g.size(),
        "oracle_agreement": g["agree"].mean(),
        "released": g["released"].sum(),
        "invalid_effects": g["invalid_effect"].sum(),
        "false_allows": g["false_allow"].sum(),
        "premises_per_change": g["premises_per_change"].mean(),
        **{v: g[v].sum() for v in ("valid", "invalid", "unknown")},
    }).reset_index()


def table(records: pd.DataFrame) -> pd.DataFrame:
    verdicts = records["verdict"] if "verdict" in records else pd.Series("unknown", index=records.index)
    counted = with_counts(records, KEYS).assign(released=records["released"].astype(bool).to_numpy(),
                                                **{v: (verdicts == v).to_numpy() for v in ("valid", "invalid", "unknown")})
    out = _aggregate(with_all(counted, ["workload", "mutation_class"]), KEYS)
    both_all = (out["workload"] == "all") & (out["mutation_class"] == "all")
    out["cell"] = (out["workload"] + "/" + out["mutation_class"]).where(~both_all, "all")
    rank = {c: i for i, c in enumerate(MUTATION_CLASSES)}
    classes = sorted(set(records["mutation_class"]), key=lambda c: (rank.get(c, len(rank)), c)) + ["all"]
    out["workload"] = pd.Categorical(out["workload"], order_with_all(records["workload"]), ordered=True)
    out["mutation_class"] = pd.Categorical(out["mutation_class"], classes, ordered=True)
    out["mechanism"] = pd.Categorical(out["mechanism"], list(dict.fromkeys(records["mechanism"])), ordered=True)
    out = out.sort_values(KEYS).reset_index(drop=True)[COLUMNS]
    return out.astype({"workload": str, "mutation_class": str, "mechanism": str, "released": int,
                       "invalid_effects": int, "false_allows": int, "valid": int, "invalid": int, "unknown": int})


def cells_only(tab: pd.DataFrame) -> pd.DataFrame:
    """The rows of real cells (one workload, one class)."""
    return tab[(tab["workload"] != "all") & (tab["mutation_class"] != "all")]


def totals(tab: pd.DataFrame) -> pd.DataFrame:
    """The rows over every cell, indexed by mechanism."""
    return tab[tab["cell"] == "all"].set_index("mechanism")


def same_outcomes(records: pd.DataFrame, a: str, b: str) -> tuple[int, int]:
    """(executions where mechanisms a and b gave the same outcome on the same seed, executions paired)."""
    keys = ["workload", "mutation_class", "repetition", "seed"]
    pa = records[records["mechanism"] == a][keys + ["outcome"]]
    pb = records[records["mechanism"] == b][keys + ["outcome"]]
    paired = pa.merge(pb, on=keys, suffixes=("_a", "_b"))
    return int((paired["outcome_a"] == paired["outcome_b"]).sum()), len(paired)


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    ref = reference("revalidation_durable")
    paper_n = ref.get("executions_per_method")
    per_cell, total = cells_only(tab), totals(tab)
    cells = per_cell["cell"].nunique()
    workloads = list(dict.fromkeys(per_cell["workload"]))
    classes = per_cell["mutation_class"].nunique()
    rows = [row("durable cells", cells, ref.get("cells"), "size"),
            row("executions per mechanism per cell", int(per_cell["executions"].min()), paper_n, "size"),
            row("processes per execution (parent, decide, second actor, resume), fewest seen",
                int(records["processes"].min()), None, "count")]
    for m, t in total.iterrows():
        n = int(t["executions"])
        ppc = paper_value("revalidation_durable", mechanism=m, metric="premises_per_change")
        rows.append(row(f"{m}: premises per resumed change", t["premises_per_change"], ppc and ppc["value"]))
        agree = paper_value("revalidation_durable", mechanism=m, metric="oracle_agreement")
        worst = per_cell[per_cell["mechanism"] == m].sort_values("oracle_agreement", kind="stable").iloc[0]
        rows.append(row(f"{m}: executions agreeing with the oracle, least-agreeing cell ({worst['cell']})",
                        round(worst["oracle_agreement"] * worst["executions"]), agree and agree["value"], "count",
                        ours_of=int(worst["executions"]), paper_of=agree and paper_n))
        rows.append(row(f"{m}: executions agreeing with the oracle, all cells", round(t["oracle_agreement"] * n), None,
                        "count", ours_of=n))
        if t["invalid_effects"]:
            rows.append(row(f"{m}: invalid effects released", int(t["invalid_effects"]), None, "count", ours_of=n))
    if {"ATR", "FullScan"} <= set(total.index):
        atr = per_cell[per_cell["mechanism"] == "ATR"].set_index("cell")["premises_per_change"]
        full = per_cell[per_cell["mechanism"] == "FullScan"].set_index("cell")["premises_per_change"]
        both = atr.index.intersection(full.index)
        rows.append(row("cells where ATR evaluated fewer premises per change than FullScan",
                        int((atr[both] < full[both]).sum()), None, "count", ours_of=len(both)))
        rows.append(row("cells where ATR evaluated no premise (no changed field feeds one)", int((atr == 0).sum()),
                        None, "count", ours_of=len(atr)))
        same, paired = same_outcomes(records, "ATR", "FullScan")
        rows.append(row("executions where ATR and FullScan gave the same outcome (same seed)", same, None, "count",
                        ours_of=paired))
    notes = (
        "Each execution runs in three real processes, started one after the other, each with its own SQLite "
        "connections: the first reads the business database, decides and writes the agent transaction's checkpoint "
        "(JSON) to a workflow database, then exits; the second actor applies the mutation to the business database; "
        "a third process resumes from the checkpoint, validates and commits the effect under the mechanism's tokens "
        "in one `BEGIN IMMEDIATE` transaction, and writes its result row. "
        f"The {plural(cells, 'cell')} are the lab's choice (the paper does not list its own): "
        f"{plural(len(workloads), 'workload')} ({', '.join(f'**{w}**' for w in workloads)}) × "
        f"{plural(classes, 'mutation class')}; the variant "
        "of a repetition is picked by its seed, the same for every mechanism, and the oracle is the mutation's "
        "declared outcome. " + NOTES + " The table has rows per workload (`<workload>/all`) and per class "
        "(`all/<class>`) beside the totals (`all`). *Premises per resumed change* is premises evaluated by the resuming process divided by "
        "the changes the second actor made, averaged over executions. ATR evaluates only the premises that read "
        "the changed field, so its mean over the cells is set by how many cells change a field no premise reads "
        "(row \"cells where ATR evaluated no premise\"); the paper does not publish its cells, so the "
        "difference from its published value cannot be traced to a cell. FullScan evaluates every recorded premise of the "
        f"workload at each validation. The paper's \"{paper_n} executions per method\" is read as {paper_n} per "
        "mechanism per cell (the paper profile's size), so the paper's agreement "
        "stands beside each mechanism's least-agreeing cell; where run sizes differ the rows compare shares."
    )
    return Section("revalidation_durable", "Durable SQLite checkpoint/resume cells", rows, notes)
