"""The progress line's estimate of the time left (runners/timings.py), per experiment.

Bug classes named per test; the numbers are a run in which one experiment's declaration is 100x too small and
another's 10x too large (as the quick profile's were before).
"""
from __future__ import annotations

import pytest

from runners import timings

ORDER = ["a", "b", "c", "d"]
DECLARED = {"a": 1.0, "b": 0.1, "c": 20.0, "d": 2.0}


@pytest.mark.planted("runners.timings:remaining",
                     'if name in per_cell:',
                     'if False:')
def test_remembered_seconds_per_cell_win_over_the_declaration():
    """Bug class: an experiment measured before on this machine estimated from its (wrong) declaration."""
    left = timings.remaining(ORDER, {"a": 2, "b": 4, "c": 0, "d": 1}, DECLARED, {"b": 2.5}, {})
    assert left == pytest.approx(1.0 + 4 * 2.5 + 2.0)


@pytest.mark.planted("runners.timings:remaining",
                     'scale = math.exp(sum(logs) / len(logs)) if logs else 1.0',
                     'scale = sum(t for t, _ in measured.values()) / sum(s for _, s in measured.values()) if measured else 1.0')
def test_one_badly_declared_experiment_does_not_scale_the_others():
    """Bug class: one global factor (elapsed / declared so far): an experiment declared at 0.1 s that took 10 s
    would multiply every later estimate by 100 (the "34 min left" before a 20 s experiment)."""
    measured = {"a": (1.0, 1.0), "b": (10.0, 0.1), "x": (4.0, 1.0)}
    left = timings.remaining(["c", "d"], {"c": 1, "d": 1}, DECLARED, {}, measured)
    # b (declared 0.1 s) sets no scale; a and x give ratios 1 and 4: their geometric mean 2, not 15 / 2.1
    assert left == pytest.approx(20.0 * 2 + max(2.0 * 2, 4.0))


@pytest.mark.planted("runners.timings:remaining",
                     'total += max(declared.get(name, 0.0) * scale, floor)',
                     'total += declared.get(name, 0.0) * scale')
def test_every_experiment_costs_at_least_what_a_typical_one_did():
    """Bug class: an experiment declared at ~0 s (its fixed cost in no declaration) estimated as nothing."""
    measured = {"a": (4.0, 4.0), "b": (6.0, 6.0)}
    assert timings.remaining(["z"], {"z": 3}, {"z": 0.0}, {}, measured) == pytest.approx(5.0)


@pytest.mark.planted("runners.timings:remember",
                     'known[key] = per if key not in known else NEWEST * per + (1 - NEWEST) * known[key]',
                     'known[key] = per')
def test_done_experiments_add_nothing_and_remembering_averages(tmp_path, monkeypatch):
    """Bug classes: an experiment with no pending cell still counted; a remembered time replaced by the newest
    run alone (one loaded run would then mislead the next) or never updated."""
    assert timings.remaining(["a"], {"a": 0}, DECLARED, {"a": 9.0}, {}) == 0
    monkeypatch.setenv("DRIFTLAB_ENV_CACHE", str(tmp_path / "envs"))
    timings.remember("quick/j2", "a", 10.0, 5)
    timings.remember("quick/j2", "a", 20.0, 5)
    timings.remember("quick/j2", "b", 1.0, 0)  # no cell ran: nothing learned
    assert timings.load() == {"quick/j2/a": pytest.approx(0.5 * 4.0 + 0.5 * 2.0)}
    (tmp_path / "timings.json").write_text("not json")
    assert timings.load() == {}


@pytest.mark.planted("runners.timings:load",
                     'if isinstance(v, (int, float)) and v >= 0}',
                     'if isinstance(v, (int, float))}')
def test_where_timings_live_and_what_a_file_may_hold(tmp_path, monkeypatch):
    """Bug classes: the file beside the wrong cache (a user's $DRIFTLAB_ENV_CACHE ignored); a negative or
    non-numeric entry trusted; a zero (an experiment of instant cells) dropped."""
    monkeypatch.delenv("DRIFTLAB_ENV_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert timings.path() == tmp_path / "home" / ".cache" / "driftlab" / "timings.json"
    monkeypatch.setenv("DRIFTLAB_ENV_CACHE", str(tmp_path / "c" / "envs"))
    assert timings.path() == tmp_path / "c" / "timings.json"
    timings.path().parent.mkdir(parents=True)
    timings.path().write_text('{"q/a": 0, "q/b": -1, "q/c": "x", "q/d": 2.5}')
    assert timings.load() == {"q/a": 0.0, "q/d": 2.5}
    timings.remember("q", "e", 3.0, 2)
    assert timings.load()["q/e"] == 1.5 and timings.load()["q/a"] == 0.0  # remembering keeps the others


@pytest.mark.planted("runners.timings:remaining",
                     'if said >= MIN_DECLARED]',
                     'if said > MIN_DECLARED]')
def test_a_declaration_at_the_threshold_sets_the_scale():
    """Bug class: the threshold read as exclusive (an experiment declared at exactly MIN_DECLARED ignored)."""
    left = timings.remaining(["c"], {"c": 1}, {"c": 10.0}, {}, {"a": (2 * timings.MIN_DECLARED, timings.MIN_DECLARED)})
    assert left == pytest.approx(20.0)
