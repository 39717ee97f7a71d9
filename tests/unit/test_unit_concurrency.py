"""The concurrent-resume table and its report (``analysis.resume.concurrency``) on small hand-made records.

Bug classes (issue 16 §7): a rate over the wrong population (a cell's means over another cell's races, a
threshold that misses a saturated cell); a published number beside the wrong runtime (a guarded or REMIT row, or
none where the paper's runtime is missing) or the wrong cell; a report note that says the opposite of the table.
"""
from __future__ import annotations

import pandas as pd
import pytest

import analysis.resume.concurrency as concurrency
from analysis.reference import reference

REF = reference("resume_concurrency")


def race(runtime, k, fired, served=None, refused=0, indeterminate=0, backend="postgres", jitter=25.0, failed=0):
    return {"runtime": runtime, "backend": backend, "k": k, "jitter_ms": jitter, "effects_fired": fired,
            "served": fired if served is None else served, "refused": refused, "failed": failed,
            "indeterminate": indeterminate}


@pytest.mark.planted("analysis.resume.concurrency:table",
                     '"indeterminate": int(g["indeterminate"].sum())',
                     '"indeterminate": int(g["indeterminate"].mean())')
def test_table_is_one_row_per_cell_with_its_own_means_and_sums():
    """Bug class: a rate over the wrong population: a cell's means, sums and saturation computed over another
    cell's races (or the indeterminate races averaged instead of counted)."""
    records = pd.DataFrame([race("seq", 4, 1, 1, 3, 0, jitter=50), race("seq", 4, 1, 1, 1, 1, jitter=50, failed=1),
                            race("seq", 2, 2, 2, 0, 0, backend="sqlite", jitter=0),
                            race("naive", 4, 3, 4, 0, 2, jitter=50)])
    tab = concurrency.table(records)
    assert list(tab.columns) == concurrency.COLUMNS
    got = [tuple(r) for r in tab.itertuples(index=False)]
    assert got == [("naive", "postgres", 4, 50.0, 1, 3.0, 0.75, 0.75, 0.75, 4.0, 0.0, 0.0, 2),
                   ("seq", "postgres", 4, 50.0, 2, 1.0, 0.25, 0.25, 0.25, 1.0, 2.0, 0.5, 1),
                   ("seq", "sqlite", 2, 0.0, 1, 2.0, 1.0, 1.0, 1.0, 2.0, 0.0, 0.0, 0)]
    assert all(type(v) is int for v in tab["k"]) and all(type(v) is float for v in tab["jitter_ms"])
    assert concurrency.table(records.iloc[:0]).empty and list(concurrency.table(records.iloc[:0]).columns) == \
        concurrency.COLUMNS


@pytest.mark.parametrize("runtimes,compared", [
    (["Guarded LangGraph", "LangGraph+REMIT", "Langgraph", "naive"], "Langgraph"),
    pytest.param(["Guarded LangGraph", "LangGraph+REMIT", "naive"], "naive", marks=pytest.mark.planted(
        "analysis.resume.concurrency:report", 'and "guard" not in r.lower()', "")),
    (["seq", "naive"], "naive"),
    (["seq", "other"], None),
])
def test_report_sets_the_paper_beside_the_runtime_it_measured(runtimes, compared):
    """Bug class: a published number beside the wrong runtime: the paper measured stock LangGraph, never the guarded
    or REMIT stacks (whatever the case of their names); 'naive' stands in for it only when it is absent."""
    records = pd.DataFrame([race(rt, 4, 4) for rt in runtimes])
    section = concurrency.report(concurrency.table(records), records)
    mats = {m.title.split(":")[0]: m for m in section.matrices}
    assert list(mats) == sorted(runtimes)  # the table's order
    for rt in runtimes:
        saturated = next(r for r in section.rows if r["metric"] == f"{rt}: cells with saturation 1.0")
        if rt == compared:
            published = next(v["saturation"] for v in REF["values"] if (v["backend"], v["k"], v["jitter_ms"])
                             == ("postgres", 4, 25.0))  # the reference file's cell, never a copy of it here
            assert mats[rt].paper == {("postgres k=4", "25 ms"): concurrency._fmt(published)}
            share = 100 * REF["cells_saturated"] / REF["cells"]
            assert saturated["paper"] == f"{REF['cells_saturated']} of {REF['cells']} ({share:.2f}%)"
        else:
            assert mats[rt].paper == {} and saturated["paper"] == "not published"
        assert saturated["ours"] == "1 of 1 (100.00%)"
    assert f"it is set beside {compared or 'no runtime'} ('naive'" in section.notes
    assert ("Cells where" in section.notes) == (compared is not None)
    if compared:
        assert (f"Cells where {compared} differs from the paper: its window (from reading the parked head to the "
                "first checkpoint after the interrupt: the node's declared work) is longer than the largest jitter, so "
                "every racer still reads the parked head; the paper's LangGraph window on PostgreSQL was apparently "
                "just under its largest jitter, so some racers read a head that had moved on.") in section.notes


@pytest.mark.planted("analysis.resume.concurrency:report",
                     'sat = int((t["saturation"] >= 0.999).sum())',
                     'sat = int((t["saturation"] >= 0.998).sum())')
def test_report_cells_rows_and_notes():
    """Bug class: a rate over the wrong population or a threshold off by one (a saturation of 0.999 is 1.0 to three
    figures; 0.998 is not), a race count of the wrong races, a cell set beside the wrong column, a note on missing
    PostgreSQL cells or on differences that says the opposite of the table."""
    records = pd.DataFrame([race("naive", 1000, 999, jitter=50), race("naive", 1000, 998, jitter=50, backend="pg2"),
                            race("naive", 5, 5, backend="sqlite", jitter=0), race("naive", 5, 1, backend="sqlite",
                                                                                  jitter=100),
                            race("naive", 5, 1, backend="sqlite", jitter=100),
                            race("seq", 5, 1, 1, 2, backend="sqlite", failed=2)])
    tab = concurrency.table(records)
    section = concurrency.report(tab, records)
    rows = {r["metric"]: r for r in section.rows}
    assert list(rows) == ["naive: cells with saturation 1.0", "naive: races with exactly one gated effect",
                          "seq: cells with saturation 1.0", "seq: races with exactly one gated effect",
                          "seq: racers that failed (the runtime's error)"]  # only a runtime whose racers failed
    assert rows["seq: racers that failed (the runtime's error)"]["ours"] == "2 of 5 (40.00%)"  # of its racers
    assert rows["naive: cells with saturation 1.0"]["ours"] == "2 of 4 (50.00%)"
    assert rows["naive: races with exactly one gated effect"]["ours"] == "2 of 5 (40.00%)"
    assert rows["seq: races with exactly one gated effect"]["ours"] == "1 of 1 (100.00%)"
    assert rows["seq: cells with saturation 1.0"]["ours"] == "0 of 1 (0.00%)"
    naive = section.matrices[0]
    assert naive.title == "naive: saturation (effects fired / k; varies between same-seed runs: the race's timing), backend x k x jitter"
    assert naive.rows == ["pg2 k=1000", "postgres k=1000", "sqlite k=5"]
    assert naive.columns == ["0 ms", "50 ms", "100 ms"]
    assert naive.cells == {("pg2 k=1000", "50 ms"): "0.998", ("postgres k=1000", "50 ms"): "0.999",
                           ("sqlite k=5", "0 ms"): "1", ("sqlite k=5", "100 ms"): "0.2"}
    assert naive.paper == {key: "1" for key in naive.cells}  # none of these cells is published: the default
    assert "Cells where naive differs from the paper" in section.notes
    assert "PostgreSQL cells are missing" not in section.notes
    assert ("Exact between two runs of one seed: runtime, backend, k, jitter_ms, repetitions; decided by the race's "
            "timing, so varying: effects_fired_mean, saturation, saturation_min, saturation_max, served_mean, "
            "refused_mean, failed_mean, indeterminate (saturation_min and saturation_max: its interval over the "
            "repetitions).") in section.notes
    assert section.artifact == "resume_concurrency"
    assert section.title == "Resume: k concurrent resumers of one parked interrupt"


@pytest.mark.planted("analysis.resume.concurrency:report",
                     'if "postgres" not in set(tab["backend"]):',
                     'if False:')
def test_report_notes_without_differences_and_without_postgresql():
    """Bug class: a report note that says the opposite of the table: no cell differs from the paper, so no
    'differs' paragraph; no PostgreSQL cell, so the note says PostgreSQL is missing."""
    records = pd.DataFrame([race("naive", 5, 5, backend="sqlite"), race("seq", 5, 1, backend="sqlite")])
    section = concurrency.report(concurrency.table(records), records)
    assert "differs from the paper" not in section.notes
    assert section.notes.endswith(" The interrupt node's declared work time is in "
                                  "scenarios/resume/graph_approval_slow.toml. PostgreSQL cells are missing from "
                                  "this run (PostgreSQL was unreachable).")
    assert section.notes.startswith("Each race: one run parked, k warm resumer processes released by one barrier, "
                                    f"each then waiting its own seeded start jitter in [0, jitter] ms. The paper's "
                                    f"saturation is {REF['runtime']}'s;")


@pytest.mark.planted("analysis.resume.concurrency:report",
                     'remit_races(tab, records)',
                     'remit_races(tab.iloc[:0], records)')
def test_report_notes_carry_the_langgraph_and_remit_findings_of_this_table():
    """Bug class: a report note that says the opposite of the table: the REMIT races and the paper's LangGraph
    findings are computed from this run's table and records (not from nothing), one sentence after the other."""
    records = pd.DataFrame([race("langgraph+remit", 2, 1, 1, 1), race("langgraph+remit", 2, 2, 2, 0),
                            race("naive", 2, 2, backend="sqlite")])
    notes = concurrency.report(concurrency.table(records), records).notes
    assert ("graph_approval_slow.toml. langgraph+remit: the gated effect fired at most once per race in 0 of 1 cells, "
            "served per race 1.5..1.5, refused per race 0.5..0.5. REMIT's own claim (") in notes
    assert notes.endswith("this run, k = 2: once in 1 of 2 races, the loser refused in 1.")
    stock = pd.DataFrame([race("langgraph", 2, 2)])
    notes = concurrency.report(concurrency.table(stock), stock).notes
    assert "moved on. LangGraph: the paper measured " in notes and "Today: saturation 1.0 in 1 of 1 cells" in notes
