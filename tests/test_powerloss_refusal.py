"""Where FUSE is missing, resume_powerloss says what it needs in one line: refused when named, skipped otherwise.

Bug classes: a missing /dev/fuse that stops a whole quick profile (or, worse, reads as a clean power-loss table);
an explicit ``--only resume_powerloss`` that exits 0 with nothing measured.
"""
from __future__ import annotations

import pytest

from runners.experiment import DriftlabError, Options
from runners.resume import powerloss


@pytest.fixture
def no_fuse(monkeypatch):
    monkeypatch.setattr(powerloss.lazyfs, "requirements", lambda: "no /dev/fuse on this machine")


def test_named_it_is_refused_in_one_line(no_fuse):
    with pytest.raises(DriftlabError, match="needs a FUSE file system: no /dev/fuse"):
        powerloss.ResumePowerloss().check(Options(only="resume_powerloss"))


def test_in_a_larger_selection_it_is_skipped_with_a_note(no_fuse, capsys):
    exp = powerloss.ResumePowerloss()
    exp.check(Options(only="resume"))
    assert "resume_powerloss skipped: it needs a FUSE file system (no /dev/fuse" in capsys.readouterr().out
    assert exp.cells("quick", 1, Options()) == []


@pytest.mark.planted("runners.resume.powerloss:free_mount_point", "if point.is_dir() and any(point.iterdir()):",
                     "if False:")
def test_a_mount_point_holding_files_is_refused_in_one_line(tmp_path):
    """A mount point in use because it holds files: refused in one line naming it, before anything is mounted over
    it (a cell's failure: the run stops, exit 2).

    Bug class: a lazy file system mounted over a folder that holds files, hiding them for the cell."""
    point = tmp_path / "cell" / f"{powerloss.lazyfs.PREFIX}mnt"
    point.mkdir(parents=True)
    (point / "someone-elses-file").write_text("x")
    with pytest.raises(DriftlabError, match=r"^resume_powerloss: the mount point .* is in use \(it holds files\)") as e:
        powerloss.run_one("langgraph", "after_done", True, "power_loss", tmp_path / "cell")
    assert "\n" not in str(e.value) and (point / "someone-elses-file").read_text() == "x"


def test_a_mount_point_with_a_file_system_mounted_is_refused_in_one_line(tmp_path):
    """A mount point in use because a file system is mounted there (here another lazy file system): refused in one
    line naming it, the other mount left alone (its control socket too)."""
    import os

    if powerloss.lazyfs.requirements() or os.geteuid() != 0:
        pytest.skip("needs FUSE to mount something at the point")
    point = tmp_path / "cell" / f"{powerloss.lazyfs.PREFIX}mnt"
    other = powerloss.lazyfs.Mount(tmp_path / "other-backing", point).start()
    try:
        with pytest.raises(DriftlabError, match=r"^resume_powerloss: the mount point .* is in use \(a file system is "
                                                r"mounted there\)"):
            powerloss.run_one("pydantic-graph@1.107", "after_done", True, "power_loss", tmp_path / "cell")
        other.send("ping")  # still served
    finally:
        other.stop()
