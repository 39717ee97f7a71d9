"""Cells on a Dask distributed cluster (``--executor dask [--scheduler tcp://HOST:PORT]``).

For sweeps beyond one machine: every cell becomes one Dask task.  A task runs
the cell on a worker, in a scratch folder of its own on that worker, and
returns the cell's records (and history) to the client; the client alone
writes the run folder, one cell at a time and atomically, exactly as with the
local pool.  A worker lost mid-cell has its task rescheduled by the Dask
scheduler on another worker; since nothing is written until a result reaches
the client, a retried cell cannot duplicate a record.

Without ``--scheduler`` a ``LocalCluster`` of ``--jobs`` single-threaded
worker processes is started for the run and closed after it.  Cells that use
PostgreSQL need a DSN the workers can reach: it is checked on every worker
before the first cell is submitted.
"""
from __future__ import annotations

import logging
import shutil
import signal
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Iterator

from runners.backends import check_postgres, orphaned, postgres_dsn, schema_name
from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, compute, mechanism_of


#: the scratch folders of cells on a worker: ``runners.backends.schema_name`` names (host, pid, random), so that
#: a worker killed mid-cell leaves a folder the next cell on that host recognises as an orphan and removes
SCRATCH_PREFIX = "driftlab_cell_"


def remove_orphan_scratch(base: Path) -> list[Path]:
    """Remove this host's cell scratch folders whose process is gone (never a live cell's, never another host's)."""
    removed = []
    for path in base.glob(f"{SCRATCH_PREFIX}*"):
        if path.is_dir() and orphaned(SCRATCH_PREFIX, path.name):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _on_worker(experiment: Experiment, cell: Cell, options: Options) -> tuple[Cell, "CellOutput | str"]:
    base = Path(tempfile.gettempdir())
    remove_orphan_scratch(base)
    scratch = base / schema_name(SCRATCH_PREFIX)
    scratch.mkdir()
    try:  # the worker's own scratch folder: the client's run folder may not exist on this machine
        return compute(experiment, cell, replace(options, run_dir=scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _local_cluster(jobs: int):
    """A LocalCluster whose processes ignore Ctrl-C (the client closes them) and log nothing: a lost worker or an
    interrupted run is said by the lab in one line, never by a worker's traceback."""
    from dask.distributed import LocalCluster

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited by the nannies and their workers
    try:
        return LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None,
                            silence_logs=logging.CRITICAL)
    finally:
        signal.signal(signal.SIGINT, previous)


def run_on_dask(experiment: Experiment, todo: list[Cell], options: Options, jobs: int,
                scheduler: str | None, timeout_s: float | None = None) -> Iterator[tuple[Cell, "CellOutput | str"]]:
    """Submit every cell; yield (cell, output) in completion order; close what this call started.

    A Dask worker runs a cell in a thread that cannot be stopped, so the time limit is the client's: when no
    cell has finished for ``timeout_s``, the first unfinished cell is reported as past its limit."""
    from dask.distributed import Client, wait

    cluster = None
    try:
        if scheduler:
            try:
                client = Client(scheduler, timeout="10s")
            except (OSError, TimeoutError) as exc:
                raise DriftlabError(f"--scheduler {scheduler}: cannot connect ({exc})") from None
        else:
            cluster = _local_cluster(jobs)
            client = Client(cluster)
    except DriftlabError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise DriftlabError(f"--executor dask: cannot start a cluster ({type(exc).__name__}: {exc})") from None
    try:
        if options.backend == "postgres":
            problems = {w: p for w, p in client.run(check_postgres).items() if p}
            if problems:
                worker, problem = next(iter(problems.items()))
                raise DriftlabError(f"dask worker {worker}: cannot reach PostgreSQL at {postgres_dsn()!r}: {problem}; "
                                    "PostgreSQL-backed cells need a DSN every worker can reach (DRIFTLAB_POSTGRES_DSN)")
        futures = {client.submit(_on_worker, experiment, cell, options, pure=False, retries=2): cell for cell in todo}
        unfinished = set(futures)
        while unfinished:
            try:
                finished = wait(unfinished, timeout=timeout_s, return_when="FIRST_COMPLETED").done
            except TimeoutError:  # distributed's wait raises the builtin TimeoutError
                cell = next(c for f, c in futures.items() if f in unfinished)
                who = mechanism_of(cell)
                yield cell, ((f"mechanism {who}: " if who else "") + f"no cell finished within the time limit of "
                             f"{timeout_s:g} s (--cell-timeout); the run was stopped")
                return
            for future in finished:
                unfinished.discard(future)
                yield future.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
