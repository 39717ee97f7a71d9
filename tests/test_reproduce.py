"""End to end: the quick profile, determinism, SIGKILL and resume, analyze, compare, plug-ins."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from analysis.records import load_records
from vocabulary import TIMING_COLUMNS

REPO = Path(__file__).resolve().parent.parent


def driftlab(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runners.cli", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, env=env, timeout=600)


def untimed(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=[c for c in frame.columns if c in TIMING_COLUMNS])


FIXTURE = REPO / "tests" / "data" / "baseline_quick"
#: Columns that depend on timing (latencies, their ratios, lock retries and time overlap of racing workers).
TIMED = ("_us", "ratio_to_floor", "lock_retries", "overlapping_pairs")


def test_quick_profile_end_to_end(tmp_path):
    """The revalidation family's quick tables equal the committed fixture, timings aside.

    The fixture was regenerated after the trust changes (two-severity variants, per-workload rows, counting
    from what was released); before that, the pre-reshape tables matched this run on every count column.
    Any drift in an engine, loader, mechanism or counting rule that moves a count shows here; the counting
    rule's own bugs are planted where they cost a second, not three quick runs (tests/unit/test_unit_counting.py)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = driftlab("reproduce", "--profile", "quick", "--only", "revalidation", "--quiet", cwd=elsewhere,
                      env={**os.environ, "DRIFTLAB_RUNS": str(tmp_path / "data" / "runs")})  # the default run folder
    assert result.returncode == 0, result.stderr
    assert not any(elsewhere.iterdir()), "a default run writes nothing into the current folder"
    out = tmp_path / "data" / "runs" / "latest"
    assert out.is_symlink() and out.resolve().parent == (tmp_path / "data" / "runs").resolve()
    for name in ("report.md", "provenance.json", "run.json", "tables/revalidation_outcomes.csv",
                 "tables/revalidation_outcomes.md", "figures/revalidation_outcomes.png", "figures/revalidation_outcomes.svg"):
        assert (out / name).exists(), name
    for fixture in sorted(FIXTURE.glob("*.csv")):
        ours, theirs = pd.read_csv(out / "tables" / fixture.name), pd.read_csv(fixture)
        keep = [c for c in theirs.columns if not any(t in c for t in TIMED)]
        pd.testing.assert_frame_equal(ours[keep], theirs[keep], check_exact=False, rtol=1e-9, obj=fixture.name)
    table = pd.read_csv(out / "tables" / "revalidation_outcomes.csv")
    total = table[(table.mutation_class == "all") & (table.workload == "all")].set_index("mechanism")
    n = total.loc["ATR", "executions"]
    assert n == 3 * 5 * 7 * 20
    assert (total.loc["ATR", ["false_allows", "false_blocks"]] == 0).all() and total.loc["ATR", "oracle_agreement"] == 1
    assert total.loc["FullScan", "oracle_agreement"] == 1
    assert total.loc["FullScan", "premises_per_change"] > total.loc["ATR", "premises_per_change"]
    # NoCheck releases every REFRESH/REPLAN/BLOCK execution (9 of 15 cases) as an invalid effect.
    assert total.loc["NoCheck", "invalid_effects"] == n * 9 // 15
    # VersionAbort replans every safe (KEEP-oracle) change: 6 of 15 cases.
    assert total.loc["VersionAbort", "unnecessary_replans"] == n * 6 // 15
    report = (out / "report.md").read_text()
    assert "| ATR: false allows | 0 of" in report and "210,000" in report
    # The report's counts come from the records: rebuilding from records alone gives the same file.
    (out / "report.md").unlink()
    assert driftlab("analyze", str(out)).returncode == 0
    assert (out / "report.md").read_text() == report


#: The kill tests' run: one workload's 140 cells (4 mechanisms x 5 mutation classes x 7 schedules) at 10 repetitions.
#: A kill lands after 30 cells are on disk, with 110 still to run; cells take milliseconds each, so 30 <= finished < 140.
SMALL_RUN = ("--only", "revalidation_outcomes", "--workloads", "refund", "--repetitions", "10", "--jobs", "2")
SMALL_CELLS, SMALL_REPS = 4 * 5 * 7, 10


def test_sigkill_then_rerun_gives_the_uninterrupted_tables(tmp_path):
    """A run SIGKILLed mid-run, then run again, equals record for record an uninterrupted run of the same seed: the
    cells each process computed agree with another process's (same seed, same records); another seed gives every
    execution of a slice of the grid another seed."""
    args = ["reproduce", *SMALL_RUN, "--seed", "11", "--quiet"]
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "runners.cli", *args, "--out", str(killed)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    records = killed / "records" / "revalidation_outcomes"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(records.glob("*.parquet"))) < 30:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # the runner and its worker processes, mid-run
    proc.wait()
    finished = len(list(records.glob("*.parquet")))
    assert 30 <= finished < SMALL_CELLS, "the kill must land mid-run"
    assert not (killed / "report.md").exists()

    resumed = driftlab(*args, "--out", str(killed))
    assert resumed.returncode == 0, resumed.stderr
    whole = driftlab(*args, "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr

    got = load_records(killed, "revalidation_outcomes")
    assert len(got) == SMALL_CELLS * SMALL_REPS and not got.duplicated(["cell", "repetition"]).any()
    assert not list(records.glob(".*"))
    pd.testing.assert_frame_equal(untimed(got), untimed(load_records(tmp_path / "whole", "revalidation_outcomes")))
    for table in ("revalidation_outcomes.csv",):
        assert (killed / "tables" / table).read_text() == (tmp_path / "whole" / "tables" / table).read_text()
    # another seed, on a slice of the same grid (a run's cost is its cells: one parquet file each)
    other = driftlab("reproduce", *SMALL_RUN, "--seed", "12", "--mechanisms", "ATR", "--out", str(tmp_path / "other"),
                     "--quiet")
    assert other.returncode == 0, other.stderr
    both = untimed(load_records(tmp_path / "other", "revalidation_outcomes")).merge(
        untimed(got), on=["cell", "repetition"], suffixes=("", "_seed11"))
    assert len(both) == 5 * 7 * SMALL_REPS and (both["seed"] != both["seed_seed11"]).all()


def test_ctrl_c_keeps_finished_cells_and_says_how_to_go_on(tmp_path):
    args = ["reproduce", *SMALL_RUN, "--quiet", "--out", str(tmp_path / "run")]
    proc = subprocess.Popen([sys.executable, "-m", "runners.cli", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    records = tmp_path / "run" / "records" / "revalidation_outcomes"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(records.glob("*.parquet"))) < 30:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends to the terminal's process group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "run the same command" in err, err
    kept = len(list(records.glob("*.parquet")))
    assert 30 <= kept < SMALL_CELLS
    again = driftlab(*args)
    assert again.returncode == 0, again.stderr
    got = load_records(tmp_path / "run", "revalidation_outcomes")
    assert len(got) == SMALL_CELLS * SMALL_REPS and not got.duplicated(["cell", "repetition"]).any()


@pytest.mark.planted("runners.engine:run", "if todo or name not in earlier", "if True")
def test_a_finished_run_is_not_run_again_and_a_different_run_is_refused(tmp_path):
    """A rerun of a finished run writes no record, clears a killed run's scratch and refuses another seed.

    Bug class: a rerun that finds every cell done overwrites the experiment's measured wall time with its own
    (about 0 s), so the report of a finished run says it took no time."""
    out = tmp_path / "run"
    # one workload's 140 cells at one repetition (the planted-claims hook runs this test three times): the first
    # run's wall time is still well above the 0.1 s asked below, and a planted rerun's (no cell to run) about 0 s
    small = ("--only", "revalidation_outcomes", "--workloads", "refund", "--repetitions", "1")
    args = ("reproduce", *small, "--out", str(out), "--quiet")
    assert driftlab(*args).returncode == 0
    before = {p: p.stat().st_mtime_ns for p in (out / "records").rglob("*.parquet")}
    wall = json.loads((out / "provenance.json").read_text())["wall_seconds"]["revalidation_outcomes"]
    left_by_a_killed_run = out / "scratch" / "driftlab-durable-x" / "business-0.db"
    left_by_a_killed_run.parent.mkdir(parents=True)
    left_by_a_killed_run.write_bytes(b"")
    assert driftlab(*args).returncode == 0
    assert not (out / "scratch").exists()
    assert before == {p: p.stat().st_mtime_ns for p in (out / "records").rglob("*.parquet")}
    assert json.loads((out / "provenance.json").read_text())["wall_seconds"]["revalidation_outcomes"] == wall > 0.1
    refused = driftlab("reproduce", *small, "--seed", "99", "--out", str(out))
    assert refused.returncode == 2 and "seed" in refused.stderr and refused.stderr.count("\n") == 1


def test_compare_and_a_users_own_mechanism(tmp_path):
    (tmp_path / "my_mechanisms.py").write_text(
        "from vocabulary.revalidation import Outcome, Validation\n"
        "class AlwaysReplan:\n"
        "    name = 'AlwaysReplan'\n"
        "    def validate(self, txn, store):\n"
        "        return Validation(Outcome.REPLAN)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = driftlab("compare", "--mechanisms", "ATR,my_mechanisms:AlwaysReplan", "--repetitions", "2",
                      "--out", str(tmp_path / "cmp"), "--quiet", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "| my_mechanisms:AlwaysReplan |" in result.stdout and "| ATR |" in result.stdout
    table = pd.read_csv(tmp_path / "cmp" / "tables" / "revalidation_outcomes.csv")
    mine = table[(table.mechanism == "my_mechanisms:AlwaysReplan") & (table.mutation_class == "all") & (table.workload == "all")].iloc[0]
    assert mine.false_allows == 0 and mine.unnecessary_replans == 3 * 2 * 7 * 2


def test_list_names_everything():
    out = driftlab("list").stdout
    for name in ("revalidation_outcomes", "refund", "cloud_remediation", "procurement", "s5_check_to_commit", "ATR", "NoCheck"):
        assert name in out


@pytest.mark.planted("runners.engine:default_runs", 'return clone / "data" / "runs"', 'return Path("data") / "runs"')
def test_default_run_folder_is_the_clones_whatever_the_current_folder(monkeypatch, tmp_path):
    """Planted bug it catches: a default run that writes ``./data/runs`` into whatever folder the user is in."""
    from runners.engine import default_runs

    monkeypatch.delenv("DRIFTLAB_RUNS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert default_runs() == REPO / "data" / "runs"
    monkeypatch.setenv("DRIFTLAB_RUNS", str(tmp_path / "mine"))
    assert default_runs() == tmp_path / "mine"


@pytest.mark.planted("runners.engine:scenario_hashes", "return {key(p): hashlib", "return {str(p.resolve()): hashlib")
def test_run_identity_does_not_depend_on_where_the_clone_lives():
    """Planted bug it catches: absolute scenario paths in run.json, so a moved clone makes a rerun a changed run."""
    from runners.engine import Request, identity
    from runners.experiment import Options

    manifest = identity(Request(("revalidation_outcomes",), options=Options()))
    assert manifest["scenario_files"] and not any(Path(k).is_absolute() for k in manifest["scenario_files"])
    assert "revalidation/workloads/refund.toml" in manifest["scenario_files"]


@pytest.mark.planted("runners.engine:all_artifacts", "EXPERIMENTS if run_dir is None else experiments_in(run_dir)",
                     "EXPERIMENTS")
def test_analysing_one_familys_run_imports_no_other_family(tmp_path):
    """Bug class: every `reproduce` and `analyze` imports every experiment, so a revalidation run pays for the
    resume family's imports (LangGraph, the guard): about a second of each command, for nothing."""
    (tmp_path / "records" / "revalidation_outcomes").mkdir(parents=True)
    code = ("import sys; from pathlib import Path; from runners.engine import all_artifacts; "
            f"names = {{a.experiment for a in all_artifacts(Path({str(tmp_path)!r}))}}; "
            "print(sorted(names), sorted(m for m in sys.modules if m.startswith(('runners.resume', 'driftlab_guard'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['revalidation_outcomes'] []", done.stdout
