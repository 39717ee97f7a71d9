"""Figure ``revalidation_races``: commits per race pair, and cross-resource outcomes per binding (ATR paper §5).

One row of panels per backend.  Left: how many race pairs ended with 0, 1
or 2 commits, per binding (the version-token CAS beside the broken
``unchecked`` control).  Right: per cross-resource history, the share of
executions whose refund committed although the policy was false (a false
allow, red) or was rejected (green), under the target-only CAS and the
checked policy token.  Every bar is counted from the records (``table`` is
accepted for the uniform signature ``draw(records, table, out)``).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from figures.save import save  # noqa: E402

PAIR_COLORS = {"target_cas": "#2b6ca3", "unchecked": "#b0b0b0"}
COMMITTED, REJECTED = "#c0392b", "#4c9a2a"


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    backends = list(dict.fromkeys(records["backend"]))
    fig, axes = plt.subplots(len(backends), 2, figsize=(10, 3.6 * len(backends)), squeeze=False,
                             gridspec_kw={"width_ratios": [1, 2]})
    for (left, right), backend in zip(axes, backends):
        mine = records[records["backend"] == backend]
        pairs = mine[mine["part"] == "pairs"]
        bindings = [b for b in PAIR_COLORS if b in set(pairs["binding"])]
        width = 0.8 / max(len(bindings), 1)
        for i, binding in enumerate(bindings):
            counts = pairs.loc[pairs["binding"] == binding, "commits"].value_counts().reindex([0, 1, 2], fill_value=0)
            xs = [k + (i - (len(bindings) - 1) / 2) * width for k in range(3)]
            bars = left.bar(xs, counts.values, width, color=PAIR_COLORS[binding], label=binding)
            left.bar_label(bars, fontsize=7)
        left.set_xticks(range(3), ["0", "1", "2"])
        left.set_xlabel("commits in the pair")
        left.set_ylabel("race pairs")
        left.set_title(f"{backend}: race pairs", fontsize=10)
        left.legend(fontsize=7, frameon=False)
        left.margins(y=0.15)

        cross = mine[mine["part"] == "cross_resource"]
        ticks = []
        for i, history in enumerate(dict.fromkeys(cross["history"])):
            for k, binding in enumerate(("target_cas", "policy_token")):
                sub = cross[(cross["history"] == history) & (cross["binding"] == binding)]
                if not len(sub):
                    continue
                share = float((sub["commits"] > 0).mean())
                x = 2.6 * i + k
                right.bar(x, share, color=COMMITTED, label="committed: false allow" if not ticks else None)
                right.bar(x, 1 - share, bottom=share, color=REJECTED, label="rejected" if not ticks else None)
                right.annotate(f"{int((sub['commits'] > 0).sum())}/{len(sub)}", (x, 1.02), ha="center", fontsize=7)
                ticks.append((x, binding.replace("_", "\n")))
            right.text(2.6 * i + 0.5, -0.16, history.replace("_", " "), ha="center", va="top", fontsize=7,
                       transform=right.get_xaxis_transform())
        right.set_xticks([x for x, _ in ticks], [t for _, t in ticks], fontsize=6)
        right.set_ylim(0, 1.3)
        right.set_yticks([0, 0.25, 0.5, 0.75, 1])
        right.set_ylabel("share of executions")
        right.set_title(f"{backend}: policy false at commit (cross-resource histories)", fontsize=10)
        right.legend(fontsize=7, frameon=False, loc="upper center", ncol=2)
    fig.tight_layout()
    return save(fig, out)
