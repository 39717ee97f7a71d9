"""Options of the scaling benchmark: the sweep's points.

``driftlab sweep reads`` passes the user's points:  ``pytest benchmarks/revalidation/bench_scaling.py
--scaling-reads 13,29,61 --scaling-mechanisms ATR,FullScan --scaling-repetitions 7 --scaling-rounds 1000``.
Every point also times the floor (see ``bench_scaling.py``), whatever the mechanisms.
"""
from __future__ import annotations

import pytest

from runners.revalidation.scaling import DEFAULT_MECHANISMS, DEFAULT_READS, REPETITIONS, ROUNDS


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("driftlab scaling benchmark")
    group.addoption("--scaling-reads", default=",".join(map(str, DEFAULT_READS)),
                    help="recorded reads per point (default: the paper's 13,29,...,4093)")
    group.addoption("--scaling-mechanisms", default=",".join(DEFAULT_MECHANISMS), help="mechanisms to time")
    group.addoption("--scaling-repetitions", type=int, default=REPETITIONS["paper"], help="repetitions per point")
    group.addoption("--scaling-rounds", type=int, default=ROUNDS["paper"], help="timed validations per repetition")
