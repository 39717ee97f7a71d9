"""Figure: cell x framework@release, each cell coloured by its verdict and labelled with the properties it violates.

Serves issue 27 §2 (the per-cell frameworks matrix): the columns are the
table's ``fault_cell`` values grouped as its ``group`` column says (crash,
second resume or fork, race, other), the text in a violated cell is the
table's ``violated`` column.  Draws this run's table only.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from figures.save import save

COLORS = {"violates": "#d95f02", "holds": "#e8f4e8", "unknown": "#bbbbbb", "n/a": "white"}


def kind(verdict: str) -> str:
    """The colour key of a cell's verdict text (``violates EO, CO`` -> ``violates``)."""
    return verdict.split(" ", 1)[0]


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    rows = list(dict.fromkeys(table["runtime"]))
    cols = list(dict.fromkeys(zip(table["group"], table["fault_cell"])))
    fig, ax = plt.subplots(figsize=(0.55 * len(cols) + 3.0, 0.42 * len(rows) + 2.6))
    at = {(r.runtime, r.fault_cell): r for r in table.itertuples()}
    for i, rt in enumerate(rows):
        for j, (_g, cell) in enumerate(cols):
            r = at.get((rt, cell))
            v = r.verdict if r is not None else "n/a"
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=COLORS.get(kind(v), "white"), edgecolor="grey",
                                       lw=0.5))
            label = r.violated.replace(",", "\n") if r is not None and r.violated else ("?" if kind(v) == "unknown"
                                                                                        else "")
            ax.text(j + 0.5, i + 0.5, label, ha="center", va="center", fontsize=5.5)
    ax.set_xlim(0, len(cols))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([j + 0.5 for j in range(len(cols))], [f"{c} ({g})" for g, c in cols], rotation=70, ha="right",
                  fontsize=6)
    ax.set_yticks([i + 0.5 for i in range(len(rows))], rows, fontsize=7)
    ax.set_title("cell x framework@release: the properties each cell violates (orange), ? unknown, white n/a",
                 fontsize=8)
    fig.tight_layout()
    return save(fig, out)
