"""Figure: what the losers of a race get, per framework@release (stacked bars over the table's fate columns).

Serves issue 27 §2 ("who refuses a second resumer loudly?"): one bar per
runtime, stacked from the table's ``refused``, ``inert``, ``failed``,
``fired_again`` and ``unanswered`` columns, as shares of its ``losers``.
Draws this run's table only.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from figures.save import save

FATES = (("refused", "refused loudly", "#1b9e77"), ("inert", "accepted inert", "#bbbbbb"),
         ("failed", "failed (raised)", "#7570b3"), ("fired_again", "fired again", "#d95f02"),
         ("unanswered", "unanswered", "#000000"))


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    t = table[table["losers"] > 0]
    fig, ax = plt.subplots(figsize=(7.0, 0.4 * len(t) + 1.6))
    left = pd.Series(0.0, index=t.index)
    for col, label, color in FATES:
        share = t[col] / t["losers"]
        ax.barh(list(t["runtime"]), share, left=left, color=color, label=label)
        left = left + share
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the losers of every race", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, ncols=3, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    ax.set_title("what the losers of a race get", fontsize=9)
    fig.tight_layout()
    return save(fig, out)
