"""Dependency omission: false-allow rate vs omission probability p, and conservative linking (ATR paper §5).

Paper: omitting the sole critical dependency produced false-allow rates close
to the omission probability (published values in data/reference/); "conservatively
linking all supplied inputs can avoid missing-edge false allows".

Grid: rate p × linking (exact, conservative) × mechanism (ATR; ``--mechanisms``
may add controls such as FullScan, which ignores the graph) × workload ×
schedule.  Every execution is a *blocking* case (the paper's "sole critical
dependency" is the edge to the premise that would block); the other four
classes have no critical edge, so including them would only dilute the rate
by a known factor.  The records still say, per execution, whether the change
touched a critical edge (``critical``) and whether that edge, once dropped,
is missing from the dependencies validation uses (``exposed``: linking does
not restore it), so the analysis measures the share of executions whose
critical edge matters instead of assuming it is 1.

An execution is the controlled one of ``revalidation_outcomes`` (MemoryStore,
the schedule's lifecycle point, :func:`runners.revalidation.agent.release` with its CAS
loop) with the fault between reading and recording: the variant is picked
and the omission drawn from the execution's seeded RNG, and the agent
records the dependencies the fault and the linking leave.  The seed depends
on the rate, workload, schedule and repetition but not on the linking or the
mechanism, so exact and conservative linking see the same variants and the
same omissions: the false allows conservative linking removes are counted
on identical executions.  Paper profile: 21 cells of 1,000 per rate per
linking (21,000 executions each); quick: 20 per cell.
"""
from __future__ import annotations

import math
import random

from faults.revalidation.omission import LINKINGS, DependencyOmission, drop, missing
from mechanisms import resolve
from runners.experiment import Cell, DriftlabError, Experiment, Options, Sweep, artifact, derive_seed, points
from runners.revalidation.agent import pick_changes, run_schedule
from scenarios.revalidation.schedules import Schedule, load_schedules
from scenarios.revalidation.workload import Workload, load_workloads

DEFAULT_RATES = (0.0, 0.01, 0.05, 0.10, 0.20)
DEFAULT_MECHANISMS = ("ATR",)
REPETITIONS = {"quick": 20, "paper": 1000}
MUTATION_CLASS = "blocking"


def run_execution(workload: Workload, schedule: Schedule, mechanism, fault: DependencyOmission, linking: str,
                  seed: int) -> dict:
    """One blocking execution under the omission fault; returns its record."""
    rng = random.Random(seed)
    variant, changes = pick_changes(workload, MUTATION_CLASS, schedule, rng)
    link = LINKINGS[linking]
    edges = fault.setup(workload, changes)
    try:
        recorded, omitted = fault.invoke(workload.dependencies, rng)
    finally:
        fault.teardown()
    deps = link(recorded, workload)
    exposed = bool(missing(link(drop(workload.dependencies, edges), workload), edges))
    r, _, _ = run_schedule(workload, changes, schedule, mechanism, dependencies=deps)
    oracle = workload.mutations[MUTATION_CLASS].oracle
    return {  # what happened, never a count: false allows are counted by analysis.revalidation.counting
        "variant": variant, "critical_edges": len(edges), "critical": bool(edges), "exposed": exposed,
        "omitted": omitted, "critical_token_bound": bool(edges) and all(ref in deps for ref, _ in edges),
        "links": sum(map(len, deps.values())), "oracle": oracle.name, "outcome": r.outcome.name,
        "released": r.released, "payload_stale": r.released and r.payload_stale,
        "premises_evaluated": r.premises_evaluated, "changes": sum(len(v) for v in changes),
        "validations": r.validations, "commit_attempts": r.commit_attempts,
        "validation_us": r.validation_ns / 1000.0,
    }


def rates(options: Options) -> tuple[float, ...]:
    points = tuple(float(r) for r in options.extra.get("rates") or DEFAULT_RATES)
    bad = [r for r in points if not (math.isfinite(r) and 0.0 <= r <= 1.0)]
    if bad:
        raise DriftlabError(f"omission rates are probabilities between 0 and 1, got {bad[0]}")
    return tuple(sorted(set(points)))


class RevalidationOmission(Experiment):
    name = "revalidation_omission"
    family = "revalidation"
    description = "dependency omission: false-allow rate vs omission probability, exact vs conservative linking"
    artifacts = (artifact("revalidation_omission"),)
    sweeps = {"omission": Sweep("rates", points(float, 0, 1, "omission rates are probabilities between 0 and 1"),
                                "omission probabilities, e.g. 0,0.01,0.05,0.1")}

    def check(self, options: Options) -> None:
        rates(options)
        load_workloads(tuple(options.scenario_dirs))
        for m in options.mechanisms_for("revalidation") or DEFAULT_MECHANISMS:
            resolve(m, "revalidation")

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        workloads = load_workloads(tuple(options.scenario_dirs))
        reps = options.extra.get("repetitions") or REPETITIONS[profile]
        if reps < 1:
            raise DriftlabError(f"--repetitions must be at least 1, got {reps}")
        return [Cell(self.name, (("rate", r), ("linking", k), ("mechanism", m), ("workload", w), ("schedule", s.id)),
                     reps, seed)
                for r in rates(options) for k in LINKINGS for m in options.mechanisms_for("revalidation") or DEFAULT_MECHANISMS
                for w in workloads for s in load_schedules()]

    def run_cell(self, cell: Cell, options: Options) -> dict[str, list]:
        p = cell.p
        workload = load_workloads(tuple(options.scenario_dirs))[p["workload"]]
        schedule = {s.id: s for s in load_schedules()}[p["schedule"]]
        mechanism = resolve(p["mechanism"])()
        fault = DependencyOmission(p["rate"])
        rows = []
        for rep in range(cell.repetitions):
            seed = derive_seed(cell.seed, "omission", p["rate"], p["workload"], p["schedule"], rep)
            rows.append({"repetition": rep, "seed": seed,
                         **run_execution(workload, schedule, mechanism, fault, p["linking"], seed)})
        return {k: [r[k] for r in rows] for k in rows[0]}
