"""Figure ``revalidation_durable``: the durable SQLite cells (ATR paper Figure 2, left; §5 "Durable workflow cells").

Two panels over the cells (``workload/mutation_class``), read from the
artifact's table:

- oracle agreement per cell and mechanism, a grid of cells coloured by the
  share and labelled "agreeing/executions";
- premises evaluated per resumed change per cell, for the mechanisms that
  evaluate premises at all (ATR and FullScan; NoCheck and VersionAbort
  evaluate none), each bar labelled with its value.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from figures.save import save  # noqa: E402

COLORS = {"NoCheck": "#c0392b", "VersionAbort": "#f0a030", "FullScan": "#8fbcd4", "ATR": "#2c6e49"}


def _labels(cells: list[str]) -> list[str]:
    return [c.replace("/", "\n").replace("_", "\n") for c in cells]


def _agreement(ax, frame: pd.DataFrame, cells: list[str], mechanisms: list[str]) -> None:
    grid = frame.pivot(index="mechanism", columns="cell", values="oracle_agreement").reindex(index=mechanisms, columns=cells)
    runs = frame.pivot(index="mechanism", columns="cell", values="executions").reindex(index=mechanisms, columns=cells)
    ax.imshow(grid.to_numpy(dtype=float), cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    for i, mech in enumerate(mechanisms):
        for j, cell in enumerate(cells):
            n, share = runs.loc[mech, cell], grid.loc[mech, cell]
            if pd.notna(n):
                ax.text(j, i, f"{round(share * n):.0f}/{n:.0f}", ha="center", va="center", fontsize=6, color="white")
    ax.set_yticks(range(len(mechanisms)), mechanisms, fontsize=8)
    ax.set_xticks(range(len(cells)), _labels(cells), fontsize=6)
    ax.set_title("Executions agreeing with the oracle, per durable cell")


def _premises(ax, frame: pd.DataFrame, cells: list[str], mechanisms: list[str]) -> None:
    width = 0.8 / max(len(mechanisms), 1)
    x = np.arange(len(cells))
    for i, mech in enumerate(mechanisms):
        values = frame[frame["mechanism"] == mech].set_index("cell")["premises_per_change"].reindex(cells, fill_value=0)
        bars = ax.bar(x + (i - (len(mechanisms) - 1) / 2) * width, values, width, label=mech,
                      color=COLORS.get(mech, f"C{i}"), edgecolor="white", linewidth=0.5)
        ax.bar_label(bars, fmt="%.2g", fontsize=6, padding=1)
    ax.set_xticks(x, _labels(cells), fontsize=6)
    ax.set_ylabel("premises evaluated per resumed change")
    ax.set_title("Work at resume" + (f" ({' vs '.join(mechanisms)})" if mechanisms else ""))
    ax.margins(y=0.12)
    if mechanisms:
        ax.legend(fontsize=7, ncol=len(mechanisms), loc="upper right", frameon=False)


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    per_cell = table[(table["workload"] != "all") & (table["mutation_class"] != "all")]  # real cells only
    cells = list(dict.fromkeys(per_cell["cell"]))
    mechanisms = list(dict.fromkeys(per_cell["mechanism"]))
    counting = [m for m in mechanisms if per_cell.loc[per_cell["mechanism"] == m, "premises_per_change"].max() > 0]
    fig, (left, right) = plt.subplots(1, 2, figsize=(16, 4.4))
    _agreement(left, per_cell, cells, mechanisms)
    _premises(right, per_cell, cells, counting)
    fig.tight_layout()
    return save(fig, out)
