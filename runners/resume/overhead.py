"""``resume_overhead``: what the consume-once claim and the write-ahead ledger add to one resume.

Serves the paper's repair (arXiv 2608.03836: the gate "claims consumption in
the shared store ... before any node executes") at a measured cost: the
sequencer's resume against naive's, timed by pytest-benchmark
(``benchmarks/resume/bench_overhead.py``) in a child interpreter, both
runtimes interleaved per repetition in the same session, on SQLite.  The JSON
(raw samples, machine info) is kept in ``RUN/benchmarks/``; the records are
one row per benchmark (runtime, repetition, median and mean of its rounds).

A second cell (issue 14 §3) times LangGraph's stock saver, driftlab's guard
and REMIT (``remit-contract``, cross-process gate on) per step and per resume
in one session (``benchmarks/resume/bench_remit_overhead.py``), on SQLite and
PostgreSQL: rows ``langgraph`` / ``langgraph+guard`` / ``langgraph+remit``
with the operation and the saver's backend.
"""
from __future__ import annotations

from pathlib import Path

from runners.benchmark import run_benchmark
from runners.experiment import Cell, DriftlabError, Experiment, Options, artifact, derive_seed

BENCH = Path(__file__).resolve().parent.parent.parent / "benchmarks" / "resume" / "bench_overhead.py"
SAVERS_BENCH = BENCH.parent / "bench_remit_overhead.py"
ROUNDS = {"quick": 40, "paper": 500}
REPETITIONS = {"quick": 3, "paper": 15}  # paper: 15 paired repetitions, so a ratio has an interval (issue 28)
SAVER_ROUNDS = {"quick": 10, "paper": 100}
#: the savers' benchmark names -> the runtime rows they stand for
SAVER_ROWS = {"stock": "langgraph", "guard": "langgraph+guard", "remit": "langgraph+remit"}


class ResumeOverhead(Experiment):
    name = "resume_overhead"
    family = "resume"
    description = "one resume, sequencer (claim + write-ahead idempotent ledger) vs naive, SQLite, pytest-benchmark"
    parallel = False
    uses_mechanisms = False
    cell_timeout_s = 3600.0  # one cell holds the whole benchmark
    uses_user_scenarios = False
    seconds_per_execution = 0.001
    artifacts = (artifact("resume_overhead", findings=True),)

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        reps = options.extra.get("repetitions") or REPETITIONS[profile]
        if reps < 1:
            raise DriftlabError(f"--repetitions must be at least 1, got {reps}")
        return [Cell(self.name, (("backend", "sqlite"), ("rounds", ROUNDS[profile]), ("bench", "runtimes")), reps, seed),
                Cell(self.name, (("backend", "sqlite+postgres"), ("rounds", SAVER_ROUNDS[profile]), ("bench", "savers")),
                     reps, seed)]

    def run_cell(self, cell: Cell, options: Options) -> dict[str, list]:
        if cell.p["bench"] == "savers":
            return self.savers(cell, options)
        data, shown = run_benchmark("bench_resume_overhead", BENCH, ["-k", "test_resume"], options.run_dir,
                                    options.scratch, {"DRIFTLAB_RESUME_ROUNDS": str(cell.p["rounds"]),
                                                      "DRIFTLAB_RESUME_REPETITIONS": str(cell.repetitions)})
        rows = []
        for b in data["benchmarks"]:
            info = b.get("extra_info", {})
            rows.append({"repetition": int(info["repetition"]),
                         "seed": derive_seed(cell.seed, self.name, info["runtime"], info["repetition"]),
                         "runtime": info["runtime"], "median_us": b["stats"]["median"] * 1e6,
                         "mean_us": b["stats"]["mean"] * 1e6, "benchmark_json": shown,
                         "operation": "resume", "saver_backend": "sqlite"})
        return {k: [r[k] for r in rows] for k in rows[0]}

    def savers(self, cell: Cell, options: Options) -> dict[str, list]:
        data, shown = run_benchmark("bench_remit_overhead", SAVERS_BENCH, [], options.run_dir, options.scratch,
                                    {"DRIFTLAB_OVERHEAD_ROUNDS": str(cell.p["rounds"]),
                                     "DRIFTLAB_OVERHEAD_REPETITIONS": str(cell.repetitions)})
        rows = []
        for b in data["benchmarks"]:
            info = b.get("extra_info", {})
            runtime = SAVER_ROWS[info["saver"]]
            rows.append({"repetition": int(info["repetition"]),
                         "seed": derive_seed(cell.seed, self.name, runtime, info["backend"], info["operation"],
                                             info["repetition"]),
                         "runtime": runtime, "median_us": b["stats"]["median"] * 1e6,
                         "mean_us": b["stats"]["mean"] * 1e6, "benchmark_json": shown,
                         "operation": info["operation"], "saver_backend": info["backend"]})
        return {k: [r[k] for r in rows] for k in rows[0]}
