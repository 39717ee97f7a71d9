"""Figure: the frameworks' Hermitage grid, framework@release x property, each cell holds/violates/unknown/n/a.

Serves issue 14 §4 ("Resume Means Resume", arXiv 2608.03836, profiled six
frameworks by hand; this run measures each release in its own environment).
The figure draws this run's table only; the report sets each cell beside the
artifact's published finding and names the cells that differ.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from figures.save import save

COLUMNS = ("PC", "EO", "FD", "CV", "CO", "RD", "liveness", "CO (inert)")
COLORS = {"violates": "#d95f02", "holds": "#e8f4e8", "unknown": "#bbbbbb", "n/a": "white"}
MARKS = {"violates": "x", "unknown": "?", "n/a": "n/a", "holds": ""}


def grid(table: pd.DataFrame) -> pd.DataFrame:
    """The data the figure draws: runtime x :data:`COLUMNS`, each cell read from the table's column of that name
    (written beside the figure as ``<name>.csv`` so the two can be compared; a test compares them too)."""
    return pd.DataFrame([{"runtime": line["runtime"], **{c: line.get(c, "n/a") for c in COLUMNS}}
                         for line in table.to_dict("records")], columns=["runtime", *COLUMNS])


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    data = grid(table)
    rows = list(data["runtime"])
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.4))
    for i, line in enumerate(data.to_dict("records")):
        for j, col in enumerate(COLUMNS):
            v = line[col]
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=COLORS.get(v, "white"), edgecolor="grey", lw=0.5))
            ax.text(j + 0.5, i + 0.5, MARKS.get(v, v), ha="center", va="center", fontsize=8)
    ax.set_xlim(0, len(COLUMNS))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([j + 0.5 for j in range(len(COLUMNS))], COLUMNS, fontsize=8)
    ax.set_yticks([i + 0.5 for i in range(len(rows))], rows, fontsize=8)
    ax.set_title("framework@release x property: x violated, ? unknown",
                 fontsize=9)
    fig.tight_layout()
    data.to_csv(out.with_suffix(".csv"), index=False)
    return [*save(fig, out), out.with_suffix(".csv")]
