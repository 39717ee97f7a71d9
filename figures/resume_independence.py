"""Figure: the independence matrix as a grid, fault switch x property, violated cells filled.

Serves the paper's 39-cell independence matrix (arXiv 2608.03836).  The
figure draws this run's table only; the report's matrix sets each cell
beside the paper's and names every cell that differs.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from figures.save import save
from vocabulary.resume import PROPERTIES

ORDER = (*PROPERTIES, "liveness")


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    switches = list(dict.fromkeys(table["fault_switch"]))
    cells = {(s, p): v for s, p, v in zip(table["fault_switch"], table["property"], table["verdict"])}
    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(switches) + 1.2))
    for i, s in enumerate(switches):
        for j, p in enumerate(ORDER):
            v = cells.get((s, p), "-")
            color = {"violated": "#d95f02", "holds": "#e8f4e8", "unknown": "#bbbbbb"}.get(v, "white")
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=color, edgecolor="grey", lw=0.5))
            ax.text(j + 0.5, i + 0.5, "x" if v == "violated" else "", ha="center", va="center")
    ax.set_xlim(0, len(ORDER))
    ax.set_ylim(len(switches), 0)
    ax.set_xticks([j + 0.5 for j in range(len(ORDER))], ORDER)
    ax.set_yticks([i + 0.5 for i in range(len(switches))], switches)
    ax.set_title("property broken by each fault switch (x)", fontsize=10)
    fig.tight_layout()
    return save(fig, out)
