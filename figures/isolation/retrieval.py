"""Figure ``isolation_retrieval``: share of executions whose controlled document came back, per profile (paper Figure 1)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from figures.save import save  # noqa: E402


def draw(records: pd.DataFrame, tab: pd.DataFrame, out: Path) -> list[Path]:
    labels = [f"{p}\n({c})" for p, c in zip(tab["profile"], tab["contract"])]
    ok = tab["controlled_document_returned"] / tab["executions"]
    refused = tab["refused"] / tab["executions"]
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(tab), 3.2))
    ax.bar(range(len(tab)), ok, color="tab:green", label="controlled document returned")
    ax.bar(range(len(tab)), refused, bottom=ok, color="tab:grey", label="refused")
    ax.set_xticks(range(len(tab)), labels, fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share of executions")
    ax.legend(fontsize=7, frameon=False, loc="lower right")
    fig.tight_layout()
    return save(fig, out)
