"""Figure ``revalidation_omission``: false allows under dependency omission, and what linking costs (ATR paper §5, §7).

Left: the false-allow rate against the omission probability p, with 95%
binomial intervals, for exact and conservative linking; the dashed line is
the expectation p × (share of executions whose critical edge matters).
Right: the trade-off of the mitigation at each p, from exact to conservative
linking on the same executions: premises evaluated per change (the cost,
x) against the false-allow rate (y); each arrow is labelled with the false
allows it removes.  Every number comes from the run's table.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator, PercentFormatter  # noqa: E402

from figures.save import save  # noqa: E402

COLORS = {"exact": "#c0392b", "conservative": "#2a7ab0"}
MARKERS = ["o", "s", "^", "D", "v"]


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    table = table[table["workload"] == "all"]  # every workload together; the per-workload rows are in the table and the report
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    mechanisms = list(dict.fromkeys(table["mechanism"]))
    for m, mech in enumerate(mechanisms):
        for linking, color in COLORS.items():
            t = table[(table["mechanism"] == mech) & (table["linking"] == linking)].sort_values("rate")
            if t.empty:
                continue
            err = [t["false_allow_rate"] - t["ci_low"], t["ci_high"] - t["false_allow_rate"]]
            left.errorbar(t["rate"], t["false_allow_rate"], yerr=err, color=color, marker=MARKERS[m % len(MARKERS)],
                          capsize=3, label=f"{mech}, {linking} linking")
            left.plot(t["rate"], t["expected_rate"], color=color, linestyle="--", linewidth=0.8, alpha=0.7)
    left.plot([], [], color="grey", linestyle="--", linewidth=0.8, label="expected: p × share that matters")
    left.set_xlabel("omission probability p")
    left.set_ylabel("false-allow rate (95% CI)")
    left.xaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 5, 10]))
    left.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{100 * x:g}%"))
    left.yaxis.set_major_formatter(PercentFormatter(1.0))
    left.set_title("false allows vs omission rate")
    left.legend(fontsize=7, frameon=False)

    by = table.set_index(["mechanism", "rate", "linking"])
    pairs = [(m, r) for m, r in dict.fromkeys(zip(table["mechanism"], table["rate"]))
             if (m, r, "exact") in by.index and (m, r, "conservative") in by.index]
    for mech, rate in pairs:  # each point: exact linking -> conservative linking at the same p
        exact, conservative = by.loc[(mech, rate, "exact")], by.loc[(mech, rate, "conservative")]
        x0, x1 = exact["premises_per_change"], conservative["premises_per_change"]
        y0, y1 = exact["false_allow_rate"], conservative["false_allow_rate"]
        removed = int(exact["false_allows"] - conservative["false_allows"])
        marker = MARKERS[mechanisms.index(mech) % len(MARKERS)]
        right.annotate("", (x1, y1), (x0, y0), arrowprops={"arrowstyle": "->", "color": "grey", "lw": 0.6})
        right.scatter([x0], [y0], color=COLORS["exact"], marker=marker, zorder=3)
        right.scatter([x1], [y1], color=COLORS["conservative"], marker=marker, zorder=3)
        if removed:  # p = 0 removes nothing; its label would sit on p's next point
            label = f"{mech} p={100 * rate:g}%: {removed:,} removed"
            right.annotate(label, (x0, y0), xytext=(8, 0), textcoords="offset points", fontsize=7, va="center")
    right.set_xlabel("premises evaluated per change (cost)")
    right.set_ylabel("false-allow rate")
    right.yaxis.set_major_formatter(PercentFormatter(1.0))
    right.set_title("conservative linking: cost vs false allows removed")
    right.scatter([], [], color=COLORS["exact"], label="exact linking")
    right.scatter([], [], color=COLORS["conservative"], label="conservative linking")
    right.legend(fontsize=7, frameon=False, loc="upper right", title="labels: false allows removed", title_fontsize=7)
    fig.tight_layout()
    return save(fig, out)
