"""Figure: what a resume and a step cost, per runtime: the lab's runtimes beside naive, and LangGraph's stock saver,
driftlab's guard and REMIT as a ratio to stock, per backend and operation, with the range over repetitions.

Serves the resume family's overhead measurement and issue 27 §3 (one overhead answer: stock, guard and REMIT in
one figure).  Left: the table's ``median_us`` and ``ratio_to_naive`` for the rows that have one.  Right: the
table's ``ratio_to_stock`` with ``ratio_min``..``ratio_max`` as the error bar, for every saver row.  Draws this
run's table only.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from figures.save import save

COLORS = {"langgraph": "#999999", "langgraph+guard": "#1b9e77", "langgraph+remit": "#d95f02"}


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    lab = table[table["ratio_to_naive"].notna()]
    savers = table[table["ratio_to_stock"].notna()]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 0.45 * max(len(lab), len(savers) // 3 + 1) + 2.2))
    names = list(lab["runtime"])
    left.barh(names, lab["median_us"], color="#7570b3")
    for i, (us, ratio) in enumerate(zip(lab["median_us"], lab["ratio_to_naive"])):
        left.text(us, i, f"  {us:,.0f} µs ({ratio:.2f}x)", va="center", fontsize=8)
    left.invert_yaxis()
    left.set_xlabel("median time of one resume (µs)")
    left.set_xlim(0, float(lab["median_us"].max()) * 1.45 if len(lab) else 1)
    left.set_title("the lab's runtimes vs naive", fontsize=9)
    groups = list(dict.fromkeys(zip(savers["backend"], savers["operation"])))
    runtimes = list(dict.fromkeys(savers["runtime"]))
    width = 0.8 / max(len(runtimes), 1)
    for j, rt in enumerate(runtimes):
        t = savers[savers["runtime"] == rt].set_index(["backend", "operation"])
        ys = [i + j * width for i in range(len(groups))]
        mid = [float(t.loc[g, "ratio_to_stock"]) if g in t.index else float("nan") for g in groups]
        lo = [m - float(t.loc[g, "ratio_min"]) if g in t.index else 0.0 for g, m in zip(groups, mid)]
        hi = [float(t.loc[g, "ratio_max"]) - m if g in t.index else 0.0 for g, m in zip(groups, mid)]
        right.barh(ys, mid, height=width, xerr=[lo, hi], color=COLORS.get(rt, "#7570b3"), label=rt,
                   error_kw={"lw": 0.8})
    right.axvline(1.0, color="black", lw=0.6)
    right.set_yticks([i + 0.4 - width / 2 for i in range(len(groups))], [f"{b}, {o}" for b, o in groups],
                     fontsize=8)
    right.invert_yaxis()
    right.set_xlabel("time / stock LangGraph's (median of per-repetition ratios; bar: their range)", fontsize=8)
    right.set_title("LangGraph: stock, driftlab's guard, REMIT", fontsize=9)
    right.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return save(fig, out)
