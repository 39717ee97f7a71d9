"""What the consume-once claim and the write-ahead ledger add to one resume (sequencer vs naive, SQLite).

Serves the paper's repair claim (arXiv 2608.03836: the gate "claims
consumption in the shared store, serving one racer and refusing the rest
before any node executes") at a cost: one claim row per resume and one intent
row (plus an update) per effect.  Each round times exactly one
``runtime.resume(run, value)`` of a freshly parked run (parked by
pytest-benchmark's ``setup``, outside the timed region) on a runtime object
that already holds its connections.  Both runtimes are timed in the same
session, interleaved per repetition, so the ratio sequencer / naive is
measured on the same machine state; ``test_ratio`` prints it (aim: <= 1.3x).

Run: ``.venv/bin/python -m pytest benchmarks/resume/bench_overhead.py --benchmark-json out.json``.
"""
from __future__ import annotations

import itertools
import os
import statistics
import tempfile

import pytest

from mechanisms import resolve
from vocabulary.resume import DEFAULT_GRAPH, Backend

#: rounds per benchmark and interleaved repetitions (the resume_overhead experiment sets them per profile)
ROUNDS = int(os.environ.get("DRIFTLAB_RESUME_ROUNDS", "300"))
REPETITIONS = int(os.environ.get("DRIFTLAB_RESUME_REPETITIONS", "3"))
RESULTS: dict[str, list[float]] = {}


@pytest.fixture(scope="module")
def runtimes():
    folder = tempfile.mkdtemp(prefix="bench_resume_")
    out = {}
    for name in ("naive", "sequencer"):
        rt = resolve(name, "resume")(Backend("sqlite", folder, name), DEFAULT_GRAPH)
        rt.setup()
        out[name] = rt
    yield out
    for rt in out.values():
        rt.close()


POINTS = [(rep, name) for rep in range(REPETITIONS) for name in ("naive", "sequencer")]


@pytest.mark.parametrize("point", POINTS, ids=[f"{n}-r{r}" for r, n in POINTS])
def test_resume(benchmark, runtimes, point):
    rep, name = point
    rt = runtimes[name]
    counter = itertools.count()

    def park():
        run = f"{name}-{rep}-{next(counter)}"
        assert rt.start(run, "in").state == "parked"
        return (run, "yes"), {}

    result = benchmark.pedantic(rt.resume, setup=park, rounds=ROUNDS, iterations=1, warmup_rounds=5)
    assert result.state == "done"
    benchmark.extra_info.update(runtime=name, repetition=rep)
    RESULTS.setdefault(name, []).append(benchmark.stats.stats.median)


def test_ratio():
    """The overhead as a ratio of medians (sequencer / naive), per repetition and overall."""
    if set(RESULTS) != {"naive", "sequencer"}:
        pytest.skip("run the whole file (with benchmarks enabled) to get the ratio")
    ratios = [s / n for s, n in zip(RESULTS["sequencer"], RESULTS["naive"])]
    print(f"\nresume overhead (sequencer / naive, median of one resume): {statistics.median(ratios):.2f}x "
          f"(per repetition: {', '.join(f'{r:.2f}' for r in ratios)}); naive {statistics.median(RESULTS['naive']) * 1e6:.0f} us, "
          f"sequencer {statistics.median(RESULTS['sequencer']) * 1e6:.0f} us")
