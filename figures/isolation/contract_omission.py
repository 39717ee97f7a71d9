"""Figure ``isolation_contract_omission``: share of executions admitting an incompatible combination vs omission rate p.

Points with exact 95% intervals, and the expectation 1 - (1 - p)^k as a
dotted line (k: contracts that matter, from the records).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from figures.save import save  # noqa: E402


def draw(records: pd.DataFrame, tab: pd.DataFrame, out: Path) -> list[Path]:
    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    groups = tab.groupby("mechanism") if "mechanism" in tab.columns else [("SSI", tab)]
    for name, t in groups:
        ax.errorbar(t["rate"], t["share"], yerr=[t["share"] - t["ci_low"], t["ci_high"] - t["share"]], marker="o",
                    markersize=4, capsize=3, linewidth=1.2, label=f"{name}: measured")
    k = int(records["contracts_that_matter"].max())
    p = np.linspace(0, max(tab["rate"].max(), 0.01), 50)
    ax.plot(p, 1 - (1 - p) ** k, ":", color="grey", label=f"1 - (1 - p)^{k}")
    ax.set_xlabel("contract omission probability p")
    ax.set_ylabel("share admitting an incompatible pair")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return save(fig, out)
