"""``agent_overhead``: each stack's cost per checkpointed step and per resume, as a ratio to stock.

Serves issue 15's aim (the full stack at most 1.2x stock per step and per
resume, on SQLite and on PostgreSQL).  Per repetition, a stack's median is
divided by stock's median of the same backend, kind and repetition (they ran
interleaved in one session); the table gives the median of those ratios.  No
paper publishes these costs (not in the papers).
"""
from __future__ import annotations

import statistics

import pandas as pd

from analysis.report import Section, row
from vocabulary.agent import STACKS, STOCK

AIM = 1.2
COLUMNS = ["backend", "kind", "stack", "repetitions", "median_us", "ratio_to_stock", "ratio_min", "ratio_max"]


def table(records: pd.DataFrame) -> pd.DataFrame:
    out = []
    order = {s: i for i, s in enumerate(STACKS)}
    for (backend, kind), g in records.groupby(["backend", "kind"], sort=True):
        stock = g[g["stack"] == STOCK].set_index("repetition")["median_us"]
        for stack, h in sorted(g.groupby("stack"), key=lambda x: order.get(x[0], len(order))):
            ratios = [m / stock[r] for r, m in zip(h["repetition"], h["median_us"]) if r in stock.index]
            out.append({"backend": backend, "kind": kind, "stack": stack, "repetitions": len(h),
                        "median_us": float(h["median_us"].median()),
                        "ratio_to_stock": statistics.median(ratios) if ratios else float("nan"),
                        "ratio_min": min(ratios, default=float("nan")), "ratio_max": max(ratios, default=float("nan"))})
    return pd.DataFrame(out, columns=COLUMNS)


#: fewer paired repetitions than this and a ratio is not compared with the aim at all
MIN_REPETITIONS = 5


def against_aim(lo: float, hi: float, repetitions: int) -> str:
    """Within or above the aim only where the per-repetition ratios all lie on one side of it."""
    if repetitions < MIN_REPETITIONS:
        return f"too few repetitions to compare ({repetitions}; at least {MIN_REPETITIONS})"
    if hi <= AIM:
        return "within the aim"
    if lo > AIM:
        return "above the aim"
    return "indistinguishable from the aim (the range straddles it)"


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    rows = []
    for b, k, s, us, ratio, lo, hi in zip(tab["backend"], tab["kind"], tab["stack"], tab["median_us"],
                                          tab["ratio_to_stock"], tab["ratio_min"], tab["ratio_max"]):
        rows.append(row(f"{b}, {k}: {s} (median us; ratio to stock {ratio:.2f}, per repetition {lo:.2f}-{hi:.2f})",
                        us, None, "value", unit="us"))
    full = tab[tab["stack"] == "once+premises+pinning"]
    verdicts = [f"{b} {k} {r:.2f}x ({lo:.2f}..{hi:.2f}): {against_aim(lo, hi, n)}"
                for b, k, r, lo, hi, n in zip(full["backend"], full["kind"], full["ratio_to_stock"], full["ratio_min"],
                                              full["ratio_max"], full["repetitions"])]
    notes = ("What is measured: one pytest-benchmark session (JSON in RUN/benchmarks/agent_overhead.json) times the "
             "refund agent's first checkpointed step (decide, up to its park at the approval) and one resume to the "
             "end (claim, approve, act with its revalidation and effect, notify with its subgraph and effect) under "
             "each stack, every round on a fresh thread, stacks interleaved per repetition; a ratio is a stack's "
             "median over stock's of the same backend, kind and repetition (the spread of those ratios is shown: on a busy "
             "machine it is wider than the effect). Full stack: "
             + ("; ".join(verdicts) or "not measured") + f" (the aim: at most {AIM}x; a verdict only where the range "
             "of per-repetition ratios lies wholly on one side of it). Not in the papers (none publishes these costs).")
    return Section("agent_overhead", "Agent: cost of the guard's layers per step and per resume", rows, notes)
