"""Figure: configuration x point of the power loss, each cell the effects fired (0 / 1 / 2+), orange where not once.

Serves issue 31.  Draws the table's ``effects``, ``liveness``, ``acknowledged_kept`` and ``store_loads`` per cell
(one column per point, flush and fault, in the resume path's order; n/a cells white).  This run's table only.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from figures.grid import draw_grid

#: the loss points in the resume path's order (faults.resume.powerloss.POINTS; figures import no faults)
ORDER = ("after_effect", "during_checkpoint_write", "after_save_returned", "after_done")


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    rows = list(dict.fromkeys(table["runtime"]))
    keys = sorted({(r.point, bool(r.flush_at_park), r.fault) for r in table.itertuples()},
                  key=lambda k: (ORDER.index(k[0]) if k[0] in ORDER else len(ORDER), not k[1], k[2]))
    name = {k: f"{k[0]}\n{'flushed' if k[1] else 'fresh'}, {k[2]}" for k in keys}
    verdicts, labels = {}, {}
    for r in table.itertuples():
        k = (r.runtime, name[(r.point, bool(r.flush_at_park), r.fault)])
        if r.liveness == "n/a" or pd.isna(r.liveness):  # a point the row's adapter declares unreachable (n/a; NaN
            # in a CSV read back by pandas): white, its reason in the table
            verdicts[k], labels[k] = "n/a", "n/a"
            continue
        once = bool(r.store_loads) and r.effects == 1 and r.liveness == "valid" and bool(r.acknowledged_kept)
        verdicts[k] = "holds" if once else "violates"
        labels[k] = "lost" if not r.store_loads else f"{r.effects}x" + ("" if r.liveness == "valid" else " stuck")
    return draw_grid(rows, [name[k] for k in keys], verdicts,
                     "power loss: effects fired per cell\n(orange: not once, stuck, or acknowledged progress lost)",
                     out, labels)
