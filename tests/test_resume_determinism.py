"""Same seed, same tables, stated exactly (issue 24 §8): ``resume_concurrency`` run twice on PostgreSQL and SQLite.

The table declares which of its columns two same-seed runs give equal (``EXACT``) and which the race's timing
decides (``VARYING``).  Bug classes caught: a table column added without a declaration (it is neither exact nor
varying); an exact column that is not (a cell's parameters or repetitions drawn from something but the seed); a
runtime that serves one racer and refuses the rest whose counts still vary between runs (its gate is not one).
"""
from __future__ import annotations

import pandas as pd
from analysis.records import load_records
from analysis.resume.concurrency import COLUMNS, EXACT, VARYING
from test_reproduce import driftlab

RUNTIMES = "langgraph,langgraph+guard"
#: record columns the race decides (the rest of a record must be equal between same-seed runs)
RACED = ("effects_fired", "served", "refused", "failed", "indeterminate", "start_skew_us", "co_verdict",
         "co_inert_verdict", "eo_verdict", "liveness_verdict")


def test_columns_are_declared_exact_or_varying():
    assert set(EXACT) | set(VARYING) == set(COLUMNS) and not set(EXACT) & set(VARYING)


def test_two_same_seed_runs_agree_on_the_exact_columns(tmp_path, pg_dsn):
    """Two same-seed quick runs: the records equal outside the raced columns, the tables on ``EXACT``; the
    guarded row (one served, the rest refused) equal on every column."""
    tables, records = [], []
    for name in ("a", "b"):
        out = tmp_path / name
        got = driftlab("reproduce", "--only", "resume_concurrency", "--profile", "quick", "--seed", "5",
                       "--mechanisms", RUNTIMES, "--quiet", "--out", str(out))
        assert got.returncode == 0, got.stderr
        tables.append(pd.read_csv(out / "tables" / "resume_concurrency.csv"))
        records.append(load_records(out, "resume_concurrency"))
    a, b = tables
    assert {"postgres", "sqlite"} <= set(a["backend"])
    pd.testing.assert_frame_equal(a[list(EXACT)], b[list(EXACT)])
    kept = [c for c in records[0].columns if c not in RACED]
    pd.testing.assert_frame_equal(records[0][kept], records[1][kept])
    guarded = [t[t["runtime"] == "langgraph+guard"].reset_index(drop=True) for t in tables]
    assert len(guarded[0]) and (guarded[0]["served_mean"] == 1).all()
    pd.testing.assert_frame_equal(*guarded)
