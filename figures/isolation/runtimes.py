"""Figure ``isolation_runtimes``: the runtime x anomaly matrix as a grid (paper Table 3), open-world rows included."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from figures.isolation.levels import grid


def draw(records: pd.DataFrame, tab: pd.DataFrame, out: Path) -> list[Path]:
    return grid(tab, "runtime", out, "fixed schedule; /open-world: tool discovered mid-run; /opaque: unversionable tool")
