"""Reading a run's records (Parquet, one file per finished cell) into pandas."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

RECORDS = "records"


def experiments_in(run_dir: Path) -> list[str]:
    root = Path(run_dir) / RECORDS
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def load_records(run_dir: Path, experiment: str) -> pd.DataFrame:
    """All records of one experiment in a run folder, in a stable order."""
    files = sorted((Path(run_dir) / RECORDS / experiment).glob("*.parquet"))
    if not files:
        return pd.DataFrame()
    frame = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    order = [c for c in ("cell", "repetition") if c in frame.columns]
    return frame.sort_values(order, kind="stable").reset_index(drop=True) if order else frame
