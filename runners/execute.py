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
from pathlib import Path

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


def _local(experiment: Experiment, todo: list[Cell], options: Options, jobs: int, timeout_s: float | None):
    """Cells in forked worker processes (one at a time unless the experiment runs in parallel); yields
    (cell, output) as they finish.  A worker that dies or a cell past its time limit is a failed cell."""
    from runners.workers import TaskTimedOut, WorkerDied, run_workers

    tasks = [(experiment, c, options) for c in todo]
    try:
        waiting = [experiment.waits(c, options) for c in todo]
        keys = [experiment.affinity(c, options) for c in todo]
        jobs = jobs if experiment.parallel else 1
        for _, result in run_workers(_compute, tasks, jobs, timeout_s, waiting, keys,
                                     waiting_jobs=jobs * experiment.waiting_workers_per_job):
            yield result
    except (WorkerDied, TaskTimedOut) as exc:
        cell = exc.task[1]
        who = mechanism_of(cell)
        yield cell, (f"mechanism {who}: " if who else "") + str(exc)


def run_cells(experiment: Experiment, cells: list[Cell], options: Options, run_dir: Path, jobs: int,
              progress: bool = True, executor: str = "local", scheduler: str | None = None,
              label: str | None = None, timeout_s: float | None = None) -> int:
    """Run the cells not yet on disk; returns how many records were written now.

    Wherever a cell runs (here, a local pool, a Dask worker), its output comes
    back to this process, which alone writes the run folder, one cell at a
    time and atomically.  The first failing cell stops the experiment with a
    :class:`CellFailed`; the cells finished before it are kept.
    """
    remove_partial_files(run_dir, experiment.name)
    todo = pending(run_dir, cells)
    total = sum(c.repetitions for c in todo)
    bar = tqdm(total=total, unit="exec", desc=label or experiment.name, disable=not progress or not todo,
               dynamic_ncols=True, leave=True)
    written = 0
    if executor == "dask" and experiment.parallel and todo:
        from runners.dask_executor import run_on_dask

        results = run_on_dask(experiment, todo, options, jobs, scheduler, timeout_s)
    else:
        results = _local(experiment, todo, options, jobs, timeout_s)
    try:
        for cell, output in results:
            if isinstance(output, str):
                raise CellFailed(f"{experiment.name}: cell {cell.id} failed: {output} "
                                 f"(finished cells are kept in {run_dir})")
            written += write_cell(run_dir, cell, output)
            bar.update(cell.repetitions)
            raise_if_interrupted()
    finally:
        close = getattr(results, "close", None)
        if close:
            close()
        bar.close()
    return written
