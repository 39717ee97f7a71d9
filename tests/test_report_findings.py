"""The report opens with the findings, and `driftlab summary` prints them: each line agrees with the tables.

A real quick run of ``resume_frameworks`` on two framework rows (one that breaks EO and CO, one that refuses a
second resumer), in their own environments with real SIGKILLs; the summary's lines are read back and checked
against ``tables/resume_frameworks_cells.csv`` and ``tables/resume_frameworks_losers.csv``.
"""
from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
import traceback
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.xdist_group("test_report_findings")  # one worker: the module-scoped run is made once

REPO = Path(__file__).resolve().parent.parent
ROWS = ("langgraph@1.2.24", "pydantic-graph@1.107")


def driftlab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runners.cli", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=600)


@pytest.mark.planted("runners.engine:all_artifacts",  # a new artifact registered, no question written for it
                     "return [a for n in names for a in artifacts_of(EXPERIMENTS[n])]",
                     "return [a for n in names for a in artifacts_of(EXPERIMENTS[n])] + [__import__('dataclasses')"
                     ".replace(a, name=a.name + '_new') for a in artifacts_of(next(iter(EXPERIMENTS.values())))][:1]")
def test_every_artifact_opens_with_a_question():
    """Bug class: a new artifact whose report section does not say which question it answers."""
    from analysis.questions import QUESTIONS
    from runners.engine import all_artifacts

    missing = [a.name for a in all_artifacts() if not QUESTIONS.get(a.name, "").endswith("?")]
    assert not missing, f"add a question to analysis/questions.py for: {', '.join(missing)}"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("findings") / "run"
    done = driftlab("reproduce", "--only", "resume_frameworks", "--profile", "quick", "--quiet",
                    "--mechanisms", ",".join(ROWS), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.planted("runners.summary:findings", "return text[start:end].rstrip()",
                     "return text[end:].rstrip()")  # the summary printing what follows the opening
def test_the_summary_is_the_reports_opening_and_agrees_with_the_tables(run):
    """Bug classes: a summary line that says safe where the cell table shows a violation (or the reverse); the
    loud-refusal answer not matching the losers' table; the report's findings placed after the sections; the
    summary printing something other than the report's opening.  Only the last is planted: the report is written by
    the run's own ``driftlab reproduce`` subprocess, which no plant reaches; the summary runs in this process."""
    from runners.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["summary", str(run)])
    summary = subprocess.CompletedProcess(["driftlab", "summary"], code, out.getvalue(), "")
    assert summary.returncode == 0, summary.stderr
    report = (run / "report.md").read_text()
    assert summary.stdout.strip() in report and report.index("## Findings") < report.index("## Frameworks")
    cells = pd.read_csv(run / "tables" / "resume_frameworks_cells.csv", keep_default_na=False)
    losers = pd.read_csv(run / "tables" / "resume_frameworks_losers.csv").set_index("runtime")
    lines = {m.group(1): m.group(2) for m in re.finditer(r"^- \*\*(\S+)\*\* (.*)$", summary.stdout, re.M)}
    assert set(lines) == set(ROWS)
    for rt, line in lines.items():
        t = cells[cells["runtime"] == rt]
        violated = sorted({p for v in t["violated"] for p in v.split(",") if p})
        assert ("**not safe**" in line) == bool(violated), (rt, line)
        for prop in violated:
            assert prop in line.split("Exactly once")[0]
        crash_broken = t[(t["group"] == "crash") & t["violated"].str.contains("EO|PC|liveness")]
        assert ("after a SIGKILL: no" in line) == (not crash_broken.empty), (rt, line)
        assert ("loudly: yes" in line) == bool(losers.loc[rt, "loud"]), (rt, line)
    # what each framework answers is its own (pydantic-graph's loser may fail on its lock file or be refused, by
    # timing): the test holds the summary to the tables, never to a framework's expected verdict


@pytest.mark.parametrize("make, problem", [
    pytest.param(lambda d: None, "no report here", marks=pytest.mark.planted(  # a traceback: the file read anyway
        "runners.summary:findings", "if not report.is_file():", "if False:")),
    pytest.param(lambda d: (d / "report.md").write_text("# driftlab report\n\n## Old section\n"),
                 "before reports opened", marks=pytest.mark.planted(  # an empty print, exit 0
                     "runners.summary:findings", "if start < 0 or end < start:", "if False:")),
], ids=["no-report", "old-report"])
def test_summary_of_a_folder_without_findings_is_one_line_exit_2(tmp_path, make, problem):
    """Bug class: a traceback (or an empty print with exit 0) for a folder that has no findings to show.  The CLI
    runs in this process (its output captured here), so a planted variant reaches it."""
    from runners.cli import main

    make(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["summary", str(tmp_path)])
        except Exception:  # noqa: BLE001 - a traceback is the bug: reported as such
            code, err = "traceback", io.StringIO(traceback.format_exc())
    assert code == 2 and problem in err.getvalue() and len(err.getvalue().strip().splitlines()) == 1, err.getvalue()
