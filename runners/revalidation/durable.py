"""Durable checkpoint/resume cells on SQLite (ATR paper §4 "Durable evaluation", §5 "Durable workflow cells").

The paper: "In ten durable SQLite checkpoint/resume cells, ATR evaluated 0.6
conditions per change versus 6.0 for FullScan; FullScan and ATR matched all
100 executions per method."  Here the workflow really ends between its
decision and its effect.  One execution is three processes, started one after
the other, each opening its own SQLite connections:

1. **decide** — reads the business database (a :class:`~runners.revalidation.sqlite_store.SqliteStore`),
   decides (:func:`runners.revalidation.agent.decide`), writes the agent transaction's
   checkpoint (:func:`runners.revalidation.agent.checkpoint`) to the ``checkpoints`` table
   of the workflow database, and exits;
2. **second actor** — applies the mutation variant to the business database;
3. **resume** — loads the checkpoint (:func:`runners.revalidation.agent.resume`),
   validates with the mechanism, commits the effect under its tokens
   (:func:`runners.revalidation.agent.release`, one ``BEGIN IMMEDIATE`` transaction), and
   writes its result row to the workflow database.

The parent (the cell's worker) creates the databases, picks the variant and
reads the result.  Each step process logs ``(step, pid)`` in the ``steps``
table, and the record keeps how many distinct processes took part (4 with
the parent).  The steps are forked by a small step server (a fresh
interpreter that never opens a database), because forking the cell's worker,
which maps pandas and pyarrow, costs several times more.

The ten cells (the paper does not list its own): two workloads × the five
mutation classes.  **refund** is the paper's running example; **procurement**
is the workload whose premises span the most objects (request, vendor,
budget, approval), so its commit tokens guard rows of four objects.  Cloud
remediation stays in the controlled experiment.  The variant of a repetition
is picked by its seed exactly as :mod:`revalidation_outcomes` picks it; the
seed does not depend on the mechanism, so every mechanism sees the same
changes.  The oracle is the mutation's declared outcome.

Scale: the paper profile runs 100 executions per mechanism per cell (the
paper's "100 executions per method"), the quick profile 5.  Each cell works
in its own temporary directory, removed when the cell ends.
"""
from __future__ import annotations

import json
import os
import random
import sqlite3
import tempfile
import time
from pathlib import Path

from mechanisms import resolve
from runners.revalidation.agent import checkpoint, decide, release, resume
from analysis.revalidation.checkers import RELEASE, OracleAgreement
from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, artifact, derive_seed
from vocabulary import OK, History, Operation
from runners.plugins import PluginFailed, describe
from runners.processes import StepServer
from runners.revalidation.sqlite_store import SqliteStore, connect
from scenarios.revalidation.workload import Workload, load_workloads, parse_workload
from vocabulary.revalidation import MUTATION_CLASSES

WORKLOADS = ("refund", "procurement")
DEFAULT_MECHANISMS = ("NoCheck", "VersionAbort", "FullScan", "ATR")  # as in revalidation_outcomes
REPETITIONS = {"quick": 5, "paper": 100}
WORKFLOW_DB = "workflow.db"
WORKFLOW_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (repetition INTEGER PRIMARY KEY, blob TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (repetition INTEGER PRIMARY KEY, row TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS steps (repetition INTEGER, step TEXT, pid INTEGER, PRIMARY KEY (repetition, step));
"""


def business_db(folder, rep: int) -> Path:
    return Path(folder) / f"business-{rep}.db"


# ------------------------------------------------------------ the three steps (each in its own process)
def _persist(conn: sqlite3.Connection, rep: int, step: str, *statement) -> None:
    """One workflow-database transaction: the step's row (if any) and its (step, pid) entry; then close."""
    conn.execute("BEGIN IMMEDIATE")
    if statement:
        conn.execute(*statement)
    conn.execute("INSERT INTO steps VALUES (?, ?, ?)", (rep, step, os.getpid()))
    conn.execute("COMMIT")
    conn.close()


def decide_and_park(folder: str, rep: int, workload_path: str) -> None:
    """Process 1: read the business database, decide, checkpoint the agent transaction, exit."""
    workload = parse_workload(Path(workload_path))
    with SqliteStore(business_db(folder, rep)) as store:
        blob = checkpoint(decide(workload, store), workload)
    _persist(connect(Path(folder) / WORKFLOW_DB), rep, "decide", "INSERT INTO checkpoints VALUES (?, ?)", (rep, blob))


def second_actor(folder: str, rep: int, changes: dict) -> None:
    """Process 2: someone else changes the business database while the workflow is parked."""
    with SqliteStore(business_db(folder, rep)) as store:
        store.write(changes)
    _persist(connect(Path(folder) / WORKFLOW_DB), rep, "mutate")


def resume_and_release(folder: str, rep: int, workload_path: str, mechanism_name: str) -> None:
    """Process 3: resume from the checkpoint, validate, commit under the tokens, record the result."""
    workload = parse_workload(Path(workload_path))
    mechanism = resolve(mechanism_name)()
    workflow = connect(Path(folder) / WORKFLOW_DB)
    (blob,) = workflow.execute("SELECT blob FROM checkpoints WHERE repetition = ?", (rep,)).fetchone()
    with SqliteStore(business_db(folder, rep)) as store:
        txn = resume(blob, workload)
        try:
            r = release(txn, store, mechanism)
        except Exception as exc:  # noqa: BLE001 - the mechanism's error: said by the parent, never a result
            row = {"plugin_error": str(exc) if isinstance(exc, PluginFailed) else f"validate() raised {describe(exc)}"}
            _persist(workflow, rep, "resume", "INSERT INTO results VALUES (?, ?)", (rep, json.dumps(row)))
            return
    row = {"outcome": r.outcome.name, "released": r.released, "payload_stale": r.released and r.payload_stale,
           "premises_evaluated": r.premises_evaluated, "validations": r.validations,
           "commit_attempts": r.commit_attempts, "validation_us": r.validation_ns / 1000.0,
           "failed": ",".join(r.failed), "checkpoint_bytes": len(blob.encode())}
    _persist(workflow, rep, "resume", "INSERT INTO results VALUES (?, ?)", (rep, json.dumps(row)))


STEPS = {step.__name__: step for step in (decide_and_park, second_actor, resume_and_release)}


# ------------------------------------------------------------ one cell's executions
class Workspace:
    """What one cell's executions share: a temporary folder, the workflow database, the step server.

    The parent keeps its own connection to each database open while the steps
    run (it never forks, so that is safe); the steps' connections then never
    are the last one, and closing them does not checkpoint and delete the WAL.
    Everything is removed on exit.
    """

    def __init__(self, scratch: Path | None = None):
        self.scratch = scratch  # parent folder of the temporary one (None: the system's temp)

    def __enter__(self) -> "Workspace":
        self._tmp = tempfile.TemporaryDirectory(prefix="driftlab-durable-", dir=self.scratch)
        self.folder = Path(self._tmp.name)
        self.workflow = connect(self.folder / WORKFLOW_DB)
        try:
            self.workflow.executescript(WORKFLOW_SCHEMA)
            self.server = StepServer()
        except BaseException:
            self.workflow.close()
            self._tmp.cleanup()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.server.close()
        finally:
            self.workflow.close()
            self._tmp.cleanup()

    def execute(self, workload: Workload, mutation_class: str, mechanism_name: str, seed: int, rep: int,
                history: list[Operation] | None = None) -> dict:
        """One durable execution; returns its record (without the cell's key columns).

        Each step's process becomes one operation of ``history`` (group = repetition).  This experiment
        kills no process, so a step whose process exits abnormally is never a result: the release step
        runs the mechanism, whose error (raised, a wrong return, its process ended) is :class:`PluginFailed`;
        any other step's is the lab's own failure.  Either stops the cell.
        """
        history = [] if history is None else history
        mutation = workload.mutations[mutation_class]
        variant = random.Random(seed).randrange(len(mutation.variants))
        changes = {c.ref: c.value for c in mutation.variants[variant]}
        folder, path = str(self.folder), business_db(self.folder, rep)
        store = SqliteStore.create(path, workload.initial_state())
        steps = ((decide_and_park, "agent", "decide", (folder, rep, str(workload.path)), {}),
                 (second_actor, "second_actor", "mutate", (folder, rep, changes), {"changes": changes}),
                 (resume_and_release, "agent", RELEASE, (folder, rep, str(workload.path), mechanism_name), {}))
        try:
            for step, actor, op, args, value in steps:
                start = time.perf_counter()
                pid, code = self.server.call(step, *args)
                end = time.perf_counter()
                if code != 0 and op == RELEASE:
                    raise PluginFailed(mechanism_name, f"the release step's process (pid {pid}) running validate() "
                                                       f"exited with code {code}")
                if code != 0:
                    raise RuntimeError(f"the {op} step's process (pid {pid}) exited with code {code}")
                if op == RELEASE:
                    (row_text,) = self.workflow.execute("SELECT row FROM results WHERE repetition = ?", (rep,)).fetchone()
                    result = json.loads(row_text)
                    if "plugin_error" in result:
                        raise PluginFailed(mechanism_name, result["plugin_error"])
                    value = {"mechanism": mechanism_name, "oracle": mutation.oracle.name,
                             **{k: result[k] for k in ("outcome", "released", "payload_stale")}}
                history.append(Operation(len(history), f"{actor}[{pid}]", op, OK, start, end, {"group": rep, **value}))
            log, _ = store.changes_since(0)
        finally:
            store.close()
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        pids = {pid for (pid,) in self.workflow.execute("SELECT pid FROM steps WHERE repetition = ?", (rep,))}
        base = {"variant": variant, "oracle": mutation.oracle.name, "changes": len(changes)}
        return {**base, **result, "effect_committed": len(log) > len(changes), "processes": len(pids | {os.getpid()})}


class RevalidationDurable(Experiment):
    name = "revalidation_durable"
    family = "revalidation"
    description = "durable SQLite cells: decide + checkpoint, second actor, resume + validate, 3 processes each"
    artifacts = (artifact("revalidation_durable"),)
    uses_user_scenarios = False  # ten fixed cells of the shipped workloads

    def check(self, options: Options) -> None:
        workloads = load_workloads(tuple(options.scenario_dirs))
        missing = [w for w in WORKLOADS if w not in workloads]
        if missing:
            raise DriftlabError(f"revalidation_durable needs the workload(s) {', '.join(missing)}")
        for m in options.mechanisms_for("revalidation") or DEFAULT_MECHANISMS:
            resolve(m, "revalidation")

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        reps = options.extra.get("repetitions") or REPETITIONS[profile]
        if reps < 1:
            raise DriftlabError(f"--repetitions must be at least 1, got {reps}")
        return [Cell(self.name, (("workload", w), ("mutation_class", c), ("mechanism", m)), reps, seed)
                for w in WORKLOADS for c in MUTATION_CLASSES for m in options.mechanisms_for("revalidation") or DEFAULT_MECHANISMS]

    def run_cell(self, cell: Cell, options: Options) -> dict[str, list]:
        p = cell.p
        workload = load_workloads(tuple(options.scenario_dirs))[p["workload"]]
        rows, ops = [], []
        with Workspace(options.scratch) as space:
            for rep in range(cell.repetitions):
                seed = derive_seed(cell.seed, self.name, p["workload"], p["mutation_class"], rep)
                rows.append({"repetition": rep, "seed": seed,
                             **space.execute(workload, p["mutation_class"], p["mechanism"], seed, rep, ops)})
        history = History("revalidation", tuple(ops), {"cell": cell.id, "workload": p["workload"],
                                                       "mechanism": p["mechanism"]})
        judged = {g.group: g.verdict.value for g in OracleAgreement().judge(history)}
        for row in rows:
            row["verdict"] = judged.get(row["repetition"], "unknown")
        return CellOutput({k: [r[k] for r in rows] for k in rows[0]}, history)

