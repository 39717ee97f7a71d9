"""``resume_profile``: the conformance profile, runtime x property with a witness cell.

Serves the paper's conformance profiles (arXiv 2608.03836).  Cells: every
fault cell on every runtime, plus one concurrent-resume race cell per
runtime (k = 4 resumers, no jitter, on ``options.backend``), so CO under
concurrent delivery is part of the profile.
"""
from __future__ import annotations

from runners.experiment import Cell, CellOutput, Options, artifact
from runners.resume.concurrency import race_cell
from runners.resume.faults import FaultCells

RACE_CELL, RACE_K = "concurrent_resume_k4", 4
REPETITIONS = {"quick": 1, "paper": 2}


class ResumeProfile(FaultCells):
    name = "resume_profile"
    description = "conformance profile: runtime x property (holds / violated), each violation with its witness cell"
    artifacts = (artifact("resume_profile"),)
    compare = True

    def compare_table(self, table):
        """`driftlab compare` prints the profile with the runtimes side by side: property x runtime, verdicts."""
        return self.side_by_side(table, "property", "runtime")

    def repetitions(self, profile: str, options: Options) -> int:
        return options.extra.get("repetitions") or REPETITIONS[profile]

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        reps = self.repetitions(profile, options)
        return super().cells(profile, seed, options) + [
            Cell(self.name, (("runtime", rt), ("fault_cell", RACE_CELL), ("backend", options.backend)), reps, seed)
            for rt in self.runtime_names(options)]

    def run_cell(self, cell: Cell, options: Options) -> CellOutput:
        p = cell.p
        if p["fault_cell"] != RACE_CELL:
            return super().run_cell(cell, options)
        return race_cell(self.name, p["runtime"], p["backend"], RACE_K, 0.0, cell.repetitions, cell.seed, options,
                         per_property=True, fault_cell=RACE_CELL)
