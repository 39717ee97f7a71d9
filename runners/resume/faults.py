"""``resume_faults``: the fault matrix — every cell on every runtime, real SIGKILL, recovery in a fresh process.

Serves the paper's fault matrix (arXiv 2608.03836).  Cells: runtime x fault
cell (``scenarios/resume/cell_*.toml``) on ``options.backend``; each
repetition gets fresh stores, plays the cell's steps for each replica in
child processes (runners/resume/cells.py) and judges the history with the
six property checkers plus liveness.
"""
from __future__ import annotations

from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, artifact
from runners.resume import common as rc

REPETITIONS = {"quick": 1, "paper": 3}


class FaultCells(Experiment):
    """Shared by the fault matrix, the independence matrix and the profile: runtime x fault cell."""

    family = "resume"
    seconds_per_execution = 0.3
    uses_backend = True
    profile_repetitions = REPETITIONS  # per profile; ``--repetitions`` overrides

    def seconds(self, cell: Cell, options: Options) -> float:
        """Process start-up per call, plus the graph's declared work (``work_ms``) for every run a replica plays."""
        scen = rc.resume_scenarios(options)
        fault = scen.get(cell.p["fault_cell"])
        if getattr(fault, "kind", None) != "cell":  # the profile's race row: a concurrency cell
            return super().seconds(cell, options)
        graph = rc.cell_graph(fault, rc.by_kind(scen, "graph"))
        work_s = sum(n.work_ms for n in graph.nodes) / 1000
        calls = len(fault.steps) * fault.replicas
        return cell.repetitions * (self.seconds_per_execution + calls * work_s)

    def runtime_names(self, options: Options) -> list[str]:
        return rc.runtimes(options, options.backend)

    def check(self, options: Options) -> None:
        if options.backend == "postgres" and rc.postgres_reachable():
            raise DriftlabError(f"--backend postgres: PostgreSQL is not reachable ({rc.postgres_reachable()})")
        rc.fault_cells(options)
        rc.check_backends(options, (options.backend,))
        self.runtime_names(options)

    def repetitions(self, profile: str, options: Options) -> int:
        reps = options.extra.get("repetitions") or self.profile_repetitions[profile]
        if reps < 1:
            raise DriftlabError(f"--repetitions must be at least 1, got {reps}")
        return reps

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        reps = self.repetitions(profile, options)
        if options.backend == "postgres" and not rc.postgres_reachable():
            rc.drop_orphan_schemas()
        return [Cell(self.name, (("runtime", rt), ("fault_cell", c.name), ("backend", options.backend)), reps, seed)
                for rt in self.runtime_names(options) for c in rc.fault_cells(options)]

    def affinity(self, cell: Cell, options: Options) -> str | None:
        """A framework row's cells keep its env server warm in the worker that started it (``runners/resume/envs.py``:
        one per adapter and worker process, seconds to start): one worker takes them where it can."""
        from mechanisms.resume.frameworks import declared

        return cell.p["runtime"] if cell.p["runtime"] in declared() else None

    def run_cell(self, cell: Cell, options: Options) -> CellOutput:
        p = cell.p
        records, history = rc.run_fault_cell(self.name, p["runtime"], p["fault_cell"], cell.repetitions, cell.seed,
                                             options, p["backend"])
        return CellOutput(records, history)


class ResumeFaults(FaultCells):
    name = "resume_faults"
    description = "fault matrix: crash points x operations, second resumes, forks, invalid state; real SIGKILL"
    artifacts = (artifact("resume_faults"),)
