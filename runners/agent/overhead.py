"""``agent_overhead``: what each stack of the guard's layers costs per checkpointed step and per resume.

Serves issue 15's overhead aim (the full stack at most 1.2x stock per step
and per resume, on SQLite and PostgreSQL).  One pytest-benchmark session
(``benchmarks/agent/bench_overhead.py``) in a child interpreter times the
refund agent's first step (``decide`` up to its park) and one resume to the
end, for every stack and backend, interleaved per repetition; the JSON (raw
samples, machine info) is kept in ``RUN/benchmarks/agent_overhead.json``.
Records: one row per benchmark (backend, kind, stack, repetition, median and
mean of its rounds).  PostgreSQL is skipped with a one-line note only if the
server does not answer.  The quick profile times stock, each layer alone and
all three; the paper profile every stack.
"""
from __future__ import annotations

import sys
from pathlib import Path

from analysis.artifact import Artifact
from runners import backends
from runners.benchmark import run_benchmark
from runners.experiment import Cell, DriftlabError, Experiment, Options, derive_seed, lazy
from vocabulary.agent import FAMILY, LAYERS, STACKS, STOCK

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "agent" / "bench_overhead.py"
ROUNDS = {"quick": 5, "paper": 30}
REPETITIONS = {"quick": 1, "paper": 15}  # paper: 15 paired repetitions, so a ratio has an interval (issue 28)
PROFILE_STACKS = {"quick": (STOCK, *LAYERS, "+".join(LAYERS)), "paper": STACKS}


class AgentOverhead(Experiment):
    name = "agent_overhead"
    family = FAMILY
    description = "cost per checkpointed step and per resume of each stack, as a ratio to stock (pytest-benchmark)"
    parallel = False
    uses_user_scenarios = False
    seconds_per_execution = 0.2
    artifacts = (Artifact("agent_overhead", table=lazy("analysis.agent.overhead:table"),
                          report=lazy("analysis.agent.overhead:report")),)

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        reps = options.extra.get("repetitions") or REPETITIONS[profile]
        if reps < 1:
            raise DriftlabError(f"--repetitions must be at least 1, got {reps}")
        chosen = ["sqlite", "postgres"]
        why = backends.check_postgres()
        if why:
            print(f"agent_overhead: PostgreSQL unreachable ({why}): postgres skipped", file=sys.stderr)
            chosen.remove("postgres")
        return [Cell(self.name, (("backends", ",".join(chosen)), ("stacks", ",".join(PROFILE_STACKS[profile])),
                                 ("rounds", ROUNDS[profile])), reps, seed)]

    def run_cell(self, cell: Cell, options: Options) -> dict[str, list]:
        p = cell.p
        data, shown = run_benchmark("agent_overhead", BENCH, ["-p", "no:randomly"], options.run_dir, options.scratch,
                                    {"DRIFTLAB_AGENT_ROUNDS": str(p["rounds"]),
                                     "DRIFTLAB_AGENT_REPETITIONS": str(cell.repetitions),
                                     "DRIFTLAB_AGENT_BACKENDS": p["backends"], "DRIFTLAB_AGENT_STACKS": p["stacks"]})
        rows = []
        for b in data["benchmarks"]:
            info = b.get("extra_info", {})
            rows.append({"backend": info["backend"], "kind": info["kind"], "stack": info["stack"],
                         "repetition": int(info["repetition"]),
                         "seed": derive_seed(cell.seed, self.name, info["backend"], info["kind"], info["stack"],
                                             info["repetition"]),
                         "median_us": b["stats"]["median"] * 1e6, "mean_us": b["stats"]["mean"] * 1e6,
                         "benchmark_json": shown})
        return {k: [r[k] for r in rows] for k in rows[0]}
