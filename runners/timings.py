"""What each experiment's cells took on this machine: the progress line's estimate of the time left.

Serves issue 27 §6.  An experiment declares how long a cell should take
(:meth:`Experiment.seconds`: repetitions, rounds, declared work), and those
declarations are off by large factors in both directions (fixed costs such as
a process pool's start or a framework's import are in none of them), so a
single correction factor swung the whole-run estimate from "34 min" to "1 s"
in one run.  The estimate is built per experiment instead:

- an experiment with cells already run **in this run** or in an earlier run on
  this machine (the same profile) is estimated from those seconds per cell;
- an experiment never seen is its declaration, scaled by the geometric mean of
  the ratios of measured to declared time over the experiments that already ran
  in this run and declared at least :data:`MIN_DECLARED` (a ratio, so one badly
  declared experiment moves the others by its root, not its size; a declaration
  near zero is all fixed cost and says nothing about the scale), and at least
  the median measured time of an experiment (the fixed cost every experiment
  has: a worker pool, a framework's import).

Chosen on the quick profile's own numbers (2026-12-04, 19 experiments on the
2-core machine): this rule stayed within 1.96x of the time then left from the
second experiment on, where the single correction factor was off by up to 31x.

The seconds per cell are kept in ``timings.json`` beside the framework
environments' cache (``$DRIFTLAB_ENV_CACHE/..``, default ``~/.cache/driftlab``);
a file that cannot be read is ignored, one that cannot be written is skipped:
an estimate is never a reason to stop a run.
"""
from __future__ import annotations

import json
import math
import os
import statistics
from pathlib import Path

#: weight of the newest run in the remembered seconds per cell (the rest is the earlier runs')
NEWEST = 0.5
#: a declaration shorter than this is mostly fixed cost: it does not set the scale
MIN_DECLARED = 0.5


def path() -> Path:
    root = os.environ.get("DRIFTLAB_ENV_CACHE")
    base = Path(root).expanduser().parent if root else Path.home() / ".cache" / "driftlab"
    return base / "timings.json"


def load() -> dict[str, float]:
    """``"<profile>/<experiment>"`` -> seconds per cell remembered on this machine."""
    try:
        raw = json.loads(path().read_text())
        return {str(k): float(v) for k, v in raw.items() if isinstance(v, (int, float)) and v >= 0}
    except (OSError, ValueError, AttributeError):
        return {}


def remember(profile: str, experiment: str, seconds: float, cells: int) -> None:
    """Fold one experiment's measured wall time over ``cells`` cells into the remembered seconds per cell."""
    if cells <= 0 or seconds < 0:
        return
    known = load()
    key = f"{profile}/{experiment}"
    per = seconds / cells
    known[key] = per if key not in known else NEWEST * per + (1 - NEWEST) * known[key]
    try:
        p = path()
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
        tmp.replace(p)
    except OSError:
        pass


def remaining(order: list[str], pending: dict[str, int], declared: dict[str, float], per_cell: dict[str, float],
              measured: dict[str, tuple[float, float]]) -> float:
    """Seconds left for the experiments in ``order`` (module docstring).

    ``pending``: cells still to run per experiment; ``declared``: each one's declared estimate for those cells;
    ``per_cell``: seconds per cell known for an experiment (this run or remembered); ``measured``: the experiments
    this run has finished, each as (wall seconds, what its declaration said).
    """
    logs = [math.log(max(took, 1e-3) / said) for took, said in measured.values() if said >= MIN_DECLARED]
    scale = math.exp(sum(logs) / len(logs)) if logs else 1.0
    floor = statistics.median(took for took, _ in measured.values()) if measured else 0.0
    total = 0.0
    for name in order:
        cells = pending.get(name, 0)
        if not cells:
            continue
        if name in per_cell:
            total += per_cell[name] * cells
        else:
            total += max(declared.get(name, 0.0) * scale, floor)
    return total
