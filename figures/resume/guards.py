"""Figure: guard x property, holds / violates / unknown / not covered (the table ``resume_guards`` draws from).

Serves issue 26 §4: each guard judged on what it claims; a property outside its claim is drawn white and
labelled "-", never as a violation.  Draws this run's table only.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from figures.grid import draw_grid

COLUMNS = ("PC", "EO", "FD", "CV", "CO", "RD", "liveness", "CO (inert)")
MARKS = {"violates": "x", "unknown": "?", "not covered": "-", "n/a": "n/a"}


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    rows = list(table["runtime"])
    verdicts = {(r["runtime"], c): r[c] for r in table.to_dict("records") for c in COLUMNS}
    labels = {k: MARKS.get(v, "") for k, v in verdicts.items()}
    return draw_grid(rows, COLUMNS, verdicts, "guard x property: x violated, ? unknown, - not claimed by the guard",
                     out, labels)
