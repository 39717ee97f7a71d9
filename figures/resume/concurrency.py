"""Figure: saturation (effects fired / k) against k, one panel per backend, one line per runtime x jitter.

Serves the paper's concurrent-resume result (arXiv 2608.03836: saturation 1.0
in most cells for LangGraph 1.2.9, ``data/reference/resume.toml``; one effect per race with the gate).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from figures.save import save


def draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    backends = sorted(set(table["backend"]))
    fig, axes = plt.subplots(1, len(backends), figsize=(5 * len(backends), 3.6), squeeze=False, sharey=True)
    for ax, be in zip(axes[0], backends):
        t = table[table["backend"] == be]
        ks = sorted(set(table["k"]))
        ax.plot(ks, [1 / k for k in ks], color="black", ls=":", lw=1, label="1/k: one effect per race")
        runtimes = sorted(set(t["runtime"]))
        jitters = sorted(set(t["jitter_ms"]))
        for (rt, j), g in t.groupby(["runtime", "jitter_ms"], sort=True):
            g = g.sort_values("k")
            i = runtimes.index(rt)
            ax.plot(g["k"], g["saturation"], marker="os^vDP*x"[i % 8], ms=7 - 4 * jitters.index(j) / max(1, len(jitters)),
                    ls=["-", "--", "-.", ":"][jitters.index(j) % 4], alpha=0.8, color=f"C{i}",
                    label=f"{rt}, jitter {j:g} ms")
        ax.set_title(be)
        ax.set_xlabel("k concurrent resumers")
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, 1.1)
        ax.axhline(1.0, color="grey", lw=0.5)
    axes[0][0].set_ylabel("saturation = effects fired / k")
    axes[0][-1].legend(fontsize=6, loc="center right")
    fig.tight_layout()
    return save(fig, out)
