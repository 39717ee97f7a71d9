"""``analysis/resume/frameworks.py`` and its figure, on literal records (issue 24 §3).

Each test names the bug class it catches and keeps the planted variant it must fail on (a function of the same
shape with the bug, run through the same check): unknown folded into holds; saturation divided by the expected
effects instead of k; "CO (inert)" read from the lab's CO verdict; a published verdict compared with another
runtime's cell; a figure drawing another column than the one its table names; the effects per race reported only as
a mean (the distribution 0 / 1 / >1 hides a lost effect).

mutmut: the whole module's score and its equivalent survivors are in ``test_unit_frameworks_report.py``.
"""
from __future__ import annotations

import pandas as pd
import pytest

from analysis.resume import frameworks as fw
from figures.resume import frameworks as fig


def rec(runtime="a@1", prop="EO", verdict="valid", cell="baseline", k=0, fired=1, expected=1, co_inert="valid",
        witness=""):
    return {"runtime": runtime, "framework": runtime.split("@")[0], "release": runtime.split("@")[1], "variant": "",
            "fault_cell": cell, "backend": "sqlite", "k": k, "jitter_ms": 0.0, "property": prop, "verdict": verdict,
            "witness": witness, "effects_fired": fired, "effects_expected": expected, "co_inert": co_inert}


def frame(*rows) -> pd.DataFrame:
    return pd.DataFrame(list(rows))


# ---------------------------------------------------------------------------------------------- fold
def planted_fold(verdicts):
    """Planted: valid looked up before unknown (an unknown execution folds into holds)."""
    vs = set(verdicts)
    for v in ("invalid", "valid", "unknown"):
        if v in vs:
            return fw.SHOWN[v]
    return fw.NA


def check_fold(fold) -> None:
    assert fold(["valid", "unknown", "valid"]) == fw.UNKNOWN
    assert fold(["valid", "invalid", "unknown"]) == fw.VIOLATES
    assert fold(["valid", "not applicable"]) == fw.HOLDS
    assert fold(["not applicable"]) == fw.NA and fold([]) == fw.NA


def test_unknown_never_folds_into_holds():
    """Bug class: an unknown execution (a run that crashed, an indeterminate outcome) counted as holding."""
    check_fold(fw.fold)
    with pytest.raises(AssertionError):
        check_fold(planted_fold)


# ---------------------------------------------------------------------------------------------- saturation
RACES = frame(rec(k=4, fired=1, expected=1, cell="concurrent_resume"), rec(k=2, fired=2, cell="concurrent_resume"),
              rec(k=4, fired=1, prop="CO", cell="concurrent_resume"), rec(k=0, fired=1))


def planted_races(t):
    """Planted: saturation = effects fired / effects expected."""
    r = t[(t["k"] > 0) & (t["property"] == "EO")]
    return r.assign(saturation=r["effects_fired"] / r["effects_expected"])


def check_saturation(monkeypatch, races) -> None:
    monkeypatch.setattr(fw, "_races", races)
    line = fw.table(RACES).iloc[0]
    assert line["race_cells"] == 2 and line["saturation_mean"] == pytest.approx((1 / 4 + 2 / 2) / 2)
    assert line["saturation_max"] == pytest.approx(1.0)


def test_saturation_is_effects_fired_over_k(monkeypatch):
    """Bug class: saturation divided by the expected effects (1) instead of the k racers."""
    check_saturation(monkeypatch, fw._races)
    with pytest.raises(AssertionError):
        check_saturation(monkeypatch, planted_races)


@pytest.mark.planted("analysis.resume.frameworks:effects_per_race",
                     'return {"0": int((fired == 0).sum()), "1": int((fired == 1).sum()), ">1": int((fired > 1).sum())}',
                     'return {"0": 0, "1": int((fired == 1).sum()), ">1": int((fired > 1).sum())}')
def test_effects_per_race_is_a_distribution():
    """Bug class: only the mean reported, so a race that fired nothing (a lost effect) hides behind one that fired
    twice (mean 1.0)."""
    t = frame(rec(k=2, fired=0, cell="concurrent_resume"), rec(k=2, fired=2, cell="concurrent_resume"),
              rec(k=2, fired=1, cell="concurrent_resume"), rec(k=2, fired=1, prop="CO", cell="concurrent_resume"))
    assert fw.effects_per_race(t) == {"0": 1, "1": 1, ">1": 1}
    assert fw._races(t)["effects_fired"].mean() == 1.0  # what the mean alone would say
    t = frame(*(rec(k=4, fired=f, cell="concurrent_resume") for f in (0, 0, 0, 0, 1, 2, 2, 2, 2, 3)),
              rec(k=1, fired=1, cell="concurrent_resume"), rec(k=0, fired=0))
    assert fw.effects_per_race(t) == {"0": 4, "1": 2, ">1": 5}  # a k = 1 race is a race; a fault cell is not


# ---------------------------------------------------------------------------------------------- the whole table
@pytest.mark.planted("analysis.resume.frameworks:table",
                     'fault_cells_violated=sum("invalid" in v for v in cells)',
                     'fault_cells_violated=sum(v != {"valid"} for v in cells)')
def test_the_table_is_one_row_per_runtime_in_order_with_every_column():
    """Bug class: a column read from the wrong field or population (fault cells counted over races, an n/a cell
    counted as violated, a row without races given a saturation), or the rows reordered."""
    t = frame(rec("b@2", "EO", "invalid", "crash_x", witness="w"), rec("b@2", "CO", "valid", "crash_x"),
              rec("b@2", "EO", "valid", "baseline"), rec("b@2", "EO", "not applicable", "fork_twice"),
              rec("b@2", "CO", "not applicable", "fork_twice"),
              rec("b@2", "EO", "valid", "concurrent_resume", k=2, fired=1), rec("b@2", "EO", "valid",
                                                                                 "concurrent_resume", k=4, fired=1),
              rec("a@1", "EO", "valid", "baseline"), rec("a@1", "liveness", "unknown", "baseline"))
    t.loc[t["runtime"] == "b@2", "variant"] = "v"
    tab = fw.table(t)
    assert list(tab.columns) == fw.COLUMNS and list(tab["runtime"]) == ["b@2", "a@1"]
    b, a = tab.iloc[0].to_dict(), tab.iloc[1].to_dict()
    assert {k: b[k] for k in ("framework", "release", "variant", "EO", "CO", "PC", "CO (inert)")} == {
        "framework": "b", "release": "2", "variant": "v", "EO": "violates", "CO": "holds", "PC": "n/a",
        "CO (inert)": "holds"}
    assert (b["fault_cells_violated"], b["fault_cells"], b["fault_cells_na"], b["race_cells"]) == (1, 3, 1, 2)
    assert b["saturation_mean"] == pytest.approx(0.375) and b["saturation_max"] == pytest.approx(0.5)
    assert a["liveness"] == "unknown" and a["CO (inert)"] == "n/a" and a["race_cells"] == 0
    assert a["saturation_mean"] != a["saturation_mean"] and a["saturation_max"] != a["saturation_max"]  # NaN
    assert isinstance(b["fault_cells"], int) and a["fault_cells_violated"] == 0 and a["fault_cells_na"] == 0
    assert list(fw.table(t.iloc[:0]).columns) == fw.COLUMNS  # no records: the table's columns still


# ---------------------------------------------------------------------------------------------- CO (inert)
def check_co_inert(monkeypatch, column) -> None:
    monkeypatch.setattr(fw, "CO_INERT_FROM", column)
    t = frame(rec(prop="CO", verdict="invalid", co_inert="valid", cell="second_resume_head"),
              rec(prop="CO", verdict="not applicable", co_inert="invalid", cell="fork_twice"))
    line = fw.table(t).iloc[0]
    assert line["CO"] == fw.VIOLATES and line["CO (inert)"] == fw.HOLDS


def test_co_inert_is_read_from_its_own_column(monkeypatch):
    """Bug class: "CO (inert)" read from the lab's CO verdict (the two readings then never differ), or from a cell
    where CO does not apply."""
    check_co_inert(monkeypatch, "co_inert")
    with pytest.raises(AssertionError):
        check_co_inert(monkeypatch, "verdict")


# ---------------------------------------------------------------------------------------------- published
PUB = [{"framework": "a", "release": "0.9", "property": "EO", "verdict": "violates", "finding": "re-runs"}]


def planted_differences(runtime, pub, cells):
    """Planted: each published verdict compared with the first runtime's cell of that property."""
    first = next(iter(cells))[0]
    return fw.differences(first, pub, cells)


def check_differences(differences) -> None:
    cells = {("b@1", "EO"): "holds", ("a@1", "EO"): "violates"}
    assert differences("a@1", PUB, cells) == []
    assert differences("b@1", PUB, cells) == ['EO (artifact 0.9: violates, "re-runs"; this run: holds)']
    assert differences("c@1", PUB, cells) == ['EO (artifact 0.9: violates, "re-runs"; this run: -)']


def test_a_published_verdict_is_compared_with_the_same_runtimes_cell():
    """Bug class: a published verdict set beside another runtime's cell (agreement claimed where it differs)."""
    check_differences(fw.differences)
    with pytest.raises(AssertionError):
        check_differences(planted_differences)


# ---------------------------------------------------------------------------------------------- the figure
def planted_grid(table):
    """Planted: the figure's CO (inert) column drawn from the CO column."""
    g = fig.grid(table)
    return g.assign(**{"CO (inert)": table["CO"].values})


def check_grid(grid) -> None:
    t = fw.table(frame(rec(prop="CO", verdict="invalid", co_inert="valid", cell="second_resume_head"),
                       rec(prop="EO", verdict="valid"), rec(prop="liveness", verdict="unknown")))
    drawn = grid(t)
    for col in fig.COLUMNS:
        assert list(drawn[col]) == list(t[col]), col


def test_the_figure_draws_the_columns_its_table_names(tmp_path):
    """Bug class: a figure cell drawn from another column than its label (the data behind it is written beside the
    figure and compared here)."""
    check_grid(fig.grid)
    with pytest.raises(AssertionError):
        check_grid(planted_grid)
    t = fw.table(frame(rec(prop="CO", verdict="invalid", co_inert="valid", cell="second_resume_head")))
    files = fig.draw(frame(), t, tmp_path / "resume_frameworks")
    beside = pd.read_csv(tmp_path / "resume_frameworks.csv", keep_default_na=False)
    assert (tmp_path / "resume_frameworks.csv") in files
    assert list(beside["CO (inert)"]) == list(t["CO (inert)"]) and list(beside["CO"]) == list(t["CO"])


# ---------------------------------------------------------------------------------------------- racers
def planted_counts(answers):
    """Planted: a racer whose framework answered 'failed' counted as served (it answered, after all)."""
    from analysis.resume.concurrency import racer_counts

    out = racer_counts(answers)
    return {**out, "served": out["served"] + out["failed"], "failed": 0}


def check_counts(counts) -> None:
    answers = [{"status": {"state": "done"}}, {"status": {"state": "failed"}}, {"status": {"state": "refused"}},
               {"status": {"state": "parked"}}, None, {"status": {"state": "done"}}, {"pid": 7}]
    assert counts(answers) == {"served": 3, "refused": 1, "failed": 1, "indeterminate": 2}


def test_a_failed_racer_is_never_counted_as_served():
    """Bug class: a racer that failed (the framework's declared failure, e.g. pydantic-graph's lock file vanishing
    under it) counted as served, which hides a race that lost its effect."""
    from analysis.resume.concurrency import racer_counts

    check_counts(racer_counts)
    with pytest.raises(AssertionError):
        check_counts(planted_counts)
