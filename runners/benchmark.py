"""Benchmark plumbing: run a pytest-benchmark file in a fresh interpreter, keep its JSON in the run folder.

The latency experiments (``revalidation_scaling``, ``isolation_microbench``)
time their code with pytest-benchmark in a child process, so that nothing
else of the lab's runner shares the interpreter while it measures.  The
child starts with ``python -P`` and the parent's ``sys.path``
(:func:`runners.processes.child_env`), never the working folder first; every
file it leaves (pytest-benchmark's storage, temporary files) stays under the
run's ``scratch/``.  The JSON lands atomically at
``RUN/benchmarks/<name>.json``; the experiment turns it into records.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

from runners.processes import PYTHON, child_env


def run_benchmark(name: str, bench_file: Path, args: Sequence[str], run_dir: Path | None, scratch: Path | None,
                  env: Mapping[str, str] | None = None) -> tuple[dict[str, Any], str]:
    """Run ``bench_file`` with pytest-benchmark; returns (its JSON, the JSON's path relative to the run folder)."""
    out_dir = Path(run_dir or ".") / "benchmarks"
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"{name}.json"
    for stale in out_dir.glob(f".{name}.*.json.tmp"):  # left by a run killed mid-benchmark
        stale.unlink(missing_ok=True)
    tmp = (out_dir / f".{name}.{os.getpid()}.json.tmp").resolve()
    with tempfile.TemporaryDirectory(prefix=f"{name}_", dir=scratch) as work:
        # a benchmark is timed alone, with pytest-benchmark's plugin only: no xdist (which disables
        # pytest-benchmark), no test time limit, and none of the plugins other packages install (hypothesis's and
        # langsmith's took 1.1 s of each child's start-up)
        command = [*PYTHON, "-m", "pytest", str(bench_file), "-q", "-p", "pytest_benchmark.plugin",
                   "-p", "no:cacheprovider", "--override-ini=addopts=", f"--benchmark-json={tmp}",
                   f"--benchmark-storage=file://{work}/.benchmarks", *args]
        full_env = {k: v for k, v in child_env(**{"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **dict(env or {})}).items()
                    if not k.startswith("PYTEST_XDIST")}  # set in an xdist worker: pytest-benchmark would stand down
        full_env.update(TMPDIR=work, TEMP=work, TMP=work)
        done = subprocess.run(command, cwd=work, env=full_env, capture_output=True, text=True)
    if done.returncode != 0 or not tmp.exists():
        lines = (done.stdout + done.stderr).strip().splitlines()
        tmp.unlink(missing_ok=True)
        # the first line says why (pytest's first ``E`` line: what the benchmarked code raised); then the command
        cause = next((line[1:].strip() for line in lines if line.startswith("E ") and line[1:].strip()), "")
        raise RuntimeError(f"benchmark {name} failed (exit {done.returncode})" + (f": {cause}" if cause else "")
                           + f"\n{' '.join(command)}\n" + "\n".join(lines[-15:]))
    os.replace(tmp, json_path)
    shown = str(json_path.relative_to(run_dir)) if run_dir else str(json_path)
    return json.loads(json_path.read_text(encoding="utf-8")), shown
