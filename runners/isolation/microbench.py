"""Resolution and merge-validation latency, measured with pytest-benchmark (semantic-isolation paper §5.3).

Runs ``benchmarks/isolation/bench_microbench.py`` in a subprocess (benchmarks want a
quiet machine: one cell, not parallel) with the profile's grid in
``ISOLATION_BENCH_POINTS``; the JSON pytest-benchmark writes (machine info,
every benchmark's statistics, and the p50/p95 over raw round samples the
benchmark computes) is kept in the run folder under ``benchmarks/`` and the
records are read from it.  pytest-benchmark's own storage lands in a
folder under the run's scratch.

Grid (quick keeps to a few seconds; paper is the full sweep):

- resolution (bound identity, and first binding with contract checks)
  against bound identities 8 ... 1,024;
- merge validation over deltas + the parent's fingerprint, and the plain
  union baseline, against identities x branches up to 1,024 x 64 (two new
  bindings per branch);
- at 128 x 16, against the delta size per branch (1 ... 64), so one run
  shows how merge cost grows with the delta and with the manifest.
"""
from __future__ import annotations

import json
from pathlib import Path

from runners.benchmark import run_benchmark
from runners.experiment import Cell, Experiment, Options, artifact, derive_seed

BENCH = Path(__file__).resolve().parent.parent.parent / "benchmarks" / "isolation" / "bench_microbench.py"
ROUNDS = {"quick": 150, "paper": 1000}


def grid(profile: str) -> list[list]:
    if profile == "quick":
        pts = [["resolve_bound", n, 1, 0] for n in (8, 128, 1024)] + [["resolve_new", 128, 1, 0]]
        pts += [[op, n, b, 2] for op in ("merge_validation", "merge_union") for n, b in ((8, 16), (128, 16), (1024, 16))]
        pts += [["merge_validation", 1024, 64, 2]]
        pts += [[op, 128, 16, d] for op in ("merge_validation", "merge_union") for d in (8, 32)]
        return pts
    sizes = (8, 16, 32, 64, 128, 256, 512, 1024)
    pts = [[op, n, 1, 0] for op in ("resolve_bound", "resolve_new") for n in sizes]
    pts += [[op, n, b, 2] for op in ("merge_validation", "merge_union") for n in (8, 32, 128, 512, 1024)
            for b in (2, 4, 16, 64)]
    pts += [[op, 128, 16, d] for op in ("merge_validation", "merge_union") for d in (1, 4, 8, 16, 32, 64)]
    return pts


def label(operation: str, delta: int) -> str:
    return f"{operation}/delta={delta}" if operation.startswith("merge") else operation


def records_from_json(data: dict, seed: int, json_name: str) -> dict[str, list]:
    rows = []
    for b in data["benchmarks"]:
        x = b["extra_info"]
        rows.append({"operation": label(x["operation"], int(x["delta"])), "kind": x["operation"],
                     "identities": int(x["identities"]), "branches": int(x["branches"]), "delta": int(x["delta"]),
                     "repetition": 0, "seed": derive_seed(seed, x["operation"], x["identities"], x["branches"], x["delta"]),
                     "p50_us": float(x["p50_us"]), "p95_us": float(x["p95_us"]), "mean_us": b["stats"]["mean"] * 1e6,
                     "samples": int(x["samples"]), "benchmark": b["name"], "benchmark_json": json_name})
    return {k: [r[k] for r in rows] for k in rows[0]}


class IsolationMicrobench(Experiment):
    name = "isolation_microbench"
    family = "isolation"
    description = "resolution and merge-validation latency (p50, p95) vs identities x branches, pytest-benchmark"
    artifacts = (artifact("isolation_microbench"),)
    parallel = False  # benchmarks want a quiet machine
    uses_mechanisms = False
    cell_timeout_s = 3600.0  # one cell holds the whole benchmark grid
    uses_user_scenarios = False

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        rounds = options.extra.get("rounds") or ROUNDS[profile]
        return [Cell(self.name, (("grid", profile), ("rounds", rounds)), 1, seed)]

    def run_cell(self, cell: Cell, options: Options) -> dict[str, list]:
        p = cell.p
        # only pytest-benchmark's plugin and no conftest: the benchmark imports what it times, nothing else
        data, name = run_benchmark("bench_isolation", BENCH, ["--noconftest", "--benchmark-disable-gc"],
                                   options.run_dir, options.scratch,
                                   {"ISOLATION_BENCH_POINTS": json.dumps(grid(p["grid"])),
                                    "ISOLATION_BENCH_ROUNDS": str(p["rounds"])})
        return records_from_json(data, cell.seed, name)
