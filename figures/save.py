"""Writing a figure: PNG and SVG side by side, without timestamps (same records -> same files)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def save(fig, out: Path) -> list[Path]:
    paths = [out.with_suffix(".png"), out.with_suffix(".svg")]
    for p in paths:
        fig.savefig(p, dpi=150, metadata={"Date": None} if p.suffix == ".svg" else None)
    plt.close(fig)
    return paths
