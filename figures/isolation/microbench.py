"""Figure ``isolation_microbench``: p95 latency of resolution vs identities, and of merge validation vs delta size.

Left: resolution p95 against bound identities (bound identity, first
binding).  Right: merge p95 at 128 identities x 16 branches against the
delta per branch, delta-based validation beside the plain union; log-log.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from figures.save import save  # noqa: E402


def draw(records: pd.DataFrame, tab: pd.DataFrame, out: Path) -> list[Path]:
    fig, (a, b) = plt.subplots(1, 2, figsize=(8.4, 3.4))
    for kind in ("resolve_bound", "resolve_new"):
        t = records[records["kind"] == kind].sort_values("identities")
        if not t.empty:
            a.plot(t["identities"], t["p95_us"], marker="o", markersize=4, label=kind)
    a.set_xscale("log", base=2)
    a.set_xlabel("bound identities")
    a.set_ylabel("p95 latency (µs)")
    a.set_title("resolution", fontsize=9)
    a.legend(fontsize=7, frameon=False)
    for kind in ("merge_validation", "merge_union"):
        t = records[(records["kind"] == kind) & (records["identities"] == 128) & (records["branches"] == 16)]
        t = t.sort_values("delta")
        if not t.empty:
            b.plot(t["delta"], t["p95_us"], marker="s", markersize=4, label=kind)
    b.set_xscale("log", base=2)
    b.set_yscale("log")
    b.set_xlabel("new bindings per branch (128 identities x 16 branches)")
    b.set_title("merge validation", fontsize=9)
    b.legend(fontsize=7, frameon=False)
    for ax in (a, b):
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return save(fig, out)
