"""Figure: the fault matrix as a grid, fault cell x runtime, each square naming the properties it violates.

Serves the paper's fault matrix (arXiv 2608.03836: crash points x
operations, every crash a real SIGKILL).  A square is coloured by the worst
verdict of the cell's properties on that runtime and lists the violated ones;
"n/a" where the runtime cannot reach the cell's crash point.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from figures.grid import draw_grid

WORST = ("violated", "unknown", "holds")


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    cells = list(dict.fromkeys(table["cell"]))
    runtimes = list(dict.fromkeys(table["runtime"]))
    verdicts, labels = {}, {}
    for (rt, cell), group in table.groupby(["runtime", "cell"], sort=False):
        seen = set(group["verdict"])
        verdicts[(cell, rt)] = next((v for v in WORST if v in seen), sorted(seen)[0] if seen else "-")
        labels[(cell, rt)] = ",".join(group.loc[group["verdict"] == "violated", "property"])
    return draw_grid(cells, runtimes, verdicts, "fault matrix: properties each runtime violates in each cell", out,
                     labels=labels)
