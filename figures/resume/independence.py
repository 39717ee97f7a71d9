"""Figure: the independence matrix as a grid, fault switch x property, violated cells filled.

Serves the paper's 39-cell independence matrix (arXiv 2608.03836).  The
figure draws this run's table only; the report's matrix sets each cell
beside the paper's and names every cell that differs.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from figures.grid import draw_grid
from vocabulary.resume import PROPERTIES

ORDER = (*PROPERTIES, "liveness")


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    switches = list(dict.fromkeys(table["fault_switch"]))
    cells = {(s, p): v for s, p, v in zip(table["fault_switch"], table["property"], table["verdict"])}
    return draw_grid(switches, ORDER, cells, "property broken by each fault switch (x)", out)
