"""The bad-input contract, everywhere: one line on stderr naming the problem, exit code 2, nothing
written, nothing already recorded lost (issue "Trust", §6).

Every row is one bad input.  A row's ``setup`` builds what the input needs inside ``tmp_path``; the test
then snapshots every file under ``tmp_path`` and asserts the command changed none of them.  The planted
bug each row catches is the one it names: a traceback, a partial table, a silently merged schema, a
second run trampling the first.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from runners.cli import main

REPO = Path(__file__).resolve().parent.parent
REFUND = (REPO / "scenarios" / "revalidation" / "workloads" / "refund.toml").read_text()


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def scenario(tmp: Path, text: str | bytes) -> list[str]:
    folder = tmp / "scenarios"
    folder.mkdir(exist_ok=True)
    path = folder / "bad.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return ["--scenario-dir", str(folder)]


def refund_with(old: str, new: str, name: str = "refund_bad") -> str:
    text = REFUND.replace('name = "refund"', f'name = "{name}"')
    assert old in text, old
    return text.replace(old, new)


def a_run(tmp: Path) -> Path:
    """A finished tiny run folder (revalidation_outcomes, 1 repetition per cell)."""
    run = tmp / "run"
    assert main(["reproduce", "--only", "revalidation_outcomes", "--repetitions", "1", "--jobs", "1",
                 "--workloads", "refund", "--out", str(run), "--quiet"]) == 0
    return run


def records_dir(run: Path) -> Path:
    return run / "records" / "revalidation_outcomes"


def plant(run: Path, name: str, content: bytes) -> None:
    (records_dir(run) / name).write_bytes(content)


def other_schema(run: Path) -> None:
    first = sorted(records_dir(run).glob("*.parquet"))[0]
    frame = pd.read_parquet(first).rename(columns={"outcome": "verdict"})
    frame.to_parquet(records_dir(run) / "zz_other.parquet", index=False)


def truncated(run: Path) -> None:
    first = sorted(records_dir(run).glob("*.parquet"))[0]
    plant(run, "zz_truncated.parquet", first.read_bytes()[:40])


def read_only(path: Path) -> None:
    path.chmod(0o555)


def plugin(tmp: Path, source: str, module: str) -> None:
    (tmp / f"{module}.py").write_text(source)


# (id, setup(tmp) -> extra args or None, argv (with {tmp}, {run}), text the one line must contain)
ROWS = [
    # --- scenario files
    ("not-utf8", lambda t: scenario(t, b"name = \"x\xff\"\n"), ["reproduce"], "not UTF-8"),
    ("oracle-maybe", lambda t: scenario(t, refund_with('oracle = "BLOCK"', 'oracle = "MAYBE"')), ["reproduce"], "MAYBE"),
    ("validator-version-text", lambda t: scenario(t, refund_with('severity = "REPLAN"', 'severity = "REPLAN"\nvalidator_version = "abc"')),
     ["reproduce"], "validator_version"),
    ("premises-not-tables", lambda t: scenario(t, 'family = "revalidation"\nname = "x"\nreads = []\npremises = [1, 2]\n[objects.a]\nb = 1\n'),
     ["reproduce"], "premises"),
    ("blocking-is-5", lambda t: scenario(t, refund_with("[mutations.blocking]\n", "[mutations.blocking_old]\n").replace(
        "[mutations.irrelevant]", "[mutations]\nblocking = 5\n\n[mutations.irrelevant]")), ["reproduce"], "blocking"),
    ("list-in-reads", lambda t: scenario(t, refund_with('"order.id", "order.amount"', '["order.id"], "order.amount"')),
     ["reproduce"], "reads"),
    ("number-vs-string", lambda t: scenario(t, refund_with('rule = "order.amount <= policy.refund_limit"',
                                                            'rule = "order.amount <= policy.currency"')), ["reproduce"], "amount"),
    ("no-family", lambda t: scenario(t, REFUND.replace('family = "revalidation"\n', "").replace('name = "refund"', 'name = "x"')),
     ["reproduce"], "family"),
    # --- output folder
    ("out-is-a-file", lambda t: (t / "afile").write_text("x"), ["reproduce", "--out", "{tmp}/afile"], "is a file"),
    ("out-under-a-file", lambda t: (t / "afile").write_text("x"), ["reproduce", "--out", "{tmp}/afile/run"], "is a file"),
    ("out-read-only", lambda t: ((t / "ro").mkdir(), read_only(t / "ro")), ["reproduce", "--out", "{tmp}/ro"], "read-only"),
    ("out-under-read-only", lambda t: ((t / "ro").mkdir(), read_only(t / "ro")), ["reproduce", "--out", "{tmp}/ro/run"], "read-only"),
    ("out-empty", None, ["reproduce", "--out", ""], "--out is empty"),
    ("out-not-a-run", lambda t: ((t / "full").mkdir(), (t / "full" / "x").write_text("x")), ["reproduce", "--out", "{tmp}/full"],
     "holds no driftlab run"),
    # --- analyzing records
    ("analyze-garbage", lambda t: plant(a_run(t), "zz_garbage.parquet", b"this is not parquet"), ["analyze", "{run}"], "zz_garbage"),
    ("analyze-truncated", lambda t: truncated(a_run(t)), ["analyze", "{run}"], "zz_truncated"),
    ("analyze-empty-file", lambda t: plant(a_run(t), "zz_empty.parquet", b""), ["analyze", "{run}"], "empty file"),
    ("analyze-other-schema", lambda t: other_schema(a_run(t)), ["analyze", "{run}"], "zz_other"),
    ("analyze-read-only", lambda t: read_only(a_run(t)), ["analyze", "{run}"], "not writable"),
    ("analyze-empty-experiment", lambda t: (records_dir(a_run(t)).parent / "revalidation_races").mkdir(), ["analyze", "{run}"],
     "holds no records"),
    ("analyze-unknown-experiment", lambda t: (records_dir(a_run(t)).parent / "made_up").mkdir(), ["analyze", "{run}"], "made_up"),
    ("analyze-not-a-run", None, ["analyze", "{tmp}"], "not a run folder"),
    # --- plug-in mechanisms
    ("plugin-syntax-error", lambda t: plugin(t, "class Bad(:\n", "bad_syntax"), ["reproduce", "--mechanisms", "bad_syntax:Bad"], "syntax error"),
    ("plugin-raises-on-import", lambda t: plugin(t, "raise RuntimeError('boom at import')\n", "bad_import"),
     ["reproduce", "--mechanisms", "bad_import:Bad"], "boom at import"),
    ("plugin-no-protocol", lambda t: plugin(t, "class Bad:\n    pass\n", "bad_protocol"), ["reproduce", "--mechanisms", "bad_protocol:Bad"],
     "implements no family's protocol"),
    ("plugin-unknown-name", None, ["reproduce", "--mechanisms", "ATR,Oracle"], "unknown mechanism 'Oracle'"),
    # --- impossible work and other names
    ("repetitions-huge", None, ["reproduce", "--repetitions", "1000000000000"], "hours"),
    ("reads-huge", None, ["sweep", "reads", "--reads", "1000000000"], "65536"),
    ("only-unknown", None, ["reproduce", "--only", "nothing"], "--only 'nothing'"),
    ("workload-unknown", None, ["reproduce", "--workloads", "refund,nope"], "nope"),
    ("jobs-zero", None, ["reproduce", "--jobs", "0"], "--jobs: must be at least 1"),
    ("rates-out-of-range", None, ["sweep", "omission", "--rates", "0,1.5"], "between 0 and 1"),
    ("check-missing-file", None, ["check", "{tmp}/none.jsonl"], "cannot read"),
    ("check-not-a-history", lambda t: (t / "h.jsonl").write_text("{not json\n"), ["check", "{tmp}/h.jsonl"], "line 1"),
]


@pytest.mark.parametrize("setup, argv, message", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, monkeypatch, capsys, setup, argv, message):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # a plug-in's folder is appended to sys.path: undo it
    extra = setup(tmp_path) if setup else None
    capsys.readouterr()
    argv = [a.format(tmp=tmp_path, run=tmp_path / "run") for a in argv]
    if isinstance(extra, list):
        argv += extra
    before = snapshot(tmp_path)
    code = main(argv + (["--quiet"] if argv[0] in ("reproduce", "sweep") else []))
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert snapshot(tmp_path) == before, "a refused command must write nothing and lose nothing"


def test_argparse_errors_are_one_line_too(capsys):
    code = main(["reproduce", "--profile", "huge"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "huge" in err


def test_a_mechanism_failing_mid_run_is_one_line_naming_it_and_keeps_finished_cells(tmp_path, monkeypatch, capsys):
    """Planted bug: a plug-in whose validate raises on one workload only; the cells of the others must survive."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    plugin(tmp_path, "from mechanisms.revalidation.atr import ATR\n"
                     "class Flaky(ATR):\n"
                     "    def validate(self, txn, store):\n"
                     "        if txn.intent.action == 'issue_refund':\n"
                     "            raise ValueError('flaky on refunds')\n"
                     "        return super().validate(txn, store)\n", "flaky_plugin")
    code = main(["reproduce", "--only", "revalidation_outcomes", "--mechanisms", "flaky_plugin:Flaky", "--repetitions", "1",
                 "--jobs", "1", "--out", str(tmp_path / "run"), "--quiet", "--workloads", "cloud_remediation,refund"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "flaky_plugin:Flaky" in err and "refund/" in err and "flaky on refunds" in err
    kept = list((tmp_path / "run" / "records" / "revalidation_outcomes").glob("cloud_remediation*.parquet"))
    assert kept, "cells finished before the failing one are kept"


def test_a_wrong_return_type_is_reported_not_a_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    plugin(tmp_path, "class Wrong:\n    def validate(self, txn, store):\n        return 'KEEP'\n", "wrong_plugin")
    code = main(["reproduce", "--only", "revalidation_outcomes", "--mechanisms", "wrong_plugin:Wrong", "--repetitions", "1",
                 "--jobs", "1", "--out", str(tmp_path / "run"), "--quiet", "--workloads", "refund"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "wrong_plugin:Wrong" in err and "Traceback" not in err, err


def test_a_repeated_mechanism_runs_once_and_is_said(tmp_path, capsys):
    code = main(["reproduce", "--only", "revalidation_outcomes", "--mechanisms", "ATR,ATR", "--repetitions", "1",
                 "--jobs", "1", "--out", str(tmp_path / "run"), "--quiet", "--workloads", "refund"])
    assert code == 0
    assert "named more than once" in capsys.readouterr().err
    mechanisms = pd.read_csv(tmp_path / "run" / "tables" / "revalidation_outcomes.csv")["mechanism"].unique()
    assert list(mechanisms) == ["ATR"]


def test_a_stray_module_in_the_working_folder_is_never_imported(tmp_path):
    """Planted bug: the CLI putting the working folder first on sys.path executes a stray multiprocess.py."""
    (tmp_path / "multiprocess.py").write_text("raise SystemExit('the stray module ran')\n")
    (tmp_path / "tqdm.py").write_text("raise SystemExit('the stray module ran')\n")
    exe = Path(sys.executable).with_name("driftlab")
    result = subprocess.run([str(exe), "reproduce", "--only", "revalidation_outcomes", "--repetitions", "1", "--jobs", "2",
                             "--workloads", "refund", "--out", str(tmp_path / "run"), "--quiet"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "the stray module ran" not in result.stderr, result.stderr


def test_a_second_run_into_a_held_folder_is_refused_and_a_killed_run_does_not_block_its_rerun(tmp_path):
    out = tmp_path / "run"
    args = [sys.executable, "-m", "runners.cli", "reproduce", "--only", "revalidation_outcomes", "--repetitions", "200",
            "--jobs", "1", "--workloads", "refund", "--out", str(out), "--quiet"]
    first = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out / "run.json").exists():
        time.sleep(0.02)
    assert (out / "run.json").exists(), "the first run started"
    second = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr
    assert "another driftlab run" in second.stderr and str(first.pid) in second.stderr
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert "Traceback" not in first.stderr.read()
    rerun = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    records = pd.concat(pd.read_parquet(p) for p in (out / "records" / "revalidation_outcomes").glob("*.parquet"))
    assert not records.duplicated(["cell", "repetition"]).any() and len(records) == 5 * 7 * 4 * 200
