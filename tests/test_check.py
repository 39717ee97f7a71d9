"""``driftlab check`` on stored histories: prose witnesses and the exit code follows the verdict.

A race cell's history is stored in the run folder by a real run; the test then plants a double commit
(one pair's refused commit rewritten as committed) and an indeterminate commit into copies of it.
Planted bugs caught: a checker that ignores refused-vs-committed status (the double commit passes), and
a checker or CLI that counts an indeterminate operation as valid (exit 0 instead of 2).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners.cli import main


@pytest.fixture(scope="module")
def race_history(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("check") / "run"
    assert main(["reproduce", "--only", "revalidation_races", "--repetitions", "4", "--jobs", "1",
                 "--out", str(out), "--quiet"]) == 0
    histories = sorted((out / "histories" / "revalidation_races").glob("*pairs*target_cas*.jsonl"))
    assert histories, "race cells store their histories"
    return histories[0]


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def first_refused_commit(rows: list[dict]) -> dict:
    return next(r for r in rows[1:] if r["op"] == "commit" and r["status"] == "fail")


def test_a_clean_stored_history_is_valid(race_history, capsys):
    assert main(["check", str(race_history)]) == 0
    out = capsys.readouterr().out
    assert "one_commit_per_pair: valid" in out and "verdict: valid" in out


def test_a_planted_double_commit_is_invalid_with_a_prose_witness(race_history, tmp_path, capsys):
    rows = lines(race_history)
    refused = first_refused_commit(rows)
    refused["status"] = "ok"  # the pair's loser now "committed" too
    code = main(["check", str(write(tmp_path / "double.jsonl", rows)), "--checker", "one_commit_per_pair"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "one_commit_per_pair: invalid" in out and "witness:" in out
    assert f"#{refused['index']} " in out, "the witness names the planted operation"


def test_an_indeterminate_commit_is_unknown_not_valid(race_history, tmp_path, capsys):
    rows = lines(race_history)
    refused = first_refused_commit(rows)
    refused["status"], refused["end"] = "indeterminate", None  # its process died: it may or may not have committed
    code = main(["check", str(write(tmp_path / "unknown.jsonl", rows))])
    captured = capsys.readouterr()
    assert code == 2 and "verdict: unknown" in captured.out and "verdict: valid" not in captured.out
