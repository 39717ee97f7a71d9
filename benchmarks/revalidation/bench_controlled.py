"""Controlled executions per second (ATR paper §5.1; issue 2: "a benchmark reports controlled executions per second").

Times ``run_execution`` of the revalidation_outcomes experiment over one
batch: every workload × mutation class × schedule × mechanism once (3 × 5 ×
7 × 4 = 420 executions with the built-in workloads), seeds derived as the
experiment derives them.  ``extra_info`` reports the batch size and the
executions per second at the median round, the throughput the paper
profile's 840,000 executions run at on one core.

The timed batch is also checked, so that a fast but wrong lab cannot pass:
each record's oracle is the brute-force reference evaluator's outcome for
the changes it landed, ATR and FullScan agree with it on every execution,
NoCheck releases every REFRESH/REPLAN/BLOCK execution as an invalid effect
(the REPLAN/BLOCK ones as false allows), and VersionAbort replans every
KEEP one and stops every KEEP/REFRESH one as a false block (the counting
rules of ``analysis/revalidation/counting.py``).
"""
from __future__ import annotations

import random

import pandas as pd

from analysis.revalidation.counting import classify
from mechanisms import resolve
from runners.experiment import derive_seed
from runners.revalidation.agent import pick_changes
from runners.revalidation.outcomes import DEFAULT_MECHANISMS, run_execution
from scenarios.revalidation.oracle import reference_of
from scenarios.revalidation.schedules import load_schedules
from scenarios.revalidation.workload import load_workloads
from vocabulary.revalidation import MUTATION_CLASSES

BASE_SEED = 20260901  # the CLI's default --seed


def batch() -> list[tuple]:
    workloads, schedules = load_workloads(()), load_schedules()
    return [(w, c, s, resolve(m)(), derive_seed(BASE_SEED, w.name, c, s.id, 0))
            for w in workloads.values() for c in MUTATION_CLASSES for s in schedules for m in DEFAULT_MECHANISMS]


def check(cells: list[tuple], records: list[dict]) -> None:
    """Fail unless the batch's records are what a correct lab gives (see the module docstring)."""
    frame = pd.DataFrame(records).assign(mechanism=[m.name for _, _, _, m, _ in cells])
    for (w, c, s, _, seed), record in zip(cells, records):
        _, changes = pick_changes(w, c, s, random.Random(seed))  # the same draw run_execution made
        assert record["oracle"] == reference_of(w).judge(*changes).outcome, (w.name, c, s.id)
    counted = classify(frame).assign(mechanism=frame["mechanism"], oracle=frame["oracle"])
    for name in ("ATR", "FullScan"):
        mine = counted[counted["mechanism"] == name]
        assert mine["agree"].all() and not mine[["invalid_effect", "false_allow", "false_block"]].any().any(), name
    nocheck = counted[counted["mechanism"] == "NoCheck"]
    assert (nocheck["invalid_effect"] == (nocheck["oracle"] != "KEEP")).all()
    assert (nocheck["false_allow"] == nocheck["oracle"].isin(["REPLAN", "BLOCK"])).all()
    version_abort = counted[counted["mechanism"] == "VersionAbort"]
    assert (version_abort["unnecessary_replan"] == (version_abort["oracle"] == "KEEP")).all()
    assert (version_abort["false_block"] == version_abort["oracle"].isin(["KEEP", "REFRESH"])).all()


def test_controlled_executions(benchmark):
    cells = batch()

    def run() -> list[dict]:
        return [run_execution(*args) for args in cells]

    records = benchmark(run)
    assert len(records) == len(cells)
    check(cells, records)
    if benchmark.stats is None:  # --benchmark-disable: the batch ran once, unmeasured, and was checked
        return
    median = benchmark.stats.stats.median
    benchmark.extra_info.update({"executions_per_round": len(cells),
                                 "executions_per_second": round(len(cells) / median)})
    print(f"\ncontrolled executions per second (median round): {len(cells) / median:,.0f}")
