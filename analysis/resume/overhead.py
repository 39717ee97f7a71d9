"""The resume overhead table (``resume_overhead``): sequencer / naive for one resume, same session.

Serves the issue's overhead check (aim: <= 1.3x on SQLite) beside the paper's
repair claim (arXiv 2608.03836 publishes no latency for its gate).  Per
repetition the two runtimes' medians form a ratio; the table gives the median
of those ratios and of each runtime's medians.
"""
from __future__ import annotations

import statistics

import pandas as pd

from analysis.report import Section, row

AIM = 1.3
COLUMNS = ["runtime", "repetitions", "median_us", "ratio_to_naive"]


def _ratios(records: pd.DataFrame) -> list[float]:
    piv = records.pivot_table(index="repetition", columns="runtime", values="median_us", aggfunc="first")
    return [s / n for s, n in zip(piv["sequencer"], piv["naive"])] if {"naive", "sequencer"} <= set(piv.columns) else []


def table(records: pd.DataFrame) -> pd.DataFrame:
    ratios = _ratios(records)
    out = []
    for rt, g in records.groupby("runtime", sort=True):
        out.append({"runtime": rt, "repetitions": len(g), "median_us": float(g["median_us"].median()),
                    "ratio_to_naive": 1.0 if rt == "naive" else (statistics.median(ratios) if ratios and rt == "sequencer"
                                                                 else float("nan"))})
    return pd.DataFrame(out, columns=COLUMNS)


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    ratios = _ratios(records)
    rows = []
    for rt, us in zip(tab["runtime"], tab["median_us"]):
        rows.append(row(f"{rt}: one resume, median", us, None, "value", unit="us"))
    if ratios:
        rows.append(row("sequencer / naive (median of per-repetition ratios)", statistics.median(ratios), None, "value"))
    verdict = ("within" if ratios and statistics.median(ratios) <= AIM else "above")
    notes = (f"The consume-once claim (one row per resume) and the write-ahead intent (one row and one update per "
             f"effect) measured against naive in the same pytest-benchmark session, interleaved per repetition "
             f"(per-repetition ratios: {', '.join(f'{r:.2f}' for r in ratios)}); {verdict} the aim of {AIM}x. "
             "The paper publishes no latency for its gate.")
    return Section("resume_overhead", "Resume: cost of the consume-once claim and the write-ahead ledger", rows, notes)
