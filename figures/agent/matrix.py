"""Figure: ``agent_matrix`` as a Hermitage grid, stack x failure, one panel per backend.

Serves issue 15's independence claim: a filled cell is a failure the stack
showed (its count of failing executions inside); a cell framed in black is
one the claim says the stack should show (its owning layer is absent).  The
figure draws this run's table only.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from figures.save import save
from vocabulary.agent import FAILURES


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    backends = list(dict.fromkeys(table["backend"]))
    stacks = list(dict.fromkeys(table["stack"]))
    fig, axes = plt.subplots(1, len(backends), figsize=(5.2 * len(backends) + 1.5, 0.42 * len(stacks) + 2.2),
                             squeeze=False)
    for ax, backend in zip(axes[0], backends):
        g = table[table["backend"] == backend]
        cells = {(s, f): (c, e) for s, f, c, e in zip(g["stack"], g["failure"], g["count"], g["expected"])}
        for i, s in enumerate(stacks):
            for j, f in enumerate(FAILURES):
                count, expected = cells.get((s, f), (0, "removed"))
                ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor="#d95f02" if count else "#e8f4e8",
                                           edgecolor="black" if expected == "shows" else "#bbbbbb",
                                           lw=1.2 if expected == "shows" else 0.5))
                ax.text(j + 0.5, i + 0.5, str(count) if count else "", ha="center", va="center", fontsize=8)
        ax.set_xlim(0, len(FAILURES))
        ax.set_ylim(len(stacks), 0)
        ax.set_xticks([j + 0.5 for j in range(len(FAILURES))], [f.replace("_", "\n") for f in FAILURES], fontsize=7)
        ax.set_yticks([i + 0.5 for i in range(len(stacks))], stacks if ax is axes[0][0] else [""] * len(stacks),
                      fontsize=8)
        ax.set_title(f"{backend}: failing executions (framed: the stack lacks the owning layer)", fontsize=8)
    fig.tight_layout()
    return save(fig, out)
