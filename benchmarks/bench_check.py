"""pytest-benchmark: ``driftlab check`` on a generated race history of a million operations (issue 16 §2).

The history is the shape the ``revalidation_races`` experiment writes for a
race pair (setup, two workers that begin, read the target and the policy,
validate and commit together, the auditor's read and the audit: 13
operations), repeated with a new ``value.group`` and new times until it has
``DRIFTLAB_CHECK_OPERATIONS`` operations (default 1,000,000); one pair in
a thousand commits twice, so the checkers have witnesses to find.  Each
round runs ``driftlab check`` as its own process (``--jobs``
``DRIFTLAB_CHECK_JOBS``; unset, check's default: a process per core), times it, takes the main process's
peak RSS and CPU seconds from ``wait4``, and samples the proportional set
size of its whole process tree (workers included) every 20 ms: both peaks
go to ``extra_info`` beside the verdict's exit code.  (``wait4``'s CPU
seconds include the workers, which the main process waits for.)

The **floor** is timed in the same rounds, interleaved with the check: one
process that only reads the file and parses every line with orjson (what any
checker must at least do).  ``extra_info`` holds both and their ratio (issue
28's aim: check at most 1.5x the floor), and ``main`` prints them.

Run it into a run folder (the JSON lands at ``RUN/benchmarks/check.json``,
as the other benchmarks' do)::

    ./dev python -m benchmarks.bench_check --out RUN [--operations N] [--jobs J] [--rounds R]

or alone: ``./dev pytest benchmarks/bench_check.py``.
"""
from __future__ import annotations

import os
import random
import subprocess
import threading
import time
from pathlib import Path

import orjson
import psutil
import pytest

from runners.processes import PYTHON, child_env

OPERATIONS = int(os.environ.get("DRIFTLAB_CHECK_OPERATIONS", "1000000"))
JOBS = int(os.environ.get("DRIFTLAB_CHECK_JOBS", "0"))  # 0: check's own default (one process per core)
ROUNDS = int(os.environ.get("DRIFTLAB_CHECK_ROUNDS", "3"))
SAMPLE_S = 0.02  # the PSS sampler's period (seconds)
DOUBLE_EVERY = 1000  # one pair in this many commits twice (an invalid pair with a witness)


def race_pair(group: int, t: float, double: bool) -> list[dict]:
    """One race pair's 13 operations, as runners/revalidation/races.py records them (indices filled in later)."""
    common = {"group": group, "script": "race_pair", "variant": "target_cas"}
    state = {"amount": 80, "refunds": 0, "refund_limit": 100, "refunds_enabled": 1, "policy_version": 0, "version": 0}
    target, policy = {"amount": 80, "refunds": 0, "version": 0}, {"refund_limit": 100, "refunds_enabled": 1, "version": 0}
    steps = [("setup", "setup", "ok", {"state": state}), ("worker_a", "begin", "ok", {"result": "ok"}),
             ("worker_b", "begin", "ok", {"result": "ok"}), ("worker_a", "read_target", "ok", {"result": target}),
             ("worker_b", "read_target", "ok", {"result": target}), ("worker_a", "read_policy", "ok", {"result": policy}),
             ("worker_b", "read_policy", "ok", {"result": policy}), ("worker_a", "validate", "ok", {"result": True}),
             ("worker_b", "validate", "ok", {"result": True})]
    commit = {"binding": "target_cas", "in_transaction": True, "intent": f"refund:{group}", "target_token": 0}
    steps += [("worker_a", "commit", "ok", {**commit, "result": "committed"}),
              ("worker_b", "commit", "ok" if double else "fail",
               {**commit, "result": "committed"} if double else {**commit, "result": "rejected", "refused_by": "target_cas"}),
              ("auditor", "read_target", "ok", {"result": {**target, "refunds": 2 if double else 1, "version": 1}}),
              ("audit", "audit", "ok", {"state": {**state, "refunds": 2 if double else 1, "version": 1}})]
    return [{"actor": actor, "op": op, "status": status, "start": t + i * 0.001, "end": t + i * 0.001 + 0.0005,
             "value": {**common, **value}} for i, (actor, op, status, value) in enumerate(steps)]


def write_history(path: Path, operations: int, seed: int = 20260901) -> Path:
    rng = random.Random(seed)
    head = {"history": 1, "family": "revalidation", "meta": {"experiment": "bench_check", "seed": seed}}
    with path.open("wb") as f:
        f.write(orjson.dumps(head) + b"\n")
        index, group, t = 0, 0, 0.0
        while index < operations:
            for op in race_pair(group, t, rng.randrange(DOUBLE_EVERY) == 0)[:operations - index]:
                f.write(orjson.dumps({"index": index, **op}) + b"\n")
                index += 1
            group, t = group + 1, t + 0.02
    return path


def tree_pss(pid: int) -> int:
    """The proportional set size of ``pid`` and its descendants, in bytes, read straight from /proc: the children
    from ``/proc/PID/task/PID/children``, each PSS from ``smaps_rollup`` (about 1 ms for three processes).  psutil's
    ``children(recursive=True)`` reads every process's ``stat``: 3.6 ms a sample, and on a 2-core machine the
    sampled check's wall was 0.3-0.45 s over an unsampled one's (these reads: 0.07-0.3 s; 2026-12-04, interleaved,
    4 rounds).  Without those files (another kernel): psutil."""
    pids = [pid]
    try:
        for p in pids:
            try:
                with open(f"/proc/{p}/task/{p}/children", "rb") as f:
                    pids += map(int, f.read().split())
            except (FileNotFoundError, ProcessLookupError):
                if p == pid:
                    raise
        total = 0
        for p in pids:
            try:
                with open(f"/proc/{p}/smaps_rollup", "rb") as f:
                    total += next(int(line.split()[1]) for line in f if line.startswith(b"Pss:")) * 1024
            except (FileNotFoundError, ProcessLookupError, StopIteration):
                if p == pid:
                    raise
        return total
    except (FileNotFoundError, StopIteration):
        if not os.path.exists(f"/proc/{pid}"):
            raise ProcessLookupError(pid) from None
        me = psutil.Process(pid)
        return sum(q.memory_full_info().pss for q in [me, *me.children(recursive=True)])


def run_check(path: Path, jobs: int) -> dict:
    """One ``driftlab check`` process: exit code, wall and CPU seconds, its peak RSS, and the peak proportional set
    size (PSS) of its whole process tree, sampled (PSS, because forked workers share their parent's pages)."""
    command = [*PYTHON, "-m", "runners.cli", "check", str(path), *(["--jobs", str(jobs)] if jobs else [])]
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            try:
                peak[0] = max(peak[0], tree_pss(proc.pid))
            except (psutil.NoSuchProcess, ProcessLookupError):
                break
            done.wait(SAMPLE_S)

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)  # the main process's own usage (ru_maxrss: its peak RSS)
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"exit_code": proc.returncode, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mb": usage.ru_maxrss / 1024, "peak_tree_pss_mb": peak[0] / 2**20}


FLOOR = "import sys, orjson\nwith open(sys.argv[1], 'rb') as f:\n    for line in f:\n        orjson.loads(line)\n"


def run_floor(path: Path) -> float:
    """Wall seconds of one process that reads ``path`` and parses each line with orjson, nothing else."""
    t0 = time.perf_counter()
    subprocess.run([*PYTHON, "-c", FLOOR, str(path)], env=child_env(), check=True)
    return time.perf_counter() - t0


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    return write_history(tmp_path_factory.mktemp("check") / "race.jsonl", OPERATIONS)


def test_check_a_generated_race_history(benchmark, history):
    runs: list[dict] = []
    floors: list[float] = []

    def one_round() -> None:
        floors.append(run_floor(history))  # interleaved: the floor and the check see the same machine
        runs.append(run_check(history, JOBS))

    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    assert all(r["exit_code"] == 1 for r in runs), runs  # the planted double commits: invalid, never a crash
    benchmark.extra_info.update(operations=OPERATIONS, jobs=JOBS or os.cpu_count(), file_mb=history.stat().st_size / 2**20,
                                exit_code=runs[0]["exit_code"], cpu_s=[r["cpu_s"] for r in runs],
                                peak_rss_mb=max(r["peak_rss_mb"] for r in runs),
                                peak_tree_pss_mb=max(r["peak_tree_pss_mb"] for r in runs), machine_cores=os.cpu_count(),
                                load_average=os.getloadavg(), check_s=[r["wall_s"] for r in runs], floor_s=floors,
                                check_over_floor=min(r["wall_s"] for r in runs) / min(floors))


def main() -> None:
    import argparse
    import json

    from runners.benchmark import run_benchmark

    p = argparse.ArgumentParser(description="benchmark `driftlab check` into RUN/benchmarks/check.json")
    p.add_argument("--out", required=True, help="the run folder")
    p.add_argument("--operations", type=int, default=OPERATIONS)
    p.add_argument("--jobs", type=int, default=JOBS)
    p.add_argument("--rounds", type=int, default=ROUNDS)
    args = p.parse_args()
    out = Path(args.out)
    (out / "scratch").mkdir(parents=True, exist_ok=True)
    data, shown = run_benchmark("check", Path(__file__), [], out, out / "scratch",
                                env={"DRIFTLAB_CHECK_OPERATIONS": str(args.operations), "DRIFTLAB_CHECK_JOBS": str(args.jobs),
                                     "DRIFTLAB_CHECK_ROUNDS": str(args.rounds)})
    bench = data["benchmarks"][0]
    print(json.dumps({"json": shown, "mean_s": bench["stats"]["mean"], "min_s": bench["stats"]["min"],
                      **bench["extra_info"]}, indent=2))


if __name__ == "__main__":
    main()
