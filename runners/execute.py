"""Run cells (here, in a local pool of worker processes, or on Dask) and write each finished cell atomically.

The run folder's ``records/<experiment>/<cell>.parquet`` files are the truth
of a run (STYLE.md: "the history is the primary artifact"), beside the
cell's history in ``histories/``.  Wherever a cell runs, its output comes
back to this process, which alone writes the folder.  A cell's files are
written to temporary names and renamed into place, the records last, so a run killed by
Ctrl-C or SIGKILL leaves only whole cells behind; started again with the same
``--out``, it skips every cell whose file exists and runs the rest.  Nothing
is ever appended to, so no record can be duplicated.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd
from tqdm import tqdm

from runners.experiment import Cell, CellOutput, Experiment, Options, compute, mechanism_of
from runners.interrupt import raise_if_interrupted
from vocabulary import History, history_to_jsonl

RECORDS = "records"
HISTORIES = "histories"


def cell_path(run_dir: Path, cell: Cell) -> Path:
    return run_dir / RECORDS / cell.experiment / cell.filename


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(tmp)
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def history_path(run_dir: Path, cell: Cell) -> Path:
    return run_dir / HISTORIES / cell.experiment / cell.filename.replace(".parquet", ".jsonl")


def write_cell(run_dir: Path, cell: Cell, output: "dict[str, list] | CellOutput") -> int:
    """Write one cell's history (if any) and then its records, each atomically; returns the number of records.

    The records file is written last: its presence is what marks the cell finished."""
    if not isinstance(output, CellOutput):
        output = CellOutput(output)
    if output.history is not None:
        history: History = output.history
        _atomic_write(history_path(run_dir, cell),
                      lambda tmp: tmp.write_text(history_to_jsonl(history), encoding="utf-8"))
    frame = _framed(cell, output.records)
    _atomic_write(cell_path(run_dir, cell), lambda tmp: frame.to_parquet(tmp, index=False))
    return len(frame)


def _framed(cell: Cell, records: dict[str, list]) -> pd.DataFrame:
    """The cell's records with its experiment, id and parameters as the leading columns, in one constructor call
    (a column insert per parameter cost ~13 ms a cell).  An empty cell keeps the inserts, whose scalar dtypes an
    empty list cannot carry."""
    head = {"experiment": cell.experiment, "cell": cell.id, **dict(cell.params)}
    clash = sorted(head.keys() & records.keys())
    if clash or len(head) != len(cell.params) + 2:
        raise ValueError(f"cell {cell.id}: a parameter and a record column share a name: {clash or cell.params}")
    n = len(next(iter(records.values()), ()))
    if n:
        return pd.DataFrame({**{k: [v] * n for k, v in head.items()}, **records})
    frame = pd.DataFrame(records)
    for i, (key, value) in enumerate(head.items()):
        frame.insert(i, key, value)
    return frame


class CellFailed(Exception):
    """A cell failed (its mechanism's code, the lab's store, its worker or its time limit): one line naming the
    experiment, the cell (and so the mechanism) and what happened; the run stops, finished cells are kept."""


def _compute(args: tuple) -> tuple[Cell, "CellOutput | str"]:
    return compute(*args)


def pending(run_dir: Path, cells: list[Cell]) -> list[Cell]:
    return [c for c in cells if not cell_path(run_dir, c).exists()]


def remove_partial_files(run_dir: Path, experiment: str) -> None:
    """Temporary files a killed run left behind (never read: records are only *.parquet)."""
    for folder in (RECORDS, HISTORIES):
        for tmp in (run_dir / folder / experiment).glob(".*.tmp"):
            tmp.unlink(missing_ok=True)


@dataclass(frozen=True)
class Part:
    """One experiment's share of a run of cells: its cells, its progress bar's label and its cells' time limit."""

    experiment: Experiment
    cells: list[Cell]
    label: str
    timeout_s: float | None = None


def _local(parts: list[Part], todo: list[list[Cell]], options: Options, jobs: int):
    """Every part's pending cells in one pool of forked worker processes (one at a time unless every experiment
    runs in parallel); yields (cell, output) as they finish.  A worker that dies or a cell past its time limit is a
    failed cell."""
    from runners.workers import TaskTimedOut, WorkerDied, run_workers

    of = [p for p, cells in zip(parts, todo) for _ in cells]
    tasks = [(p.experiment, c, options) for p, cells in zip(parts, todo) for c in cells]
    try:
        waiting = [p.experiment.waits(c, options) for p, (_, c, _) in zip(of, tasks)]
        keys = [p.experiment.affinity(c, options) for p, (_, c, _) in zip(of, tasks)]
        lanes = [jobs * p.experiment.waiting_workers_per_job for p in of]
        jobs = jobs if all(p.experiment.parallel for p in parts) else 1
        for _, result in run_workers(_compute, tasks, jobs, [p.timeout_s for p in of], waiting, keys,
                                     waiting_jobs=lanes):
            yield result
    except (WorkerDied, TaskTimedOut) as exc:
        cell = exc.task[1]
        who = mechanism_of(cell)
        yield cell, (f"mechanism {who}: " if who else "") + str(exc)


def run_together(parts: list[Part], options: Options, run_dir: Path, jobs: int, progress: bool = True,
                 executor: str = "local", scheduler: str | None = None,
                 begin: Callable[[str, int], None] | None = None) -> dict[str, tuple[int, float]]:
    """Run the parts' cells not yet on disk, in one pool: a worker freed in one experiment's last cells takes the
    next experiment's first ones, so no core idles in an experiment's tail.  Returns, per experiment, the records
    written now and its wall seconds: each stretch of the run between two finished cells is charged to the
    experiment whose cell ended it, so the experiments' seconds add up to the run's.

    Wherever a cell runs (here, a local pool, a Dask worker: one part only), its output comes back to this process,
    which alone writes the run folder, one cell at a time and atomically.  The first failing cell stops the run
    with a :class:`CellFailed`; the cells finished before it are kept.  One progress bar at a time, of the oldest
    experiment with cells left (``begin(name, cells to run)`` is called as it becomes that one; its bar starts
    with what already finished).
    """
    for part in parts:
        remove_partial_files(run_dir, part.experiment.name)
    todo = [pending(run_dir, p.cells) for p in parts]
    index = {p.experiment.name: k for k, p in enumerate(parts)}
    left = [len(cells) for cells in todo]
    ran = [0] * len(parts)  # executions finished now
    written = [0] * len(parts)
    wall = [0.0] * len(parts)
    bar, front = None, -1

    def advance() -> None:  # close the finished oldest experiments' bars and open the next one's
        nonlocal bar, front
        while front < len(parts) and (front < 0 or not left[front]):
            if bar is not None:
                bar.close()
                bar = None
            front += 1
            if front < len(parts):
                if begin:
                    begin(parts[front].experiment.name, len(todo[front]))
                bar = tqdm(total=sum(c.repetitions for c in todo[front]), initial=ran[front], unit="exec",
                           desc=parts[front].label, disable=not progress or not todo[front], dynamic_ncols=True,
                           leave=True)

    results = None
    if any(todo):
        if executor == "dask" and all(p.experiment.parallel for p in parts):
            from runners.dask_executor import run_on_dask

            if len(parts) != 1:
                raise ValueError("run_together: the Dask executor runs one experiment at a time")
            results = run_on_dask(parts[0].experiment, todo[0], options, jobs, scheduler, parts[0].timeout_s)
        else:
            results = _local(parts, todo, options, jobs)
    t = time.perf_counter()
    try:
        advance()
        for cell, output in results or ():
            k = index[cell.experiment]
            if isinstance(output, str):
                raise CellFailed(f"{cell.experiment}: cell {cell.id} failed: {output} "
                                 f"(finished cells are kept in {run_dir})")
            written[k] += write_cell(run_dir, cell, output)
            ran[k] += cell.repetitions
            left[k] -= 1
            now = time.perf_counter()
            wall[k], t = wall[k] + now - t, now
            if k == front:
                bar.update(cell.repetitions)
            advance()
            raise_if_interrupted()
    finally:
        close = getattr(results, "close", None)
        if close:
            close()
        if bar is not None:
            bar.close()
    return {p.experiment.name: (written[k], wall[k]) for k, p in enumerate(parts)}
