"""``resume_profile``: the conformance profile, runtime x property with a witness cell.

Serves the paper's conformance profiles (arXiv 2608.03836).  Cells: every
fault cell on every runtime, plus one concurrent-resume race cell per
runtime (k = 4 resumers, no jitter, on ``options.backend``), so CO under
concurrent delivery is part of the profile.

A fault cell the same run has already executed for ``resume_faults`` (the
same runtime, fault cell, backend, repetitions and seed: the same
definition) is not executed again: the profile takes that execution's
records and history (its history says so: ``meta["executed_by"]``), with the
profile's own seed column.  The profile and the fault matrix of one run then
judge the same executions, where two executions could disagree (LangGraph
stores a node's writes from another thread: what a kill leaves durable
varies, docs/trust.md), and the quick profile does the work once.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from runners.experiment import Cell, CellOutput, Options, artifact, derive_seed
from runners.resume.concurrency import race_cell
from runners.resume.faults import FaultCells
from vocabulary import History, history_from_jsonl

#: the experiment whose executions of the same fault cells the profile reuses
FAULTS = "resume_faults"

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
            return executed(cell, options.run_dir) or super().run_cell(cell, options)
        return race_cell(self.name, p["runtime"], p["backend"], RACE_K, 0.0, cell.repetitions, cell.seed, options,
                         per_property=True, fault_cell=RACE_CELL)


def executed(cell: Cell, run_dir: Path | None) -> CellOutput | None:
    """The records and history of ``cell`` as ``resume_faults`` executed it in this run (the cell of the same
    definition), relabelled as the profile's; None where it has not (then the profile executes it)."""
    from runners.execute import cell_path, history_path

    twin = Cell(FAULTS, cell.params, cell.repetitions, cell.seed)
    if run_dir is None or not cell_path(run_dir, twin).exists() or not history_path(run_dir, twin).exists():
        return None
    frame = pd.read_parquet(cell_path(run_dir, twin))
    rt, name = cell.p["runtime"], cell.p["fault_cell"]
    if list(dict.fromkeys(zip(frame["repetition"], frame["seed"]))) != [
            (rep, derive_seed(cell.seed, FAULTS, rt, name, rep)) for rep in range(cell.repetitions)]:
        return None  # another seed or repetition count: another definition (a file's name says neither)
    frame = frame.drop(columns=["experiment", "cell", *dict(cell.params)])
    frame["seed"] = [derive_seed(cell.seed, cell.experiment, rt, name, int(rep)) for rep in frame["repetition"]]
    path = history_path(run_dir, twin)
    theirs = history_from_jsonl(path.read_text(encoding="utf-8"), str(path))
    meta = {**theirs.meta, "experiment": cell.experiment, "executed_by": f"{FAULTS}/{twin.id}"}
    return CellOutput(frame.to_dict(orient="list"), History(theirs.family, theirs.operations, meta))
