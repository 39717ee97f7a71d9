"""Figure: configuration x point of the power loss, each cell the effects fired (0 / 1 / 2+), red where not once.

Serves issue 31.  Draws the table's ``effects``, ``liveness``, ``acknowledged_kept`` and ``store_loads`` per cell
(one column per point, flush and fault).  This run's table only.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from figures.save import save


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    rows = list(dict.fromkeys(table["runtime"]))
    cols = list(dict.fromkeys(zip(table["point"], table["flush_at_park"], table["fault"])))
    fig, ax = plt.subplots(figsize=(1.1 * len(cols) + 3.5, 0.5 * len(rows) + 2.2))
    at = {(r.runtime, r.point, r.flush_at_park, r.fault): r for r in table.itertuples()}
    for i, rt in enumerate(rows):
        for j, key in enumerate(cols):
            r = at.get((rt, *key))
            if r is None:
                continue
            ok = bool(r.store_loads) and r.effects == 1 and r.liveness == "valid" and bool(r.acknowledged_kept)
            text = "lost" if not r.store_loads else f"{r.effects}x" + ("" if r.liveness == "valid" else " stuck")
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor="#e8f4e8" if ok else "#d95f02", edgecolor="grey",
                                       lw=0.5))
            ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=7)
    ax.set_xlim(0, len(cols))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([j + 0.5 for j in range(len(cols))],
                  [f"{p}\n{'flushed' if f else 'fresh'}, {fault}" for p, f, fault in cols], fontsize=6, rotation=30,
                  ha="right")
    ax.set_yticks([i + 0.5 for i in range(len(rows))], rows, fontsize=7)
    ax.set_title("power loss: effects fired per cell (orange: not once, stuck, or acknowledged progress lost)",
                 fontsize=8)
    fig.tight_layout()
    return save(fig, out)
