"""``resume_frameworks``: every framework release in its own environment, under the same cells and checkers.

Serves issue 14 §4 ("Resume Means Resume", arXiv 2608.03836: the paper's
artifact profiled six frameworks at pinned releases by hand; here one command
answers it at any release).  Rows: the runtimes declared by
``data/envs/*/pyproject.toml`` (or those named with ``--mechanisms``; any
runtime of the family may be added, e.g. ``langgraph+guard``).  Cells per
runtime: every fault-matrix cell (``scenarios/resume/cell_*.toml``, real
SIGKILL, recovery in a new process) and the framework-only cells
(``scenarios/resume/frameworks/``: parallel siblings, the framework's own
replay fork, an undeclared key, a pydantic state's invalid value) on SQLite,
and the concurrency grid's
race cells (``scenarios/resume/concurrency.toml``, quick: its corner subset)
on every backend the framework declares, k racers forked from the env's warm
server.  The quick profile runs a slice (:data:`QUICK_CELLS`, k = 2
without jitter) that still judges every property.  Each env is built (or reused) in :meth:`check`, before any cell
runs: an env that cannot be built stops the run with one line, exit 2, and
the cells of earlier experiments stay in the run folder.
"""
from __future__ import annotations

from mechanisms.resume.frameworks import declared
from runners.experiment import Cell, CellOutput, Options, artifact
from runners.resume import common as rc
from runners.resume.concurrency import grid, race_cell
from runners.resume.faults import FaultCells

REPETITIONS = {"quick": 1, "paper": 2}
#: the quick profile's slice (CI): cells that between them judge every property (crashes before, inside and after
#: the gated node for PC/EO, second resumes for CO, forks for FD, invalid state for CV, two recoveries for RD), the
#: framework-only cells, and k = 2 racers without jitter (k = 4 gave the same verdicts in every row but one race of
#: Prefect's, a varying column, 2026-12-04); the paper profile runs every cell and the whole grid
QUICK_CELLS = ("baseline", "crash_start_after_effect_prepare", "crash_resume_after_effect_act",
               "crash_resume_during_checkpoint_write_act", "second_resume_head", "second_resume_by_id", "fork_twice",
               "invalid_state", "recover_twice")
QUICK_RACES = ((2,), (0.0,))
#: races per cell of the concurrency grid: each framework race forks k children that build the adapter and waits
#: on the framework's own polls (a DBOS race takes 0.3-1.5 s, against 30-50 ms for the lab's runtimes), so the paper
#: profile keeps the whole grid (40 cells, 20 per backend) with one race each instead of resume_concurrency's 20:
#: saturation is read over the grid's 40 races, not per cell
RACE_REPETITIONS = {"quick": 1, "paper": 1}


#: frameworks the quick profile leaves out, each with why (they run in the paper profile and whenever named): the
#: costliest rows per cell, measured 2026-12-04 at --jobs 1 (issue 28: the quick profile within 2 min)
QUICK_LEFT_OUT = {"prefect": "each cell calls a local Prefect API server (about 10 s of CPU to start, "
                             "3.5-4.5 s per cell after it): a third of this experiment's time in the quick profile"}


def framework_rows(options: Options, profile: str = "paper") -> list[str]:
    """The user's runtimes (``--mechanisms``), or every declared framework runtime (aliases left out); the quick
    profile runs each framework's default configuration only (its row without a ``variant``, or its first declared
    form; the documented safer settings and second forms run in the paper profile, or when named), and none of
    :data:`QUICK_LEFT_OUT`, to stay within the quick profile's time."""
    given = options.mechanisms_for("resume")
    if given:
        return rc.runtimes(options)
    rows = list(dict.fromkeys(d.name for d in declared().values()))
    if profile != "quick":
        return rows
    plain = {declared()[r].framework for r in rows if not declared()[r].variant}
    first = {}  # a framework declared only in variants (LlamaIndex's two forms) keeps its first
    for r in rows:
        first.setdefault(declared()[r].framework, r)
    return [r for r in rows if declared()[r].framework not in QUICK_LEFT_OUT
            and (not declared()[r].variant or (declared()[r].framework not in plain
                                               and first[declared()[r].framework] == r))]


def about(runtime: str) -> tuple[tuple[str, str], ...]:
    d = declared().get(runtime)
    if d is None:  # a lab runtime added with --mechanisms: a row of its own, never set beside an artifact's finding
        return (("framework", runtime), ("release", "installed"), ("variant", ""))
    return (("framework", d.framework), ("release", d.release), ("variant", d.variant))


class ResumeFrameworks(FaultCells):
    name = "resume_frameworks"
    description = ("framework@release x property (Hermitage-style): fault cells and k-racer cells, each framework "
                   "release in its own uv-locked environment")
    artifacts = (artifact("resume_frameworks"), artifact("resume_frameworks_cells", findings=True),
                 artifact("resume_frameworks_losers"))
    profile_repetitions = REPETITIONS

    def runtime_names(self, options: Options) -> list[str]:
        return framework_rows(options)

    def check(self, options: Options) -> None:
        from runners.resume import envs

        envs.check_declarations()
        super().check(options)
        for rt in self.runtime_names(options):
            if rt in declared():
                envs.ensure_row(declared()[rt])

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        reps = self.repetitions(profile, options)
        g = grid(options)
        ks, jitters = g.grid(profile) if profile != "quick" else QUICK_RACES
        lab = [c for c in rc.fault_cells(options) if profile != "quick" or c.name in QUICK_CELLS]
        out = []
        for rt in framework_rows(options, profile):
            meta = about(rt)
            out += [Cell(self.name, (("runtime", rt), *meta, ("fault_cell", c.name), ("backend", "sqlite"), ("k", 0),
                                     ("jitter_ms", 0.0)), reps, seed)
                    for c in (*lab, *rc.framework_cells(options))]
            # the two workers take neighbouring cells: a SQLite race beside a PostgreSQL one, so that a big race
            # that has the server to itself (one_big_race_at_a_time: DBOS's k >= 8) rarely makes the other wait
            backends = [b for b in g.backends if rt in rc.runtimes(Options(mechanisms=(rt,)), b)
                        and (b != "postgres" or not rc.postgres_reachable())]
            out += [Cell(self.name, (("runtime", rt), *meta, ("fault_cell", "concurrent_resume"), ("backend", b),
                                     ("k", k), ("jitter_ms", float(j))),
                         options.extra.get("repetitions") or RACE_REPETITIONS[profile], seed)
                    for k in ks for j in jitters for b in backends]  # backends alternate: see the note above
        return out

    def waits(self, cell: Cell, options: Options) -> bool:
        """A fault cell of a runtime whose env says its fault cells wait (``fault_cells_wait``: Temporal's server
        retries a SIGKILLed activity only after its timeout; each Prefect flow run ends by waiting for its heartbeat
        thread); never a race."""
        d = declared().get(cell.p["runtime"])
        return not cell.p["k"] and d is not None and bool(d.fault_cells_wait)

    def run_cell(self, cell: Cell, options: Options) -> CellOutput:
        p = cell.p
        if not p["k"]:
            records, history = rc.run_fault_cell(self.name, p["runtime"], p["fault_cell"], cell.repetitions,
                                                 cell.seed, options, p["backend"])
            return CellOutput(records, history)
        return race_cell(self.name, p["runtime"], p["backend"], int(p["k"]), float(p["jitter_ms"]), cell.repetitions,
                         cell.seed, options, per_property=True, fault_cell="concurrent_resume")
