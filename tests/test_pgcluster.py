"""The nemesis's private PostgreSQL cluster (``runners/resume/pgcluster.py``): its template and its store crash.

A run's workers copy one initdb'd template (a half-made one, left by a maker
that was killed, is made again), and the store-crash fault leaves no lock
file that names the dead postmaster, so the restart runs PostgreSQL's crash
recovery at once instead of waiting for this machine's init to reap the
dead process.  Needs root and PostgreSQL 15's binaries: skipped otherwise,
failed instead with ``DRIFTLAB_REQUIRE_NETNS=1`` (set by ``.ci/run``).
"""
from __future__ import annotations

import shutil

import psycopg
import pytest

from runners.resume import pgcluster
from test_nemesis import netns, reachable  # noqa: F401 - root and PostgreSQL 15, or skip; a folder postgres enters


@pytest.fixture
def scratch(netns, reachable):  # noqa: F811
    return reachable


def _answers(cluster: pgcluster.Cluster) -> int:
    with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
        return conn.execute("SELECT 1").fetchone()[0]


@pytest.mark.planted("runners.resume.pgcluster:template", "    if made.exists():\n        return folder",
                     "    if folder.exists():\n        return folder")  # a half-made template taken as made
def test_a_half_made_template_is_made_again(scratch):
    """A template folder without its ``.made`` mark (its maker was killed mid-initdb) is made again, and a cluster
    copied from it starts (planted bug: the folder's existence taken for a finished template, so every cell of the
    run copies a broken data folder and the lab stops)."""
    for left in scratch.glob(f"{pgcluster.PREFIX}template*"):  # a rerun starts from a half-made template again
        shutil.rmtree(left) if left.is_dir() else left.unlink()
    (scratch / f"{pgcluster.PREFIX}template").mkdir()
    with pgcluster.Cluster(scratch, ["127.0.0.1"], "half") as cluster:
        assert _answers(cluster) == 1


@pytest.mark.planted("runners.resume.pgcluster:Cluster.crash", '(self.folder / "postmaster.pid").unlink(missing_ok=True)',
                     "pass")  # the dead postmaster's lock file kept
def test_a_store_crash_leaves_no_lock_file_naming_the_dead_postmaster_and_the_restart_recovers(scratch):
    """After the SIGKILL of the postmaster, no lock file names it (planted bug: the stale ``postmaster.pid`` kept,
    so every restart fails until the machine's init reaps the dead process); the restart runs PostgreSQL's crash
    recovery and the cluster answers again."""
    with pgcluster.Cluster(scratch, ["127.0.0.1"], "crash") as cluster:
        assert _answers(cluster) == 1
        dead = cluster.crash()
        assert not (cluster.folder / "postmaster.pid").exists()
        cluster.restart()
        assert cluster.postmaster() != dead and cluster.recovered() and _answers(cluster) == 1
        folder = cluster.folder
    assert not folder.exists() and not pgcluster._postgres_of(folder)  # close stopped it and removed its folder


@pytest.mark.planted("runners.resume.pgcluster:leftovers", "if not _owner_alive(str(f))}", "if False}")
def test_a_killed_runs_cluster_folder_in_memory_is_swept(scratch):
    """A cell's cluster lives in memory (``/dev/shm``) when there is room, and its folder is removed by the next
    run's sweep once its owner is gone, even with no postmaster left in it; a live owner's folder is left alone.
    Planted bug this catches: the sweep finding only running postmasters, so a killed run's folders would hold
    memory until the machine restarts."""
    import os

    if pgcluster.home(scratch) != pgcluster.MEMORY:
        pytest.skip(f"no room in {pgcluster.MEMORY} on this machine: cells' clusters go to the scratch folder")
    gone = os.fork()
    if gone == 0:
        os._exit(0)
    os.waitpid(gone, 0)
    dead = pgcluster.MEMORY / f"{pgcluster.PREFIX}{gone}-left"
    live = pgcluster.MEMORY / f"{pgcluster.PREFIX}{os.getpid()}-live"
    try:
        for folder in (dead, live):
            (folder / "base").mkdir(parents=True)
        assert str(dead) in pgcluster.sweep()
        assert not dead.exists() and live.exists()
    finally:
        for folder in (dead, live):
            shutil.rmtree(folder, ignore_errors=True)
