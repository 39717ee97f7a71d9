"""A Hermitage-style grid: rows x columns of verdicts, one coloured square per cell.

Shared by every family's matrix figures (the resume independence matrix, the
fault matrix, conformance profiles, ...).  Draws the run's table only; the
report's matrix sets each cell beside the paper's.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import matplotlib.pyplot as plt

from figures.save import save

#: verdict -> fill; anything else (n/a, "-") is white
COLORS = {"violated": "#d95f02", "invalid": "#d95f02", "violates": "#d95f02",
          "holds": "#e8f4e8", "valid": "#e8f4e8", "unknown": "#bbbbbb"}


def draw_grid(rows: Sequence[str], columns: Sequence[str], verdicts: Mapping[tuple[str, str], str], title: str,
              out: Path, labels: Mapping[tuple[str, str], str] | None = None) -> list[Path]:
    """``verdicts[(row, column)]`` colours a square; ``labels`` (default: x on a violation) is written in it."""
    width = max(5.0, 0.9 * len(columns) + 0.12 * max((len(r) for r in rows), default=0) + 1.5)
    fig, ax = plt.subplots(figsize=(width, 0.42 * len(rows) + 1.4))
    for i, r in enumerate(rows):
        for j, c in enumerate(columns):
            v = verdicts.get((r, c), "-")
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=COLORS.get(v, "white"), edgecolor="grey", lw=0.5))
            text = labels.get((r, c), "") if labels is not None else ("x" if COLORS.get(v) == COLORS["violated"] else "")
            if v not in COLORS and v not in ("-", ""):
                text = text or v
            ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=7)
    ax.set_xlim(0, len(columns))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([j + 0.5 for j in range(len(columns))], columns, rotation=30 if len(columns) > 8 else 0,
                  ha="right" if len(columns) > 8 else "center", fontsize=8)
    ax.set_yticks([i + 0.5 for i in range(len(rows))], rows, fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return save(fig, out)
