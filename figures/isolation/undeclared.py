"""Figure: the reviewers' falsifier, share of executions that admit the wrong document, per contract and policy.

Serves the undeclared-contract experiment (beyond the SemIso paper,
arXiv 2608.05412): with the index->model contract declared, omitted or
stale, SSI alone admits the wrong document; fail-closed admission and
contract inference close it.  Bars are this run's counts over executions.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from figures.save import save


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    contracts = list(dict.fromkeys(table["contract"]))
    policies = list(dict.fromkeys(table["policy"]))
    width = 0.8 / max(len(policies), 1)
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    for k, policy in enumerate(policies):
        rows = table[table["policy"] == policy].set_index("contract")
        shares = [rows.loc[c, "wrong_document_admitted"] / rows.loc[c, "executions"] if c in rows.index else 0.0
                  for c in contracts]
        ax.bar([i + k * width for i in range(len(contracts))], shares, width, label=policy)
    ax.set_xticks([i + width * (len(policies) - 1) / 2 for i in range(len(contracts))], contracts)
    ax.set_ylabel("wrong document admitted (share)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8, frameon=False)
    ax.set_title("undeclared contracts: what each admission policy lets through", fontsize=10)
    fig.tight_layout()
    return save(fig, out)
