"""What the resume experiments share: scenarios, runtimes, backends, and one fault cell's execution.

Serves the three process artifacts of "Resume Means Resume" (fault matrix,
independence matrix, conformance profile): each runs fault-matrix cells
(``scenarios/resume/cell_*.toml``) on some runtimes and turns every cell's
history into one record per property, with the checker's verdict and
witness.  The runtime name is a column value like any other, so a runtime
registered in ``mechanisms/resume`` (or given as ``package.module:Class``)
becomes extra rows of every artifact.
"""
from __future__ import annotations

import os
import secrets
import sys
import tempfile
import time
from functools import cache
from pathlib import Path
from typing import Any

from mechanisms import MechanismError, resolve
from mechanisms.resume import DEFAULT_RUNTIMES
from mechanisms.resume.store import drop_backend
from runners.experiment import DriftlabError, Options, derive_seed
from runners.resume.cells import Recorder, finish, play, setup_backend
from runners.resume.procs import ForkedExecutor
from scenarios import ScenarioError, load_scenarios
from scenarios.resume.loader import by_kind, cell_graph, expected_effects
from vocabulary import History
from vocabulary.resume import LIVENESS, PROPERTIES, Backend

#: the checker columns of every verdict table (the six properties, then liveness)
CHECKED = (*PROPERTIES, LIVENESS)


def resume_scenarios(options: Options) -> dict[str, Any]:
    return _scenarios(tuple(options.scenario_dirs))


@cache
def _scenarios(dirs: tuple) -> dict[str, Any]:
    try:
        return load_scenarios(dirs, family="resume")["resume"]
    except ScenarioError as exc:
        raise DriftlabError(str(exc)) from None


def fault_cells(options: Options) -> list:
    return sorted(by_kind(resume_scenarios(options), "cell").values(), key=lambda c: (c.order, c.name))


def runtimes(options: Options, backend: str | None = None) -> list[str]:
    """The runtimes to run: the user's (``--mechanisms``) or the defaults; those that support ``backend``."""
    names = list(options.mechanisms_for("resume") or DEFAULT_RUNTIMES)
    out = []
    for name in names:
        try:
            cls = resolve(name, "resume")
        except MechanismError as exc:
            raise DriftlabError(str(exc)) from None
        if backend is None or backend in getattr(cls, "backends", ("sqlite", "postgres")):
            out.append(name)
    return out


def supports(runtime: str, point: str) -> bool:
    return point == "-" or point in getattr(resolve(runtime, "resume"), "points", ())


@cache
def postgres_reachable() -> str:
    """'' if PostgreSQL answers at the lab's DSN, else the one-line reason (asked once per process)."""
    from runners.backends import check_postgres

    return check_postgres()


#: PostgreSQL schemas of the resume family: ``runners.backends.schema_name`` names (host, pid, random), each
#: with a ``<name>_ledger`` twin for the effect ledger
SCHEMA_PREFIX = "driftlab_resume_"


def make_backend(kind: str, options: Options) -> Backend:
    """A fresh, empty backend of ``kind`` (a folder under the run's scratch, or a PostgreSQL namespace)."""
    from runners.backends import postgres_dsn, schema_name

    if kind == "sqlite":
        base = options.scratch or Path(tempfile.gettempdir())
        folder = Path(tempfile.mkdtemp(prefix="resume_", dir=base))
        return Backend("sqlite", str(folder), f"r{os.getpid()}_{secrets.token_hex(4)}")
    return Backend("postgres", postgres_dsn(), schema_name(SCHEMA_PREFIX))


def drop_orphan_schemas() -> list[str]:
    """Drop this host's resume schemas (and their ledger twins) whose creating process is gone.

    The rule is :func:`runners.backends.orphaned`'s: a schema of another host
    sharing the server, of a live process, or of any other name is left alone.
    Names are read back from the server, so they are composed as identifiers."""
    import psycopg
    from psycopg import sql

    from runners.backends import orphaned, postgres_dsn

    dropped = []
    with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
        names = [n for (n,) in conn.execute("SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)",
                                            (SCHEMA_PREFIX,))]
        for name in names:
            if orphaned(SCHEMA_PREFIX, name.removesuffix("_ledger")):
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
                dropped.append(name)
    return dropped


def discard(backend: Backend) -> None:
    drop_backend(backend)
    if backend.kind == "sqlite":
        try:
            Path(backend.location).rmdir()
        except OSError:
            pass


def run_fault_cell(experiment: str, runtime: str, cell_name: str, repetitions: int, seed: int, options: Options,
                   backend_kind: str = "sqlite") -> tuple[dict[str, list], History]:
    """Every repetition of one fault cell on one runtime: one record per property, and the cell's history."""
    from analysis.resume.checkers import check_all

    scen = resume_scenarios(options)
    cell = scen[cell_name]
    graph = cell_graph(cell, by_kind(scen, "graph"))
    rec = Recorder(graph, {"experiment": experiment, "runtime": runtime, "cell": cell_name, "backend": backend_kind})
    rows: list[dict] = []
    applicable = supports(runtime, cell.crash_point) and all(s.crash is None or supports(runtime, s.crash)
                                                            for s in cell.steps)
    for rep in range(repetitions):
        rep_seed = derive_seed(seed, experiment, runtime, cell_name, rep)
        if not applicable:
            rows += [_row(rep, rep_seed, cell, prop, "not applicable", 0, expected_effects(cell, graph),
                          f"{runtime} cannot stop at {cell.crash_point}", 0, 0, 0.0) for prop in CHECKED]
            continue
        backend = make_backend(backend_kind, options)
        t0 = time.perf_counter()
        try:
            setup_backend(runtime, backend, graph)
            executor = ForkedExecutor(runtime, backend, graph)
            first = len(rec.ops)
            rec.runs = []
            for replica in range(cell.replicas):
                play(cell, executor, rec, f"{cell_name}-{rep}-{replica}", f"{cell_name}/{rep}")
            history = finish(rec, runtime, backend, graph)
        finally:
            discard(backend)
        wall_us = (time.perf_counter() - t0) * 1e6
        mine = History(history.family, history.operations[first:], history.meta)
        results = check_all(mine)
        fired = sum(1 for op in mine.operations if op.name == "effect")
        kills = [k for k in executor.kills if k[1] == -9]
        for prop in CHECKED:
            r = results[prop]
            witness = r.witnesses[0].explanation if r.witnesses else ""
            rows.append(_row(rep, rep_seed, cell, prop, r.verdict.value, fired, expected_effects(cell, graph), witness,
                             len(kills), len({op.value.get("pid") for op in mine.operations
                                              if op.actor == "driver"}), wall_us))
    return {k: [r[k] for r in rows] for k in rows[0]}, rec.history()


def _row(rep, seed, cell, prop, verdict, fired, expected, witness, kills, processes, wall_us) -> dict:
    return {"repetition": rep, "seed": seed, "operation": cell.operation, "crash_point": cell.crash_point,
            "property": prop, "verdict": verdict, "effects_fired": fired, "effects_expected": expected,
            "witness": witness, "sigkills": kills, "processes": processes, "wall_us": wall_us}


def note(text: str) -> None:
    print(f"resume: {text}", file=sys.stderr)
