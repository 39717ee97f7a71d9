"""`driftlab env add FRAMEWORK==RELEASE`, then one command judges it: on a copy of the clone, a release not shipped.

Real uv locking against the registry, a real environment build, a real quick run of ``resume_frameworks`` on the new
row (its SIGKILLs and racers in that environment).  Each test names the bug class it catches.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parent.parent
RELEASE = "1.2.15"  # a LangGraph release between the two shipped (1.2.9, 1.2.24)


def clone(tmp: Path) -> Path:
    """A copy of the working tree as a fresh clone holds it (no venv, runs, caches)."""
    dst = tmp / "clone"
    shutil.copytree(REPO, dst, ignore=shutil.ignore_patterns(".git", ".venv", "runs", "__pycache__", "mutants",
                                                              ".pytest_cache", ".hypothesis", "site", "*.egg-info"))
    return dst


def driftlab(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runners.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=900)


@pytest.mark.planted("runners.resume.env_add:rewrite",  # in the clone's CLI: it fails before the judged run
                     'if not re.match(r"^\\s*aliases\\s*=", ln)]', "]")
def test_env_add_then_one_command_judges_the_release(tmp_path):
    """`env add` writes the folder from the adapter's template, locks it with the lab's uv, checks the locked
    release, builds it, and prints the one command; that command judges the new row from its own histories.

    Bug classes: the pin left at the template's release (the row would be langgraph 1.2.24 under the name
    1.2.15); an alias copied over (two rows answering to langgraph@today; planted); a command printed that does not
    run."""
    here = clone(tmp_path)
    added = driftlab(here, "env", "add", f"langgraph=={RELEASE}")
    assert added.returncode == 0, added.stderr
    folder = here / "data" / "envs" / f"langgraph-{RELEASE}"
    spec = tomllib.loads((folder / "pyproject.toml").read_text())
    assert f"langgraph=={RELEASE}" in spec["project"]["dependencies"]
    row = spec["tool"]["driftlab"]["runtimes"][f"langgraph@{RELEASE}"]
    assert row["release"] == RELEASE and "aliases" not in row
    command = added.stdout.strip().splitlines()[-1].split()
    assert command[:3] == ["driftlab", "reproduce", "--only"]
    listed = driftlab(here, "env", "list")
    assert listed.returncode == 0 and f"| langgraph-{RELEASE} | langgraph | {RELEASE} |" in listed.stdout
    out = tmp_path / "run"
    judged = driftlab(here, *command[1:], "--profile", "quick", "--quiet", "--out", str(out))
    assert judged.returncode == 0, judged.stderr
    table = pd.read_csv(out / "tables" / "resume_frameworks.csv", dtype=str).set_index("runtime")
    assert list(table.index) == [f"langgraph@{RELEASE}"] and table.loc[f"langgraph@{RELEASE}", "release"] == RELEASE
    assert "EO" in pd.read_csv(out / "tables" / "resume_frameworks_cells.csv", keep_default_na=False)["violated"].str \
        .cat(sep=",")  # stock LangGraph re-runs a killed node, at this release too


@pytest.mark.parametrize("request_, problem", [
    ("langgraph", "write FRAMEWORK==RELEASE"),
    ("langgraph==latest", "write FRAMEWORK==RELEASE"),
    ("nosuchframework==1.0", "no adapter for framework 'nosuchframework'"),
    ("langgraph==1.2.24", "already exists"),
    pytest.param("langgraph==1.2.999", "lock failed", id="not-on-the-registry", marks=pytest.mark.planted(
        "runners.resume.env_add:add", "shutil.rmtree(folder, ignore_errors=True)", "pass")),  # in the clone's CLI
], ids=["no-release", "not-a-number", "no-adapter", "shipped", "not-on-the-registry"])
def test_env_add_bad_requests_are_one_line_and_leave_nothing(tmp_path, request_, problem):
    """Bug classes: a traceback for a malformed request; a half-written folder left behind after a failed lock
    (a later run would pick it up as a declared row; planted on the failed lock's row); an existing environment
    overwritten."""
    here = clone(tmp_path)
    before = sorted(p.name for p in (here / "data" / "envs").iterdir())
    got = driftlab(here, "env", "add", request_)
    assert got.returncode == 2 and problem in got.stderr, got.stderr
    assert len(got.stderr.strip().splitlines()) == 1 and "Traceback" not in got.stderr
    assert sorted(p.name for p in (here / "data" / "envs").iterdir()) == before
