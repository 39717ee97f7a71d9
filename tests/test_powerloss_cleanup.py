"""No mount, FUSE server or cell scratch folder of ``resume_powerloss`` outlives a Ctrl-C or a SIGKILL of the lab
(issue 31): the real ``driftlab reproduce`` in a subprocess, stopped once a cell's lazy file system is mounted.

The lab's worker dies with the lab (a Ctrl-C ends the workers; a SIGKILL of the main process kills them through
their parent-death signal); the lazy file system's server watches the worker that mounted it and, once it is gone,
unmounts, removes the cell's scratch folder and exits.  Were the server killed too, the next run, before its first
cell, unmounts what is left and removes the cell's folder, naming both in one line.

Needs FUSE; skipped, saying why, where it is missing, unless ``DRIFTLAB_REQUIRE_FUSE=1`` (CI).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from runners.experiment import Options
from runners.resume import lazyfs
from runners.resume.powerloss import ResumePowerloss

#: one xdist worker for every test that mounts the lazy file system: a run removes, before its first cell,
#: machine-wide, any mount whose server is gone (lazyfs.leftovers), so this module's tests, which leave one on
#: purpose, must never run beside another that starts a run (a refused request removes nothing)
pytestmark = pytest.mark.xdist_group("powerloss")

REPO = Path(__file__).resolve().parent.parent
WATCH = ("runners.resume.lazyfs:Mount.start", '"DRIFTLAB_LAZYFS_PARENT": str(os.getpid())',
         '"DRIFTLAB_LAZYFS_PARENT": ""')  # the server told no parent to watch: it outlives the lab


@pytest.fixture
def fuse():
    missing = lazyfs.requirements()
    if missing:
        if os.environ.get("DRIFTLAB_REQUIRE_FUSE") == "1":
            pytest.fail(f"FUSE needed and DRIFTLAB_REQUIRE_FUSE=1: {missing}")
        pytest.skip(f"the lazy file system needs FUSE: {missing}")


def _mounts(out: Path) -> list[str]:
    points = [ln.split()[1] for ln in Path("/proc/mounts").read_text().splitlines() if len(ln.split()) > 2]
    return [p for p in points if p.startswith(str(out)) and lazyfs.PREFIX in p]


def _servers(out: Path) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        line = " ".join(p.info["cmdline"] or [])
        if "runners.resume.lazyfs serve" in line and str(out) in line:
            found.append(p)
    return found


def _cells(out: Path) -> list[Path]:
    return sorted((out / "scratch").glob("powerloss-*"))


def _wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def _unmounting(group: int) -> bool:
    """A ``fusermount3`` of the lab's process group is running (a worker unmounting its cell's file system)."""
    for p in psutil.process_iter(["name"]):
        try:
            if p.info["name"] == "fusermount3" and os.getpgid(p.pid) == group:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def _hold_with_a_mount(lab: subprocess.Popen, out: Path, timeout: float) -> bool:
    """SIGSTOP the lab's process group at a moment a cell's lazy file system is mounted (its server, in a session of
    its own, is not stopped): a cell is short, and one that unmounted between the look and the kill left nothing to
    kill (a CI run saw it).  True once held with a mount up and no unmount of the worker's under way: a
    ``fusermount3 -u`` it had started (stopped with it, or inside its system call) would complete after the hold
    or after the SIGCONT, and a CI run saw the mount gone right after a hold."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _mounts(out) and _servers(out):
            os.killpg(lab.pid, signal.SIGSTOP)
            time.sleep(0.3)
            if _mounts(out) and _servers(out) and not _unmounting(lab.pid):
                return True
            os.killpg(lab.pid, signal.SIGCONT)
        time.sleep(0.05)
    return False


def _left(out: Path) -> tuple[list, list, list]:
    return _mounts(out), [p.pid for p in _servers(out)], _cells(out)


@pytest.mark.parametrize("how", [
    pytest.param("ctrl-c", marks=pytest.mark.planted(
        "runners.resume.powerloss:run_one", 'STRICT.get(fault, ""), scratch=scratch) as fs:',
        'STRICT.get(fault, "")) as fs:')),  # the cell's folder not handed to the server: left behind
    pytest.param("sigkill", marks=pytest.mark.planted(*WATCH)),
    pytest.param("sigkill-server-too", marks=pytest.mark.planted(
        "runners.resume.powerloss:ResumePowerloss.prepare", 'lazyfs.clean_up(left, str(cell) if ours else "")',
        'lazyfs.clean_up(left, "")')),  # the next run unmounts the leftover but keeps the killed cell's folder
])
def test_a_stopped_lab_leaves_no_mount_server_or_scratch_folder(fuse, tmp_path, capsys, how):
    """The lab (``--only resume_powerloss --profile quick --mechanisms langgraph``) stopped while a cell's lazy file
    system is mounted: by a Ctrl-C (SIGINT to its process group, as a terminal sends it), by a SIGKILL of its main
    process alone (its workers and the server must notice), or by a SIGKILL of the main process and the server
    (nothing of the run can clean up: the next run must, before its first cell, naming the mount and the cell's
    folder in one line).  Within a bounded wait no mount, server or cell scratch folder of the run is left.

    Bug class: a lazy file system, its FUSE server or a cell's scratch folder outliving an interrupted or killed lab
    (a mount the user must find and fusermount3 -u, a server that runs until reboot, folders piling up)."""
    out = tmp_path / "run"
    lab = subprocess.Popen([sys.executable, "-m", "runners.cli", "reproduce", "--only", "resume_powerloss", "--profile",
                            "quick", "--mechanisms", "langgraph", "--jobs", "1", "--out", str(out), "--quiet"],
                           cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        assert _wait_for(lambda: _mounts(out) and _servers(out), 90), "no cell mounted its lazy file system"
        if how == "ctrl-c":
            os.killpg(lab.pid, signal.SIGINT)
            assert lab.wait(timeout=30) == 130
        elif how == "sigkill":
            os.kill(lab.pid, signal.SIGKILL)
            lab.wait(timeout=30)
        else:  # the server first, or its watch would see the lab gone and clean up; held while a mount is up
            assert _hold_with_a_mount(lab, out, 90), "no cell held while its lazy file system was mounted"
            point = _mounts(out)[0]
            cell = Path(point).parent
            for s in _servers(out):
                s.kill()
            os.kill(lab.pid, signal.SIGKILL)
            os.killpg(lab.pid, signal.SIGCONT)
            lab.wait(timeout=30)
        if how != "sigkill-server-too":
            assert _wait_for(lambda: _left(out) == ([], [], []), 15), f"left (mounts, servers, cells): {_left(out)}"
        else:
            assert _wait_for(lambda: not _servers(out), 15), "a SIGKILLed server still alive"
            assert _mounts(out) == [point], _mounts(out)
            capsys.readouterr()
        ResumePowerloss().prepare(Options(mechanisms=("langgraph",)))  # the next run, before its first cell
        said = [ln for ln in capsys.readouterr().out.splitlines() if str(out) in ln]
        if how == "sigkill-server-too":
            assert said == [f"resume: removed a lazy file system a killed run left mounted at {point}, and its cell's "
                            f"scratch folder {cell}"], said
        else:
            assert said == [], said  # nothing was left for it
        assert _left(out) == ([], [], []), f"left after the next run's clean-up (mounts, servers, cells): {_left(out)}"
    finally:  # whatever a failing (or planted) run left: the test's own processes and mounts never outlive it
        try:
            os.killpg(lab.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        lab.wait()
        lab.stderr.close()
        for s in _servers(out):
            s.kill()
        for point in _mounts(out):
            lazyfs.unmount(point)
