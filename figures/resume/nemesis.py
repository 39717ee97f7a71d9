"""Figure: runtime x fault of the nemesis, each square the properties violated, grey where unknown (issue 25).

Serves issue 25 (``resume_nemesis``).  One grid per k: a square is coloured
by the worst verdict of the cell's properties (violated, unknown, holds) and
names the violated ones; ``stuck`` is added where the run was not done
before its recovery.  This run's table only.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from figures.grid import draw_grid

WORST = ("invalid", "unknown", "valid")


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    paths: list[Path] = []
    for k, t in table.groupby("k", sort=False):
        runtimes = list(dict.fromkeys(t["runtime"]))
        faults = list(dict.fromkeys(t["fault"]))
        verdicts, labels = {}, {}
        for (rt, f), g in t.groupby(["runtime", "fault"], sort=False):
            seen = set(g["verdict"])
            verdicts[(rt, f)] = next((v for v in WORST if v in seen), "-")
            text = ",".join(g.loc[g["verdict"] == "invalid", "property"])
            if bool(g["stuck_before_recovery"].iloc[0]):
                text = (text + "\n" if text else "") + "stuck"
            labels[(rt, f)] = text
        target = out if len(set(table["k"])) == 1 else out.with_name(f"{out.stem}_k{k}{out.suffix}")
        paths += draw_grid(runtimes, faults, verdicts, f"nemesis, k = {k} hosts: properties violated", target,
                           labels=labels)
    return paths
