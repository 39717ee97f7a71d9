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

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Iterator

from runners.backends import check_postgres, postgres_dsn
from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, compute


def _on_worker(experiment: Experiment, cell: Cell, options: Options) -> tuple[Cell, "CellOutput | str"]:
    scratch = Path(tempfile.mkdtemp(prefix="driftlab-cell-"))
    try:  # the worker's own scratch folder: the client's run folder may not exist on this machine
        return compute(experiment, cell, replace(options, run_dir=scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_on_dask(experiment: Experiment, todo: list[Cell], options: Options, jobs: int,
                scheduler: str | None) -> Iterator[tuple[Cell, "CellOutput | str"]]:
    """Submit every cell; yield (cell, output) in completion order; close what this call started."""
    from dask.distributed import Client, LocalCluster, as_completed

    cluster = None
    try:
        if scheduler:
            try:
                client = Client(scheduler, timeout="10s")
            except (OSError, TimeoutError) as exc:
                raise DriftlabError(f"--scheduler {scheduler}: cannot connect ({exc})") from None
        else:
            cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None)
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
        futures = [client.submit(_on_worker, experiment, cell, options, pure=False, retries=2) for cell in todo]
        for future in as_completed(futures):
            yield future.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
