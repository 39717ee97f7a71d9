"""Figure ``isolation_levels``: the profile x anomaly matrix as a grid (paper Table 2).

Dark cells: the anomaly occurs (its checker flagged the witness history run
under the profile); light: prevented; grey: unknown.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from figures.save import save  # noqa: E402

SHADE = {"occurs": 0.85, "prevented": 0.1, "unknown": 0.5}


def grid(tab: pd.DataFrame, row_key: str, out: Path, title: str) -> list[Path]:
    rows = list(dict.fromkeys(tab[row_key]))
    cols = list(dict.fromkeys(tab["anomaly"]))
    cell = {(r, c): v for r, c, v in zip(tab[row_key], tab["anomaly"], tab["verdict"])}
    data = [[SHADE.get(cell.get((r, c), "unknown"), 0.5) for c in cols] for r in rows]
    fig, ax = plt.subplots(figsize=(1.5 + 1.4 * len(cols), 0.8 + 0.32 * len(rows)))
    ax.imshow(data, cmap="Reds", vmin=0, vmax=1, aspect="auto")
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            v = cell.get((r, c), "-")
            ax.text(j, i, v, ha="center", va="center", fontsize=7, color="white" if v == "occurs" else "black")
    ax.set_xticks(range(len(cols)), [c.replace("_", "\n") for c in cols], fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    return save(fig, out)


def draw(records: pd.DataFrame, tab: pd.DataFrame, out: Path) -> list[Path]:
    return grid(tab, "profile", out, "witness history of each anomaly, run under each profile")
