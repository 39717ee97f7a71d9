"""Controlled outcomes of NoCheck, VersionAbort, FullScan and ATR (ATR paper §5.1, Table 3).

Grid: workload × mutation class × schedule × mechanism, each cell run for
the profile's repetitions (paper profile: 3 × 5 × 7 × 2,000 = 210,000
executions per mechanism).  An execution builds the workload's state in a
:class:`~runners.revalidation.stores.MemoryStore`, lets the agent decide, lands the
mutation at the schedule's lifecycle point, and asks the mechanism to
validate before the effect is committed under its tokens.  The seed of a
repetition does not depend on the mechanism, so every mechanism sees the
same variants.  The oracle is the mutation's declared outcome, which the
loader proved is the one its rules imply, alone and after s7's prelude
(:mod:`scenarios.revalidation.oracle`).  Records say what happened (outcome, released,
payload_stale...); the counts are made in :mod:`analysis.revalidation.counting`.
"""
from __future__ import annotations

import random

from mechanisms import resolve
from runners.revalidation.agent import pick_changes, run_schedule
from runners.experiment import Cell, DriftlabError, Experiment, Options, artifact, derive_seed
from scenarios.revalidation.schedules import load_schedules
from scenarios.revalidation.workload import Workload, load_workloads
from vocabulary.revalidation import MUTATION_CLASSES

DEFAULT_MECHANISMS = ("NoCheck", "VersionAbort", "FullScan", "ATR")
REPETITIONS = {"quick": 20, "paper": 2000}


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

    def listing(self) -> list[tuple[str, str]]:
        return [(f"schedule {s.id}", " ".join(s.description.split()).split(". ")[0].rstrip(".")) for s in load_schedules()]

    def check(self, options: Options) -> None:
        load_workloads(tuple(options.scenario_dirs))
        for m in options.mechanisms_for("revalidation") or DEFAULT_MECHANISMS:
            resolve(m, "revalidation")

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        workloads = load_workloads(tuple(options.scenario_dirs))
        schedules = load_schedules()
        reps = options.extra.get("repetitions") or REPETITIONS[profile]
        if reps < 1:
            raise DriftlabError(f"--repetitions must be at least 1, got {reps}")
        return [Cell(self.name, (("workload", w), ("mutation_class", c), ("schedule", s.id), ("mechanism", m)), reps, seed)
                for w in workloads for c in MUTATION_CLASSES for s in schedules
                for m in options.mechanisms_for("revalidation") or DEFAULT_MECHANISMS]

    def run_cell(self, cell: Cell, options: Options) -> dict[str, list]:
        p = cell.p
        workload = load_workloads(tuple(options.scenario_dirs))[p["workload"]]
        schedule = {s.id: s for s in load_schedules()}[p["schedule"]]
        mechanism = resolve(p["mechanism"], "revalidation")()
        rows = []
        for rep in range(cell.repetitions):
            seed = derive_seed(cell.seed, p["workload"], p["mutation_class"], p["schedule"], rep)
            rows.append({"repetition": rep, "seed": seed,
                         **run_execution(workload, p["mutation_class"], schedule, mechanism, seed)})
        return {k: [r[k] for r in rows] for k in rows[0]}
