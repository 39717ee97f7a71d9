"""Controlled executions per second (ATR paper §5.1; issue 2: "a benchmark reports controlled executions per second").

Times ``run_execution`` of the revalidation_outcomes experiment over one
batch: every workload × mutation class × schedule × mechanism once (3 × 5 ×
7 × 4 = 420 executions with the built-in workloads), seeds derived as the
experiment derives them.  ``extra_info`` reports the batch size and the
executions per second at the median round, the throughput the paper
profile's 840,000 executions run at on one core.
"""
from __future__ import annotations

from mechanisms import resolve
from runners.experiment import derive_seed
from runners.experiments.revalidation_outcomes import DEFAULT_MECHANISMS, run_execution
from scenarios.schedules import load_schedules
from scenarios.workload import load_workloads
from vocabulary.revalidation import MUTATION_CLASSES

BASE_SEED = 20260901  # the CLI's default --seed


def batch() -> list[tuple]:
    workloads, schedules = load_workloads(()), load_schedules()
    return [(w, c, s, resolve(m)(), derive_seed(BASE_SEED, w.name, c, s.id, 0))
            for w in workloads.values() for c in MUTATION_CLASSES for s in schedules for m in DEFAULT_MECHANISMS]


def test_controlled_executions(benchmark):
    cells = batch()

    def run() -> int:
        return sum(1 for args in cells if run_execution(*args))

    assert benchmark(run) == len(cells)
    median = benchmark.stats.stats.median
    benchmark.extra_info.update({"executions_per_round": len(cells),
                                 "executions_per_second": round(len(cells) / median)})
    print(f"\ncontrolled executions per second (median round): {len(cells) / median:,.0f}")
