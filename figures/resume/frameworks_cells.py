"""Figure: cell x framework@release, each cell coloured by its verdict and labelled with the properties it violates.

Serves issue 27 §2 (the per-cell frameworks matrix): the columns are the table's ``fault_cell`` values in the
order of its ``group`` column (crash, second resume or fork, race, other); a violated cell is labelled with the
table's ``violated`` column.  Draws this run's table only.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from figures.grid import draw_grid


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    rows = list(dict.fromkeys(table["runtime"]))
    columns = [f"{c} ({g})" for g, c in dict.fromkeys(zip(table["group"], table["fault_cell"]))]
    key = {(r.runtime, f"{r.fault_cell} ({r.group})"): r for r in table.itertuples()}
    verdicts = {k: r.verdict.split(" ", 1)[0] for k, r in key.items()}  # "violates EO, CO" -> "violates"
    labels = {k: r.violated.replace(",", " ") or ("?" if verdicts[k] == "unknown" else "") for k, r in key.items()}
    return draw_grid(rows, columns, verdicts, "cell x framework@release: the properties each cell violates", out,
                     labels)
