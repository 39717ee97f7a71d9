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
import shutil
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


#: framework-only graphs and cells (issue 14 §2): run by resume_frameworks, never by the lab's own matrices
FRAMEWORK_SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios" / "resume" / "frameworks"


def framework_cells(options: Options) -> list:
    """The cells of ``scenarios/resume/frameworks/`` (not in the fault matrix of the lab's own runtimes)."""
    mine = set(by_kind(resume_scenarios(options), "cell"))
    every = by_kind(_scenarios((*options.scenario_dirs, str(FRAMEWORK_SCENARIOS))), "cell")
    return sorted((c for n, c in every.items() if n not in mine), key=lambda c: (c.order, c.name))


def not_applicable(runtime: str, cell, graph) -> str:
    """Why ``runtime`` cannot play ``cell`` ('' if it can): a crash point it cannot reach, a call or a graph hint
    it has no form of (a framework declares each in its env's ``not_applicable`` with the reason)."""
    cls = resolve(runtime, "resume")
    declared = getattr(cls, "not_applicable", {})
    for point in dict.fromkeys([cell.crash_point, *(s.crash for s in cell.steps if s.crash)]):
        if not supports(runtime, point):
            return declared.get(point) or f"{runtime} cannot stop at {point}"
    for s in cell.steps:  # a point reachable at some nodes only: "<point>@<node>" (e.g. no checkpoint after a node)
        if s.crash and f"{s.crash}@{s.node}" in declared:
            return declared[f"{s.crash}@{s.node}"]
    for call in dict.fromkeys(s.call for s in cell.steps):
        if call in declared:
            return declared[call]
        if call in ("replay", "update") and not (hasattr(cls, "declared") or callable(getattr(cls, call, None))):
            return f"{runtime} has no {call} operation"
    if "resume_by_id" in declared and any(s.call == "resume" and s.at for s in cell.steps):
        return declared["resume_by_id"]  # a resume addressed to a checkpoint id the framework has no form of
    for hint in graph.hints:
        if hint in declared:
            return declared[hint]
        if not hasattr(cls, "declared"):
            return f"{runtime} runs the lab's nodes in order (graph hint {hint!r} not expressed)"
    return ""


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


def check_backends(options: Options, backends: tuple[str, ...]) -> None:
    """Refuse a runtime the user named that supports none of the run's backends (it would give no cell)."""
    for name in options.mechanisms_for("resume") or ():
        cls = resolve(name, "resume")
        own = tuple(getattr(cls, "backends", ("sqlite", "postgres")))
        if not set(own) & set(backends):
            raise DriftlabError(f"--mechanisms {name}: supports only {', '.join(own) or 'no backend'}; this run's "
                                f"backend is {', '.join(backends)} (--backend)")


def supports(runtime: str, point: str) -> bool:
    return point == "-" or point in getattr(resolve(runtime, "resume"), "points", ())


def connections_per_racer(runtime: str) -> int:
    """PostgreSQL connections one racer of ``runtime`` holds: its env's declaration, or its class's."""
    from mechanisms import resolve
    from mechanisms.resume.frameworks import CONNECTIONS_PER_RACER, declared

    d = declared().get(runtime)  # a user's plug-in need not subclass DurableRuntime: the default then
    return d.connections_per_racer if d else getattr(resolve(runtime, "resume"), "connections_per_racer",
                                                     CONNECTIONS_PER_RACER)


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
            if orphaned(SCHEMA_PREFIX, name.removesuffix("_ledger").removesuffix("_guard")):
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
                dropped.append(name)
    return dropped


def discard(backend: Backend) -> None:
    drop_backend(backend)
    if backend.kind == "sqlite":  # the cell's own folder: a framework's files go with it (and its servers stop)
        shutil.rmtree(backend.location, ignore_errors=True)


def run_fault_cell(experiment: str, runtime: str, cell_name: str, repetitions: int, seed: int, options: Options,
                   backend_kind: str = "sqlite") -> tuple[dict[str, list], History]:
    """Every repetition of one fault cell on one runtime: one record per property, and the cell's history."""
    from analysis.resume.checkers import CO_INERT, check_all

    scen = resume_scenarios(options)
    if cell_name not in scen:  # a framework-only cell (scenarios/resume/frameworks/)
        scen = _scenarios((*options.scenario_dirs, str(FRAMEWORK_SCENARIOS)))
    cell = scen[cell_name]
    graph = cell_graph(cell, by_kind(scen, "graph"))
    rec = Recorder(graph, {"experiment": experiment, "runtime": runtime, "cell": cell_name, "backend": backend_kind})
    rows: list[dict] = []
    reason = not_applicable(runtime, cell, graph)
    for rep in range(repetitions):
        rep_seed = derive_seed(seed, experiment, runtime, cell_name, rep)
        if reason:
            rows += [_row(rep, rep_seed, cell, prop, "not applicable", 0, expected_effects(cell, graph), reason, 0, 0,
                          0.0, "not applicable") for prop in CHECKED]
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
        inert = CO_INERT.check(mine).verdict.value
        fired = sum(1 for op in mine.operations if op.name == "effect")
        kills = [k for k in executor.kills if k[1] == -9]
        for prop in CHECKED:
            r = results[prop]
            witness = stable_witness(r.witnesses[0].explanation, mine) if r.witnesses else ""
            rows.append(_row(rep, rep_seed, cell, prop, r.verdict.value, fired, expected_effects(cell, graph), witness,
                             len(kills), len({op.value.get("pid") for op in mine.operations
                                              if op.actor == "driver"}), wall_us, inert))
    return {k: [r[k] for r in rows] for k in rows[0]}, rec.history()


#: the value keys of a resume history that hold a checkpoint id
CHECKPOINT_KEYS = ("checkpoint", "head", "from_checkpoint", "parent")


def stable_witness(text: str, history: History) -> str:
    """A witness for a table, without the runtime's checkpoint ids (uuid4 in the lab's runtimes, time-based in
    LangGraph's): each id becomes ``cp<N>``, N its order of first appearance in the history, so that one seed
    gives one table.  The history itself keeps the real ids (``driftlab check`` quotes them)."""
    ids: dict[str, str] = {}
    for op in history.operations:
        for key in CHECKPOINT_KEYS:
            value = op.value.get(key)
            if isinstance(value, str) and value and value not in ids:
                ids[value] = f"cp{len(ids) + 1}"
    for real in sorted(ids, key=len, reverse=True):  # longest first: no id is rewritten inside another
        text = text.replace(real, ids[real])
    return text


def _row(rep, seed, cell, prop, verdict, fired, expected, witness, kills, processes, wall_us, co_inert) -> dict:
    """One record; ``co_inert`` is the execution's consume-once under REMIT's reading (a stray resume accepted
    inert conforms), kept beside the lab's CO (``property`` = CO), never instead of it."""
    return {"repetition": rep, "seed": seed, "operation": cell.operation, "crash_point": cell.crash_point,
            "property": prop, "verdict": verdict, "effects_fired": fired, "effects_expected": expected,
            "witness": witness, "sigkills": kills, "processes": processes, "wall_us": wall_us, "co_inert": co_inert,
            # the racer counts a race record carries (analysis/resume/concurrency.py RACER_COUNTS): none in a fault cell
            "served": 0, "refused": 0, "failed": 0, "indeterminate": 0}


def note(text: str) -> None:
    print(f"resume: {text}", file=sys.stderr)
