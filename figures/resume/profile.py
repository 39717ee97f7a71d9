"""Figure: the conformance profile as a grid, runtime x property, violated cells marked.

Serves the paper's conformance profiles (arXiv 2608.03836: LangGraph 1.2.9
violates CO, CV and EO).  Draws this run's table; the report names the
witness cell of every violation.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from figures.grid import draw_grid
from vocabulary.resume import PROPERTIES

ORDER = (*PROPERTIES, "liveness")


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    runtimes = list(dict.fromkeys(table["runtime"]))
    cells = {(r, p): v for r, p, v in zip(table["runtime"], table["property"], table["verdict"])}
    return draw_grid(runtimes, ORDER, cells, "conformance profile: property violated by each runtime (x)", out)
