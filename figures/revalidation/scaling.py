"""Figure ``revalidation_scaling``: validation latency vs recorded reads, log-log (ATR paper Figure 2, right).

One line per mechanism through the median latency at each read count, with
error bars spanning the 95% interval over repetitions (the table's
``ci_low_us``..``ci_high_us``).  A dotted guide of slope 1 through the
largest point of the steepest mechanism shows what growth linear in the
recorded reads looks like.  The floor (the least work a correct selective
validation does, timed in the same session) is a dashed grey line.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

import numpy as np  # noqa: E402
from figures.save import save  # noqa: E402

MARKERS = {"ATR": "o", "FullScan": "s"}
FLOOR = "floor"


def slope(tab: pd.DataFrame, mechanism: str) -> float:
    """Log-log slope of one mechanism's medians (the figure's own: figures never import the analysis)."""
    t = tab[tab["mechanism"] == mechanism]
    return float(np.polyfit(np.log(t["reads"]), np.log(t["median_us"]), 1)[0]) if len(t) > 1 else 0.0


def draw(records: pd.DataFrame, tab: pd.DataFrame, out: Path) -> list[Path]:
    fig, ax = plt.subplots(figsize=(5.2, 3.8))
    for mechanism, t in tab.groupby("mechanism", sort=False):
        if mechanism == FLOOR:
            ax.plot(t["reads"], t["median_us"], "--", color="grey", linewidth=1, label="floor (least work)")
            continue
        err = [t["median_us"] - t["ci_low_us"], t["ci_high_us"] - t["median_us"]]
        ax.errorbar(t["reads"], t["median_us"], yerr=err, marker=MARKERS.get(mechanism, "^"), markersize=4,
                    capsize=3, linewidth=1.2, label=mechanism)
    mechanisms = [m for m in dict.fromkeys(tab["mechanism"]) if m != FLOOR]
    steepest = max(mechanisms, key=lambda m: slope(tab, m))
    last = tab[tab["mechanism"] == steepest].iloc[-1]
    reads = sorted(tab["reads"].unique())
    if len(reads) > 1:
        ax.plot(reads, [last["median_us"] * r / last["reads"] for r in reads], ":", color="grey", linewidth=1,
                label="linear in reads")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(reads, [f"{r:,}" for r in reads], fontsize=7)
    ax.minorticks_off()
    ax.set_xlabel("recorded reads (unrelated reads added)")
    ax.set_ylabel("validation latency (µs; median, bars: CI)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return save(fig, out)
