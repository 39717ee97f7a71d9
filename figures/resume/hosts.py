"""Figure: saturation of k racers on one host beside k racers on k hosts, per runtime and k (issue 25 §6).

Serves issue 25 (``resume_hosts``).  One pair of bars per runtime x k (mean
saturation, the range over races as an error bar); 1/k means exactly one
racer fired the gated effect.  This run's table only.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from figures.save import save

COLORS = {"one_host": "#7570b3", "k_hosts": "#1b9e77"}


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    groups = list(dict.fromkeys(zip(table["runtime"], table["k"])))
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(groups) + 2), 3.2))
    width = 0.38
    for j, pl in enumerate(("one_host", "k_hosts")):
        xs, ys, lo, hi = [], [], [], []
        for i, (rt, k) in enumerate(groups):
            r = table[(table["runtime"] == rt) & (table["k"] == k) & (table["placement"] == pl)]
            if len(r):
                r = r.iloc[0]
                xs.append(i + (j - 0.5) * width)
                ys.append(r["saturation"])
                lo.append(r["saturation"] - r["saturation_min"])
                hi.append(r["saturation_max"] - r["saturation"])
        ax.bar(xs, ys, width, yerr=[lo, hi], color=COLORS[pl], label=pl.replace("_", " "), capsize=2)
    ax.set_xticks(range(len(groups)), [f"{rt}\nk={k}" for rt, k in groups], fontsize=7)
    ax.set_ylabel("saturation (gated effects / k)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7)
    ax.set_title("k racers on one host vs on k hosts", fontsize=9)
    fig.tight_layout()
    return save(fig, out)
