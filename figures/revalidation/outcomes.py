"""Figure ``revalidation_outcomes``: outcome shares per mechanism and mutation class (ATR paper §5.1).

One panel per mechanism; per mutation class (all workloads) a stacked bar of
the outcomes the mechanism gave (KEEP, REFRESH, REPLAN, BLOCK), hatched over
the share of invalid effects (from the table, which counts them by the rule of
:mod:`analysis.revalidation.counting`).  The oracle outcome is
printed above each bar.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from vocabulary.revalidation import MUTATION_CLASSES  # noqa: E402
from figures.save import save  # noqa: E402

COLORS = {"KEEP": "#4c9a2a", "REFRESH": "#8fbcd4", "REPLAN": "#f0a030", "BLOCK": "#c0392b"}


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    mechanisms = list(dict.fromkeys(records["mechanism"]))
    seen = set(records["mutation_class"])
    classes = [c for c in MUTATION_CLASSES if c in seen] + sorted(seen - set(MUTATION_CLASSES))
    totals = table[table["workload"] == "all"].set_index(["mechanism", "mutation_class"]) if "workload" in table else \
        table.set_index(["mechanism", "mutation_class"])
    fig, axes = plt.subplots(1, len(mechanisms), figsize=(3.2 * len(mechanisms), 3.6), sharey=True, squeeze=False)
    for ax, mech in zip(axes[0], mechanisms):
        sub = records[records["mechanism"] == mech]
        shares = pd.crosstab(sub["mutation_class"], sub["outcome"], normalize="index").reindex(index=classes, columns=list(COLORS), fill_value=0)
        bad = [totals.loc[(mech, c), "invalid_effects"] / totals.loc[(mech, c), "executions"] for c in classes]
        bottom = [0.0] * len(classes)
        for outcome, color in COLORS.items():
            ax.bar(range(len(classes)), shares[outcome], bottom=bottom, color=color, label=outcome, edgecolor="white")
            bottom = [b + s for b, s in zip(bottom, shares[outcome])]
        ax.bar(range(len(classes)), bad, color="none", hatch="///", edgecolor="black", linewidth=0, label="invalid effect")
        oracle = sub.groupby("mutation_class")["oracle"].first().reindex(classes)
        for x, o in enumerate(oracle):
            ax.annotate(o, (x, 1.02), ha="center", fontsize=6, rotation=90, va="bottom", annotation_clip=False)
        ax.set_title(mech, pad=40)
        ax.set_xticks(range(len(classes)), [c.replace("_", "\n") for c in classes], fontsize=7)
        ax.set_ylim(0, 1)
    axes[0][0].set_ylabel("share of executions")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return save(fig, out)
