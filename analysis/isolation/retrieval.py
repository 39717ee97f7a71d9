"""Table ``isolation_retrieval``: did the controlled document come back after the model deployment? (paper Figure 1)

One row per (profile, contract) from the records: ``controlled_document_returned``
and ``refused`` are counts of executions, out of ``executions``.  The report
adds the control (the first query, before the deployment, found the
controlled document) and the chance level (a model querying an index built
in another space returns the controlled document about once in
``documents`` executions).
"""
from __future__ import annotations

import pandas as pd

from analysis.isolation.levels import ordered
from analysis.reference import reference
from analysis.report import Section, row
from analysis.stats import binomial_ci

COLUMNS = ["profile", "contract", "controlled_document_returned", "refused", "executions"]
ORDER = ("SRC", "RSR", "CR", "SSI", "StaticPinning")


def table(records: pd.DataFrame) -> pd.DataFrame:
    g = records.groupby(["profile", "contract"], sort=False)
    out = pd.DataFrame({"controlled_document_returned": g["controlled_document_returned"].sum().astype(int),
                        "refused": g["refused"].sum().astype(int), "executions": g.size()}).reset_index()
    order = ordered(out["profile"], ORDER)
    return out.sort_values("profile", key=lambda s: s.map(order)).reset_index(drop=True)[COLUMNS]


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    rows = []
    for r in tab.itertuples():
        lo, hi = binomial_ci(r.controlled_document_returned, r.executions)
        x = row(f"{r.profile} ({r.contract} contract): controlled document returned after the deployment",
                r.controlled_document_returned, None, "count", ours_of=r.executions)
        x["ours"] += f"; 95% CI {100 * lo:.1f}-{100 * hi:.1f}%; refused {r.refused}"
        rows.append(x)
    control = int(records["first_correct"].sum())
    rows.append(row("control: first query (before the deployment) returned the controlled document", control, None,
                    "count", ours_of=len(records)))
    docs = int(records["documents"].iloc[0])
    src = tab[tab["profile"] == "SRC"]
    claim = ""
    if not src.empty:
        s = src.iloc[0]
        claim = (f" Under SRC the live model 2 queried index 1 and returned the controlled document in "
                 f"{s.controlled_document_returned} of {s.executions} executions (chance level about 1/{docs}): the "
                 "paper's Figure 1 failure, reproduced on a real vector index.")
    notes = ("Qdrant in local mode (qdrant-client, in-process), one collection per index version, cosine distance; "
             f"{docs} documents; embedders made by the lab (seeded projections of token hashes, 64 dimensions; model 2 "
             "has the same dimension and another space), nothing downloaded. Every profile sees the same corpus and "
             "the same controlled documents (seeds do not depend on the profile). The paper publishes no counts: "
             f"\"{reference('isolation_retrieval').get('source', '')}\"." + claim)
    return Section("isolation_retrieval", "The retrieval workflow after a model deployment (paper Figure 1)", rows, notes)
