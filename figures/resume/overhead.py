"""Figure: the cost of one resume per runtime (median, microseconds), with its ratio to naive.

Serves the resume family's overhead measurement (consume-once claim plus
write-ahead idempotent ledger; the paper publishes no latency).  Bars are
this run's pytest-benchmark medians.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from figures.save import save


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    table = table[table["ratio_to_naive"].notna()] if "ratio_to_naive" in table else table  # the lab's runtimes
    fig, ax = plt.subplots(figsize=(5.5, 0.5 * len(table) + 1.5))
    names = list(table["runtime"])
    ax.barh(names, table["median_us"], color="#7570b3")
    for i, (us, ratio) in enumerate(zip(table["median_us"], table["ratio_to_naive"])):
        ax.text(us, i, f"  {us:,.0f} µs ({ratio:.2f}x)", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("median time of one resume (µs)")
    ax.set_xlim(0, float(table["median_us"].max()) * 1.45 if len(table) else 1)
    ax.set_title("resume overhead vs naive", fontsize=10)
    fig.tight_layout()
    return save(fig, out)
