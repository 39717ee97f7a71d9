"""Where FUSE is missing, resume_powerloss says what it needs in one line: refused when named, skipped otherwise.

Bug classes: a missing /dev/fuse (fusermount3, libfuse3, root or a setuid-root fusermount3) that stops a whole
quick profile (or, worse, reads as a clean power-loss table); an explicit ``--only resume_powerloss`` that exits 0
with nothing measured; a mount point in use mounted over.
"""
from __future__ import annotations

import ctypes.util
import os
import shutil

import pytest

from runners.experiment import DriftlabError, Options
from runners.resume import lazyfs, powerloss

#: one xdist worker for the tests that mount the lazy file system (why: tests/test_powerloss_cleanup.py)
pytestmark = pytest.mark.xdist_group("powerloss")

REQ = "runners.resume.lazyfs:requirements"


def _lacking(monkeypatch, tmp_path, what: str) -> None:
    """This machine as one that has everything FUSE needs but ``what``: the real ``requirements()`` then decides
    (a fusermount3 that is ours, not setuid; root, except in the ``not root`` row)."""
    helper = tmp_path / "fusermount3"
    helper.write_text("#!/bin/sh\n")
    helper.chmod(0o755)  # owned by whoever runs the tests, no setuid bit
    exists, which, find = os.path.exists, shutil.which, ctypes.util.find_library
    monkeypatch.setattr(os.path, "exists", lambda p: False if p == "/dev/fuse" and what == "/dev/fuse" else exists(p))
    monkeypatch.setattr(shutil, "which", lambda n, *a, **k: (None if what == "fusermount3" else str(helper))
                        if n == "fusermount3" else which(n, *a, **k))
    monkeypatch.setattr(ctypes.util, "find_library", lambda n: None if n == "fuse3" and what == "libfuse3" else
                        "libfuse3.so.3" if n == "fuse3" else find(n))
    monkeypatch.setattr(os, "geteuid", lambda: 1000 if what == "root" else 0)


@pytest.mark.parametrize("what, says", [  # what is missing, the line that says so, the bug that lets it through
    pytest.param("/dev/fuse", "no /dev/fuse on this machine", marks=pytest.mark.planted(
        REQ, 'if not os.path.exists("/dev/fuse"):', "if False:"), id="no-dev-fuse"),
    pytest.param("fusermount3", "fusermount3 not found", marks=pytest.mark.planted(
        REQ, "if helper is None:", "if False:"), id="no-fusermount3"),
    pytest.param("libfuse3", "libfuse3 not found", marks=pytest.mark.planted(
        REQ, 'if ctypes.util.find_library("fuse3") is None:', "if False:"), id="no-libfuse3"),
    pytest.param("root", "not root, and fusermount3 is not setuid root (mounting FUSE needs one of them)",
                 marks=pytest.mark.planted(REQ, "if os.geteuid() != 0 and not _setuid_root(helper):", "if False:"),
                 id="not-root"),
])
def test_what_fuse_lacks_is_refused_in_one_line_when_named_and_skipped_in_a_selection(monkeypatch, tmp_path, capsys,
                                                                                       what, says):
    """One thing FUSE needs missing (no /dev/fuse, no fusermount3, no libfuse3, neither root nor a setuid-root
    fusermount3), through the real ``requirements()``: ``--only resume_powerloss`` is a DriftlabError of one line
    naming it (the CLI prints it and exits 2: ``runners/cli.py``'s ``main``), and in a larger selection the
    experiment is skipped with that line as its note and no cells.

    Bug class: a machine lacking one of them let through (a quick profile stopped by a mount that fails mid-run, or
    an explicit ``--only resume_powerloss`` that fails in a cell instead of saying what it needs)."""
    _lacking(monkeypatch, tmp_path, what)
    exp = powerloss.ResumePowerloss()
    with pytest.raises(DriftlabError) as e:
        exp.check(Options(only="resume_powerloss"))
    assert str(e.value).startswith(f"resume_powerloss needs a FUSE file system: {says}") and "\n" not in str(e.value)
    exp.check(Options(only="resume"))
    assert f"resume_powerloss skipped: it needs a FUSE file system ({says}" in capsys.readouterr().out
    assert exp.cells("quick", 1, Options()) == []


def test_not_root_with_a_setuid_root_fusermount3_is_let_through(monkeypatch, tmp_path):
    """A process that is not root mounts FUSE through a setuid-root fusermount3: that machine is not refused."""
    _lacking(monkeypatch, tmp_path, "root")
    monkeypatch.setattr(lazyfs, "_setuid_root", lambda path: True)
    assert lazyfs.requirements() == ""


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
    if powerloss.lazyfs.requirements():
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
