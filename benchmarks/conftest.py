"""pytest configuration of the microbenchmarks: collect ``bench_*.py`` and take the sweep's points.

``pytest tests`` never sees this folder (``testpaths = ["tests"]``); run the
benchmarks with ``pytest benchmarks`` (or one file).  The scaling benchmark
takes its grid from options, so ``driftlab sweep reads`` can pass the user's
points:  ``--scaling-reads 13,29,61 --scaling-mechanisms ATR,FullScan
--scaling-repetitions 7 --scaling-rounds 1000``.  Every point also times the
floor (see ``bench_scaling.py``), whatever the mechanisms.
"""
from __future__ import annotations

import os
import sys

import pytest

from runners.experiments.revalidation_scaling import DEFAULT_MECHANISMS, DEFAULT_READS, REPETITIONS, ROUNDS


# The folder driftlab was started from (set by the scaling experiment): at the *end* of sys.path, so that a
# user's own mechanism resolves from there while nothing in it can shadow an installed package.
for _path in os.environ.get("DRIFTLAB_PLUGIN_PATH", "").split(os.pathsep):
    if _path and _path not in sys.path:
        sys.path.append(_path)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("driftlab scaling benchmark")
    group.addoption("--scaling-reads", default=",".join(map(str, DEFAULT_READS)),
                    help="recorded reads per point (default: the paper's 13,29,...,4093)")
    group.addoption("--scaling-mechanisms", default=",".join(DEFAULT_MECHANISMS), help="mechanisms to time")
    group.addoption("--scaling-repetitions", type=int, default=REPETITIONS["paper"], help="repetitions per point")
    group.addoption("--scaling-rounds", type=int, default=ROUNDS["paper"], help="timed validations per repetition")


def pytest_collect_file(file_path, parent):
    # A file named on the command line is collected by pytest itself; a folder's bench_*.py files by this hook.
    if file_path.suffix == ".py" and file_path.name.startswith("bench_") and not parent.session.isinitpath(file_path):
        return pytest.Module.from_parent(parent, path=file_path)
    return None
