"""Framework rows of ``resume_powerloss`` (issue 31 §3): each framework in its own environment, its store on the lazy
file system, the effect ledger (the world) outside it; a point its adapter cannot reach is an n/a cell with the
adapter's reason, never dropped.

The real cell needs FUSE and the env (built on first use); skipped, saying why, where FUSE is missing, unless
``DRIFTLAB_REQUIRE_FUSE=1`` (CI), which turns the skip into a failure.
"""
from __future__ import annotations

import os

import pytest

from runners.experiment import Options
from runners.resume import lazyfs, powerloss

#: one xdist worker for the tests that mount the lazy file system (why: tests/test_powerloss_cleanup.py)
pytestmark = pytest.mark.xdist_group("powerloss")


@pytest.mark.planted("runners.resume.powerloss:env_point",
                     'return target, (f"no checkpoint of act to lose after its save: {why}" if why else "")',
                     'return target, ""')
def test_each_loss_point_maps_to_the_adapters_named_point_or_its_declared_reason():
    """after_effect and during_checkpoint_write are the adapter's points at act; after_save_returned is before_node at
    notify (act's checkpoint written), n/a with the adapter's reason where no checkpoint is written after act;
    after_done has no point (the resume returned).  Every framework row has a cell at every point of the profile.

    Bug class: an after_save_returned cell run on a row that writes no checkpoint after act (a loss of nothing the
    framework acknowledged, read as a finding)."""
    assert powerloss.env_point("crewai@1.15", "after_effect") == (("after_effect", "act"), "")
    assert powerloss.env_point("crewai@1.15", "after_save_returned") == (("before_node", "notify"), "")
    assert powerloss.env_point("crewai@1.15", "after_done") == (None, "")
    target, why = powerloss.env_point("dbos@3.4", "during_checkpoint_write")
    assert target == ("during_checkpoint_write", "act") and "one transaction" in why
    target, why = powerloss.env_point("llamaindex[step-boundary]@2.26", "after_save_returned")
    assert why.startswith("no checkpoint of act to lose after its save: ") and "no checkpoint is written after act" in why
    if not powerloss.ResumePowerloss.missing():
        for profile, rows, points in (("quick", powerloss.QUICK_FRAMEWORK_ROWS, powerloss.QUICK_POINTS),
                                      ("paper", powerloss.FRAMEWORK_ROWS, tuple(powerloss.ENV_POINTS))):
            got = {(c.p["runtime"], c.p["point"]) for c in powerloss.ResumePowerloss().cells(profile, 1, Options())}
            assert {(row, p) for row in rows for p in points} <= got, profile


@pytest.fixture
def fuse():
    missing = lazyfs.requirements() or ("" if os.geteuid() == 0 else "not root")
    if missing:
        if os.environ.get("DRIFTLAB_REQUIRE_FUSE") == "1":
            pytest.fail(f"FUSE needed and DRIFTLAB_REQUIRE_FUSE=1: {missing}")
        pytest.skip(f"the lazy file system needs FUSE: {missing}")


@pytest.mark.planted("runners.resume.powerloss:run_one_env", 'ledger_location=str(world)', 'ledger_location=""')
def test_a_framework_rows_store_is_on_the_lazy_fs_and_its_ledger_outside(fuse, tmp_path):
    """pydantic-graph through its env's fork server, the power lost a moment after the resume returned done: the
    env adapter's effect ledger is the world's folder (outside the mount), its store is on the mount, the cell is
    judged from the world (the effect counted, the run's state read back through the env), the row's release is
    the env's declared one.

    Bug class: the env adapter's ledger on the lazy file system (a power loss would then erase the world's record
    of a payment, and the effects count would read the store's side of the loss)."""
    got = powerloss.run_one("pydantic-graph@1.107", "after_done", True, "power_loss", tmp_path / "cell")
    backing, world = tmp_path / "cell" / "backing", tmp_path / "cell" / "world"
    assert (world / "plledger.sqlite").exists()
    assert not [f for f in backing.rglob("*") if "ledger" in f.name]
    assert [f for f in backing.rglob("*.json")], "the framework's store is not on the lazy file system"
    assert got["release"] == "1.107.10" and got["store_loads"] and got["effects"] >= 1, got["witness"]


def _cell(runtime, point, fault, effects, liveness="valid", kept=True, loads=True, flush=True):
    return {"runtime": runtime, "framework": runtime.split("@")[0], "release": "1", "configuration": "c",
            "point": point, "flush_at_park": flush, "fault": fault, "effects": effects, "liveness": liveness,
            "acknowledged_kept": kept, "store_loads": loads, "state_after_restart": "", "witness": "w"}


@pytest.mark.planted("analysis.resume.powerloss:measured", '(tab["fault"] != CONTROL)', 'True')
def test_controls_and_na_cells_are_not_counted_as_power_loss_cells_and_say_what_the_loss_changes():
    """A row's findings count its power-loss cells only: an n/a cell (a point its adapter cannot reach) and a
    crash-only control (no power lost) count for nothing; a loss cell whose verdict differs from its control's is
    what the power loss itself changed.

    Bug class: control cells counted as power-loss cells (a crash's double effect reported as the power loss's)."""
    import pandas as pd

    from analysis.resume import powerloss as a

    tab = pd.DataFrame([_cell("x@1", "after_effect", "power_loss", 2), _cell("x@1", "after_effect", "crash_only", 2),
                        _cell("x@1", "after_done", "power_loss", 2, kept=False),
                        _cell("x@1", "after_done", "crash_only", 1),
                        _cell("x@1", "after_save_returned", "power_loss", -1, liveness="n/a"),
                        _cell("y@1", "after_done", "power_loss", 1), _cell("y@1", "after_done", "crash_only", 2)])
    said: dict[str, str] = {}
    for f in a.findings(tab, tab):
        said[f.subject] = said.get(f.subject, "") + f.text + " "
    assert "effect twice in 2, stuck in 0, acknowledged progress lost in 1, store unreadable in 0 of 2 cells" in said["x@1"]
    assert "effect twice in 0" in said["y@1"] and "of 1 cells" in said["y@1"]
    assert [c for _, c in a.changes(tab)] == ["x@1, after_done (flushed, power_loss): fired 2x, acked lost where a "
                                              "crash alone gives once",
                                              "y@1, after_done (flushed, power_loss): once where a crash alone gives "
                                              "fired 2x"]
    assert a.verdict(tab.iloc[4].to_dict()) == "n/a"


@pytest.mark.planted("runners.resume.powerloss:run_one_env", "fs.send(SENT[fault])", "fs.send(FLUSH)")
def test_a_framework_cells_loss_is_real_beside_its_crash_only_control(fuse, tmp_path):
    """pydantic-graph 1.107's FileStatePersistence rewrites its JSON file with ``Path.write_bytes`` and never fsyncs
    (its source at the pinned release): after the resume returned done, a crash alone keeps the done, and the
    power loss on the same cell takes it away (the run waits for the approval it already had).

    Bug class: a framework cell whose power loss drops nothing (the loss sent to the file system is a flush), so
    every framework row would read as surviving a power loss."""
    crash = powerloss.run_one("pydantic-graph@1.107", "after_done", True, "crash_only", tmp_path / "crash")
    loss = powerloss.run_one("pydantic-graph@1.107", "after_done", True, "power_loss", tmp_path / "loss")
    assert (crash["state_after_restart"], crash["acknowledged_kept"]) == ("done", True), crash["witness"]
    assert loss["state_after_restart"] != "done" and not loss["acknowledged_kept"], loss["witness"]
