"""Fault: k processes resume one parked interrupt at the same instant (a barrier, then a start jitter).

Serves the paper's concurrent-delivery result (arXiv 2608.03836: "k processes
resuming one parked interrupt fire the gated effect k times"; the published
cell count is in ``data/reference/resume.toml``).  The fault is a plan, pure and seeded: k racers, each
released by one barrier and then waiting its own jitter, uniform in
``[0, jitter_ms]`` (0: none), all delivering the same resume value.  The
racers themselves are warm processes of runners/resume/procs.py
(``RacerPool``); :func:`saturation` is the measure the paper reports.

setup / invoke / teardown: :func:`plan` (setup) draws the jitters; the
racer pool's ``race`` invokes them; closing the pool tears down.
"""
from __future__ import annotations

import random


def plan(k: int, jitter_ms: float, seed: int) -> list[float]:
    """The k racers' start delays after the barrier, in seconds (seeded, so records repeat)."""
    if k < 2:
        raise ValueError(f"concurrent resume needs at least 2 resumers, got k = {k}")
    if jitter_ms < 0:
        raise ValueError(f"jitter must be >= 0 ms, got {jitter_ms}")
    rng = random.Random(seed)
    return [rng.uniform(0, jitter_ms) / 1000 if jitter_ms else 0.0 for _ in range(k)]


def saturation(effects_fired: int, k: int) -> float:
    """Gated effects fired per resumer: 1.0 when every racer fired it, 1/k when exactly one did."""
    return effects_fired / k
