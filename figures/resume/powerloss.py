"""Figure: configuration x point of the power loss, each cell the effects fired (0 / 1 / 2+), orange where not once.

Serves issue 31.  Draws the table's ``effects``, ``liveness``, ``acknowledged_kept`` and ``store_loads`` per cell
(one column per point, flush and fault).  This run's table only.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from figures.grid import draw_grid


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    rows = list(dict.fromkeys(table["runtime"]))
    name = {(r.point, r.flush_at_park, r.fault): f"{r.point}, {'flushed' if r.flush_at_park else 'fresh'}, {r.fault}"
            for r in table.itertuples()}
    verdicts, labels = {}, {}
    for r in table.itertuples():
        k = (r.runtime, name[(r.point, r.flush_at_park, r.fault)])
        if r.liveness == "n/a":  # a point the row's adapter declares unreachable: white, its reason in the table
            verdicts[k], labels[k] = "n/a", "n/a"
            continue
        once = bool(r.store_loads) and r.effects == 1 and r.liveness == "valid" and bool(r.acknowledged_kept)
        verdicts[k] = "holds" if once else "violates"
        labels[k] = "lost" if not r.store_loads else f"{r.effects}x" + ("" if r.liveness == "valid" else " stuck")
    return draw_grid(rows, list(dict.fromkeys(name.values())), verdicts,
                     "power loss: effects fired per cell (orange: not once, stuck, or acknowledged progress lost)",
                     out, labels)
