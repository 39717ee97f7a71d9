"""Controlled outcomes of NoCheck, VersionAbort, FullScan and ATR (ATR paper §5.1, Table 3).

Grid: workload × mutation class × schedule × mechanism, each cell run for
the profile's repetitions (paper profile: 3 × 5 × 7 × 2,000 = 210,000
executions per mechanism).  An execution builds the workload's state in a
:class:`~runners.stores.MemoryStore`, lets the agent decide, lands the
mutation at the schedule's lifecycle point, and asks the mechanism to
validate before the effect is committed under its tokens.  The seed of a
repetition does not depend on the mechanism, so every mechanism sees the
same variants.  The oracle is the mutation's declared outcome, which the
loader proved is the one its rules imply, alone and after s7's prelude
(:mod:`scenarios.oracle`).  Records say what happened (outcome, released,
payload_stale...); the counts are made in :mod:`analysis.revalidation_counting`.
"""
from __future__ import annotations

import importlib
import random

from analysis.artifact import Artifact
from mechanisms import resolve
from runners.agent import checkpoint, decide, release, resume
from runners.experiment import Cell, DriftlabError, Experiment, Options, derive_seed
from runners.stores import MemoryStore
from scenarios.oracle import prelude_class
from scenarios.schedules import load_schedules
from scenarios.workload import Workload, load_workloads
from vocabulary.revalidation import MUTATION_CLASSES, Outcome

DEFAULT_MECHANISMS = ("NoCheck", "VersionAbort", "FullScan", "ATR")
REPETITIONS = {"quick": 20, "paper": 2000}


def dominated_prelude(workload: Workload, oracle: Outcome) -> str:
    """Schedule s7's first change: the strongest class the case's oracle still dominates.

    The rule lives in :func:`scenarios.oracle.prelude_class`, so that the loader proves, for every
    prelude + variant pair, that the oracle does not depend on the schedule."""
    return prelude_class(oracle)


def pick_changes(workload: Workload, mutation_class: str, schedule, rng: random.Random) -> tuple[int, list]:
    """(variant index, the groups of changes to land): the case's variant, after s7's prelude if any."""
    mutation = workload.mutations[mutation_class]
    variant = rng.randrange(len(mutation.variants))
    changes = [mutation.variants[variant]]
    if schedule.prelude == "dominated":
        first = workload.mutations[dominated_prelude(workload, mutation.oracle)]
        changes.insert(0, first.variants[rng.randrange(len(first.variants))])
    return variant, changes


def run_schedule(workload: Workload, changes: list, schedule, mechanism, dependencies=None):
    """Decide, land ``changes`` at the schedule's lifecycle point, validate and release: (Release, txn, store)."""
    store = MemoryStore(workload.initial_state())
    txn = decide(workload, store, dependencies)

    def land() -> None:
        for group in changes:
            store.write({c.ref: c.value for c in group})

    if schedule.lands == "parked":
        blob = checkpoint(txn, workload)
        land()
        txn = resume(blob, workload)
    elif schedule.lands != "validation_commit_gap":
        land()  # after_decision, tool_wait, approval, after_approval: the agent only waits there
    gap = land if schedule.lands == "validation_commit_gap" else None
    return release(txn, store, mechanism, between_check_and_commit=gap), txn, store


def run_execution(workload: Workload, mutation_class: str, schedule, mechanism, seed: int) -> dict:
    """One controlled execution; returns its record (without the cell's key columns)."""
    variant, changes = pick_changes(workload, mutation_class, schedule, random.Random(seed))
    r, txn, store = run_schedule(workload, changes, schedule, mechanism)
    return {
        "variant": variant, "oracle": workload.mutations[mutation_class].oracle.name, "outcome": r.outcome.name,
        "released": r.released, "payload_stale": r.released and r.payload_stale,
        "premises_evaluated": r.premises_evaluated, "changes": sum(len(v) for v in changes),
        "validations": r.validations, "commit_attempts": r.commit_attempts,
        "validation_us": r.validation_ns / 1000.0,
    }


def lazy(dotted: str):
    """``module:function`` called on first use, so that running cells never imports pandas' plotting stack."""
    module, _, attr = dotted.partition(":")

    def call(*args):
        return getattr(importlib.import_module(module), attr)(*args)

    call.__name__ = call.__qualname__ = attr
    call.__doc__ = f"{dotted}, imported on first use"
    return call


def artifact(name: str) -> Artifact:
    """The revalidation artifact ``name``: analysis/<name>.py (table, report) and figures/<name>.py (draw)."""
    return Artifact(name, table=lazy(f"analysis.{name}:table"), report=lazy(f"analysis.{name}:report"),
                    draw=lazy(f"figures.{name}:draw"))


class RevalidationOutcomes(Experiment):
    name = "revalidation_outcomes"
    family = "revalidation"
    description = "controlled outcomes: workloads x 5 mutation classes x 7 schedules per mechanism"
    artifacts = (artifact("revalidation_outcomes"),)
    compare = True

    def compare_table(self, table):
        """`driftlab compare` prints the totals over every workload and class, one row per mechanism."""
        rows = table[(table["workload"] == "all") & (table["mutation_class"] == "all")]
        return rows.drop(columns=["workload", "mutation_class"])

    def check(self, options: Options) -> None:
        load_workloads(tuple(options.scenario_dirs))
        for m in options.mechanisms or DEFAULT_MECHANISMS:
            resolve(m)

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        workloads = load_workloads(tuple(options.scenario_dirs))
        schedules = load_schedules()
        reps = options.extra.get("repetitions") or REPETITIONS[profile]
        if reps < 1:
            raise DriftlabError(f"--repetitions must be at least 1, got {reps}")
        return [Cell(self.name, (("workload", w), ("mutation_class", c), ("schedule", s.id), ("mechanism", m)), reps, seed)
                for w in workloads for c in MUTATION_CLASSES for s in schedules
                for m in options.mechanisms or DEFAULT_MECHANISMS]

    def run_cell(self, cell: Cell, options: Options) -> dict[str, list]:
        p = cell.p
        workload = load_workloads(tuple(options.scenario_dirs))[p["workload"]]
        schedule = {s.id: s for s in load_schedules()}[p["schedule"]]
        mechanism = resolve(p["mechanism"])()
        rows = []
        for rep in range(cell.repetitions):
            seed = derive_seed(cell.seed, p["workload"], p["mutation_class"], p["schedule"], rep)
            rows.append({"repetition": rep, "seed": seed,
                         **run_execution(workload, p["mutation_class"], schedule, mechanism, seed)})
        return {k: [r[k] for r in rows] for k in rows[0]}
