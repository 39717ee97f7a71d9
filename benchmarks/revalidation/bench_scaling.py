"""Validation latency of a mechanism vs recorded reads (ATR paper §5 "Cost and granularity", Figure 2).

One benchmark per (repetition, reads, mechanism), repetition-major so that
drift on a shared machine spreads over every point.  Each times only
``mechanism.validate(txn, store)``: a fresh copy of the recorded transaction
is made by pytest-benchmark's ``setup`` outside the timed region before each
round, because validation rebases the transaction.  ``extra_info`` carries
the point and the work one validation does (premises evaluated, reads
reread), which the revalidation_scaling records keep beside the latency.

Every point also times the **floor** (``Floor`` in
``runners/revalidation/scaling.py``: change log, reverse-index
lookup, one reread, one premise, the tokens), interleaved with the
mechanisms in the same session, so that the analysis can report each
mechanism's latency as a ratio to it.  Before timing, the floor's outcome is
checked against the first mechanism's (a floor that decides differently
would not be a floor of *correct* validation).
"""
from __future__ import annotations

from mechanisms import resolve
from runners.revalidation.scaling import FLOOR, WORKLOAD, Floor, fresh_copy, scaled_transaction, work
from scenarios.revalidation.workload import load_workloads


def pytest_generate_tests(metafunc):
    if "point" in metafunc.fixturenames:
        opt = metafunc.config.getoption
        reads = [int(x) for x in opt("--scaling-reads").split(",") if x.strip()]
        mechanisms = [m for m in opt("--scaling-mechanisms").split(",") if m.strip()]
        mechanisms = [m for m in mechanisms if m != FLOOR] + [FLOOR]
        points = [(rep, n, m) for rep in range(opt("--scaling-repetitions")) for n in reads for m in mechanisms]
        metafunc.parametrize("point", points, ids=[f"{m}-{n}-r{rep}" for rep, n, m in points])


def test_validate(benchmark, point, request):
    rep, reads, name = point
    rounds = request.config.getoption("--scaling-rounds")
    mechanism = Floor() if name == FLOOR else resolve(name)()
    txn, store = scaled_transaction(load_workloads(())[WORKLOAD], reads)
    done = work(mechanism, txn, store)
    if name == FLOOR:
        first = request.config.getoption("--scaling-mechanisms").split(",")[0].strip()
        if first and first != FLOOR:
            assert done["outcome"] == work(resolve(first)(), txn, store)["outcome"], "the floor decides differently"
    benchmark.group = f"reads={reads}"
    benchmark.extra_info.update({"mechanism": name, "reads": reads, "repetition": rep, **done})
    benchmark.pedantic(mechanism.validate, setup=lambda: ((fresh_copy(txn), store), {}),
                       rounds=rounds, warmup_rounds=max(1, rounds // 10))
