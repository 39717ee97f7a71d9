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
