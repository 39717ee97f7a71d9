"""Run cells in parallel worker processes, writing each finished cell's records atomically.

The run folder's ``records/<experiment>/<cell>.parquet`` files are the truth
of a run (STYLE.md: "the history is the primary artifact").  A cell's file
is written to a temporary name and renamed into place, so a run killed by
Ctrl-C or SIGKILL leaves only whole cells behind; started again with the same
``--out``, it skips every cell whose file exists and runs the rest.  Nothing
is ever appended to, so no record can be duplicated.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from runners.experiment import Cell, CellOutput, Experiment, Options
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
    columns = output.records
    frame = pd.DataFrame(columns)
    for i, (key, value) in enumerate(cell.params):
        frame.insert(i, key, value)
    frame.insert(0, "cell", cell.id)
    frame.insert(0, "experiment", cell.experiment)
    _atomic_write(cell_path(run_dir, cell), lambda tmp: frame.to_parquet(tmp, index=False))
    return len(frame)


def _work(args: tuple) -> tuple[str, int]:
    experiment, cell, options, run_dir = args
    return cell.id, write_cell(run_dir, cell, experiment.run_cell(cell, options))


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the parent, which terminates them: a worker interrupted
    mid-message could leave the pool's queues locked and the parent hung."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def pending(run_dir: Path, cells: list[Cell]) -> list[Cell]:
    return [c for c in cells if not cell_path(run_dir, c).exists()]


def remove_partial_files(run_dir: Path, experiment: str) -> None:
    """Temporary files a killed run left behind (never read: records are only *.parquet)."""
    for folder in (RECORDS, HISTORIES):
        for tmp in (run_dir / folder / experiment).glob(".*.tmp"):
            tmp.unlink(missing_ok=True)


def run_cells(experiment: Experiment, cells: list[Cell], options: Options, run_dir: Path, jobs: int,
              progress: bool = True) -> int:
    """Run the cells not yet on disk; returns how many records were written now."""
    remove_partial_files(run_dir, experiment.name)
    todo = pending(run_dir, cells)
    total = sum(c.repetitions for c in todo)
    bar = tqdm(total=total, unit="exec", desc=experiment.name, disable=not progress or not todo,
               dynamic_ncols=True, leave=True)
    written = 0
    by_id = {c.id: c for c in todo}
    args = [(experiment, c, options, run_dir) for c in todo]
    try:
        if jobs <= 1 or not experiment.parallel or len(todo) <= 1:
            results = map(_work, args)
            for cell_id, n in results:
                written += n
                bar.update(by_id[cell_id].repetitions)
        else:
            import multiprocess

            with multiprocess.get_context("fork").Pool(jobs, initializer=_ignore_sigint) as pool:
                for cell_id, n in pool.imap_unordered(_work, args):
                    written += n
                    bar.update(by_id[cell_id].repetitions)
    finally:
        bar.close()
    return written
