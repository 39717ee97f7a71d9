"""provenance.json: what ran, on which code and machine, with which seeds, for how long."""
from __future__ import annotations

import json
import platform
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("driftlab", "numpy", "pandas", "pyarrow", "matplotlib", "multiprocess", "psutil", "pytest-benchmark",
            "scipy", "tqdm", "psycopg", "dask", "distributed", "qdrant-client", "langgraph", "langgraph-checkpoint",
            "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres", "langgraph-checkpoint-conformance",
            "langchain-core", "psycopg-pool", "aiosqlite", "pydantic")


def git_state() -> dict:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10).stdout.strip()
    try:
        return {"revision": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return {"revision": None, "dirty": None}


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def machine() -> dict:
    freq = psutil.cpu_freq()
    return {
        "platform": platform.platform(), "processor": platform.machine(),
        "cpus_logical": psutil.cpu_count(), "cpus_physical": psutil.cpu_count(logical=False),
        "cpu_mhz_max": freq.max if freq else None, "memory_bytes": psutil.virtual_memory().total,
    }


def framework_environments() -> dict:
    """Every framework environment built from its current lock: its cache folder and the exact installed versions."""
    from runners.resume.envs import built

    return built()


def write_provenance(run_dir: Path, *, profile: str, seed: int, jobs: int, experiments: dict[str, dict],
                     resumed: bool, executor: str = "local") -> None:
    data = {
        "command": shlex.join(["driftlab", *sys.argv[1:]]),
        "profile": profile, "seed": seed, "jobs": jobs, "executor": executor, "resumed": resumed,
        "git": git_state(), "versions": versions(), "machine": machine(),
        "framework_environments": framework_environments(),
        "experiments": experiments,
        "wall_seconds": {name: e["wall_seconds"] for name, e in experiments.items()},
        "written_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    tmp = run_dir / "provenance.json.tmp"
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
    tmp.replace(run_dir / "provenance.json")
