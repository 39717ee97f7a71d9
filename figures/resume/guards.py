"""Figure: guard x property, holds / violates / unknown / not covered (the table ``resume_guards`` draws from).

Serves issue 26 §4: each guard judged on what it claims; a property outside its claim is drawn hatched, never
as a violation.  Draws this run's table only.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from figures.save import save

COLUMNS = ("PC", "EO", "FD", "CV", "CO", "RD", "liveness", "CO (inert)")
COLORS = {"violates": "#d95f02", "holds": "#e8f4e8", "unknown": "#bbbbbb", "n/a": "white", "not covered": "white"}
MARKS = {"violates": "x", "unknown": "?", "n/a": "n/a", "holds": "", "not covered": "-"}


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    rows = list(table["runtime"])
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.4))
    for i, line in enumerate(table.to_dict("records")):
        for j, col in enumerate(COLUMNS):
            v = line.get(col, "n/a")
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=COLORS.get(v, "white"), edgecolor="grey", lw=0.5,
                                       hatch="//" if v == "not covered" else None))
            ax.text(j + 0.5, i + 0.5, MARKS.get(v, v), ha="center", va="center", fontsize=8)
    ax.set_xlim(0, len(COLUMNS))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([j + 0.5 for j in range(len(COLUMNS))], COLUMNS, fontsize=8)
    ax.set_yticks([i + 0.5 for i in range(len(rows))], rows, fontsize=8)
    ax.set_title("guard x property: x violated, ? unknown, hatched = not claimed by the guard", fontsize=9)
    fig.tight_layout()
    return save(fig, out)
