"""The lazy file system is checked like the checkers, and the power-loss cells keep the guard's promise (issue 31).

Real FUSE mounts (libfuse 3, /dev/fuse), real SQLite through them, real SIGKILLs; planted file systems
(``tests/lazyfs_planted.py``) that each test must catch.  Skipped, saying why, where FUSE is missing, unless
``DRIFTLAB_REQUIRE_FUSE=1`` (CI), which turns the skip into a failure.
"""
from __future__ import annotations

import os
import random
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from runners.processes import fork_start, kill
from runners.resume import lazyfs

#: one xdist worker for the tests that mount the lazy file system (why: tests/test_powerloss_cleanup.py)
pytestmark = pytest.mark.xdist_group("powerloss")

REPO = Path(__file__).resolve().parent.parent
PLANTED_ENV = {**os.environ, "PYTHONPATH": str(REPO / "tests")}


@pytest.fixture(autouse=True)
def fuse():
    missing = lazyfs.requirements() or ("" if os.geteuid() == 0 else "not root")
    if missing:
        if os.environ.get("DRIFTLAB_REQUIRE_FUSE") == "1":
            pytest.fail(f"FUSE needed and DRIFTLAB_REQUIRE_FUSE=1: {missing}")
        pytest.skip(f"the lazy file system needs FUSE: {missing}")


def mount(tmp: Path, ops: str = "") -> lazyfs.Mount:
    return lazyfs.Mount(tmp / "backing", tmp / f"{lazyfs.PREFIX}m", ops, PLANTED_ENV if ops else None).start()


# ---------------------------------------------------------------------------------------------- differential
def play(root: Path, rng: random.Random, steps: int, fsync: bool = True) -> None:
    """A seeded sequence of writes, truncations, renames, fsyncs and unlinks on files a..d under ``root``."""
    for _ in range(steps):
        name = root / rng.choice("abcd")
        op = rng.random()
        if op < 0.55:
            fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o644)
            os.pwrite(fd, bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9000))), rng.randrange(0, 20000))
            if fsync and rng.random() < 0.2:
                os.fsync(fd)
            os.close(fd)
        elif op < 0.7 and name.exists():
            os.truncate(name, rng.randrange(0, 15000))
        elif op < 0.85 and name.exists():
            os.rename(name, root / rng.choice("abcd"))
        elif name.exists():
            os.unlink(name)


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


class Direct:
    """The file system's operations called in this process, as FUSE would call them (no kernel, no cache)."""

    def __init__(self, fs):
        self.fs = fs

    def pwrite(self, name: str, data: bytes, offset: int, sync: bool) -> None:
        path = "/" + name
        fh = self.fs.open(path, os.O_RDWR) if os.path.exists(self.fs._full(path)) else self.fs.create(path, 0o644)
        self.fs.write(path, data, offset, fh)
        if sync:
            self.fs.fsync(path, 0, fh)
        self.fs.release(path, fh)

    def read(self, name: str) -> bytes:
        fh = self.fs.open("/" + name, os.O_RDONLY)
        try:
            return self.fs.read("/" + name, 1 << 20, 0, fh)
        finally:
            self.fs.release("/" + name, fh)


def differential(plain: Path, fs, steps: int, seed: int) -> str:
    """The same seeded operations on a plain folder and on ``fs``; the first divergence, or ""."""
    rng, direct = random.Random(seed), Direct(fs)
    for step in range(steps):
        name = rng.choice("abcd")
        op, target = rng.random(), plain / name
        if op < 0.55:
            data, offset, sync = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9000))), \
                rng.randrange(0, 20000), rng.random() < 0.2
            fd = os.open(target, os.O_RDWR | os.O_CREAT, 0o644)
            os.pwrite(fd, data, offset)
            os.close(fd)
            direct.pwrite(name, data, offset, sync)
        elif op < 0.7 and target.exists():
            length = rng.randrange(0, 15000)
            os.truncate(target, length)
            fs.truncate("/" + name, length)
        elif op < 0.85 and target.exists():
            other = rng.choice("abcd")
            os.rename(target, plain / other)
            fs.rename("/" + name, "/" + other)
        elif target.exists():
            os.unlink(target)
            fs.unlink("/" + name)
        for p in sorted(plain.iterdir()):
            if direct.read(p.name) != p.read_bytes():
                return f"step {step}: {p.name} reads differently"
    fs.flush()
    backing = Path(fs.root)
    for p in sorted(plain.iterdir()):
        if (backing / p.name).read_bytes() != p.read_bytes():
            return f"after flush: {p.name} differs on disk"
    return ""


@pytest.mark.parametrize("planted", [None, "RenameDropsShadow"], ids=["lazyfs", "planted-rename-drops-the-shadow"])
def test_differential_against_a_plain_folder(tmp_path, planted):
    """The same seeded writes, truncations, renames, fsyncs and unlinks on the file system's operations and on a
    plain folder: every read agrees after every step, and after ``flush`` the backing folder is the plain one.

    Planted bug caught: a rename that drops the moved file's unsynced data (the planted file system must diverge)."""
    import lazyfs_planted

    cls = getattr(lazyfs_planted, planted) if planted else lazyfs.LazyFS
    found = []
    for seed in range(3):
        plain, backing = tmp_path / f"plain{seed}", tmp_path / f"backing{seed}"
        plain.mkdir()
        backing.mkdir()
        found.append(differential(plain, cls(str(backing)), 80, seed))
    assert any(found) is bool(planted), found


@pytest.mark.parametrize("planted", [None, "TruncateNeverShrinks"], ids=["lazyfs", "planted-truncate-never-shrinks"])
def test_through_fuse_a_flushed_run_equals_a_plain_folder(tmp_path, planted):
    """The same seeded operations through the mounted file system (kernel, page cache and all) and on a plain
    folder: after each seeded round the mount reads what the plain folder holds (a later round may erase an earlier
    divergence), and after ``flush`` and a remount the mount and its backing folder hold what the plain folder holds.

    Bug class caught: an operation mfusepy reaches that the file system mishandles (an open flag, a create of an
    existing name, a truncate through setattr) that the in-process differential above does not exercise.  Planted
    (tests/lazyfs_planted.py, served as the mount's file system: the mount runs ``-m runners.resume.lazyfs``, whose
    own module a marker's plant does not reach): a truncate that never makes a file shorter, which must diverge."""
    plain = tmp_path / "plain"
    plain.mkdir()
    m = mount(tmp_path, f"lazyfs_planted:{planted}" if planted else "")
    same = True
    try:
        for seed in range(3):
            play(plain, random.Random(seed), 60)
            play(m.point, random.Random(seed), 60)
            same = same and snapshot(m.point) == snapshot(plain)
        m.send("flush")
        m.remount()
        same = same and snapshot(m.point) == snapshot(plain) and snapshot(m.backing) == snapshot(plain)
    finally:
        m.stop()
    assert same is (planted is None), "the planted file system did not diverge" if planted else "the mount diverged"


def check_unsynced(tmp: Path, ops: str = "") -> None:
    """Write without fsync, lose power: gone; write with fsync: kept; torn keeps a 4 KiB-aligned prefix."""
    m = mount(tmp, ops)
    try:
        (m.point / "kept").write_bytes(b"k" * 100)
        fd = os.open(m.point / "kept", os.O_RDWR)
        os.fsync(fd)
        os.close(fd)
        (m.point / "lost").write_bytes(b"l" * 100)
        assert (m.point / "lost").read_bytes() == b"l" * 100 and (m.backing / "lost").read_bytes() == b""
        m.send("power_loss")
        m.remount()
        assert (m.point / "kept").read_bytes() == b"k" * 100 and (m.point / "lost").read_bytes() == b""
        fd = os.open(m.point / "torn", os.O_RDWR | os.O_CREAT, 0o644)
        os.pwrite(fd, b"t" * 10000, 0)
        os.close(fd)
        m.send("torn")
        m.remount()
        assert (m.point / "torn").read_bytes() == b"t" * 8192  # the write's prefix to its last 4 KiB boundary
    finally:
        m.stop()


def test_unsynced_bytes_are_lost_and_synced_ones_kept(tmp_path):
    """Write without fsync, lose power: gone; write with fsync: kept; torn keeps a 4 KiB-aligned prefix.

    Planted bugs caught (each a file system of tests/lazyfs_planted.py, run through the same check): a file system
    that writes through (nothing would be lost), a power loss that keeps the shadow, a torn write that keeps
    everything."""
    check_unsynced(tmp_path / "real")
    for planted in ("WritesThrough", "KeepsShadow", "TornKeepsAll"):
        with pytest.raises(AssertionError):
            check_unsynced(tmp_path / planted, f"lazyfs_planted:{planted}")


# ---------------------------------------------------------------------------------------------- SQLite, known answers
#: PRAGMA takes no bound parameters: each setting is a whole literal statement, picked by name
PRAGMAS = {"WAL": "PRAGMA journal_mode = WAL", "DELETE": "PRAGMA journal_mode = DELETE",
           "FULL": "PRAGMA synchronous = FULL", "NORMAL": "PRAGMA synchronous = NORMAL",
           "EXTRA": "PRAGMA synchronous = EXTRA"}
STRICT = "runners.resume.lazyfs:StrictLazyFS"


def _configure(conn: sqlite3.Connection, journal: str, sync: str) -> None:
    conn.execute(PRAGMAS[journal])
    conn.execute(PRAGMAS[sync])


def _commit_then_wait(db: str, journal: str, sync: str, fd: int) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    _configure(conn, journal, sync)
    conn.execute("INSERT INTO t VALUES (2)")  # committed (autocommit): what the power loss may or may not keep
    os.write(fd, b"committed\n")
    time.sleep(3600)


@pytest.mark.parametrize("journal, sync, ops, survives", [
    ("WAL", "FULL", "", True),
    ("WAL", "NORMAL", "", False),
    ("DELETE", "FULL", "", True),
    ("WAL", "FULL", "lazyfs_planted:NoopFsync", False),
    ("WAL", "FULL", STRICT, True),
    ("DELETE", "FULL", STRICT, False),
    ("DELETE", "EXTRA", STRICT, True),
], ids=["wal-full", "wal-normal", "delete-full", "planted-fsync-syncs-nothing", "posix-wal-full", "posix-delete-full",
        "posix-delete-extra"])
def test_sqlite_through_the_lazy_fs_agrees_with_its_documentation(tmp_path, journal, sync, ops, survives):
    """SQLite's documented power-loss behaviour, through the lazy file system: with synchronous=FULL a committed
    transaction survives (WAL or rollback journal); in WAL mode with synchronous=NORMAL the newest commits may roll
    back (here: always, since nothing forces the WAL to disk); the database opens and passes integrity_check.
    On the strict (POSIX) mode, where an unlink is durable only after its folder's fsync: a rollback-journal commit
    at FULL may roll back, because the commit is the journal's unlink and only EXTRA fsyncs the folder after it
    (SQLite's documentation of synchronous=EXTRA says exactly this); EXTRA keeps it; WAL at FULL keeps it.

    Planted bug caught: an fsync that syncs nothing (FULL's commit would be lost: the row below expects it)."""
    m = mount(tmp_path, ops)
    try:
        db = str(m.point / "t.db")
        conn = sqlite3.connect(db, isolation_level=None)
        _configure(conn, journal, sync)
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.close()
        m.send("flush")  # row 1 durable, as a run parked long ago
        r, w = os.pipe()
        pid = fork_start(_commit_then_wait, (db, journal, sync, w))
        os.close(w)
        assert os.read(r, 64) == b"committed\n"
        os.close(r)
        m.send("power_loss")
        kill(pid)
        m.remount()
        conn = sqlite3.connect(db)
        rows = [x for (x,) in conn.execute("SELECT x FROM t ORDER BY x")]
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
    finally:
        m.stop()
    assert rows == ([1, 2] if survives else [1])


# ---------------------------------------------------------------------------------------------- clean-up, cells
@pytest.mark.planted("runners.resume.powerloss:ResumePowerloss.prepare", "for left in lazyfs.leftovers():",
                     "for left in []:")
@pytest.mark.planted("runners.resume.powerloss:ResumePowerloss.check",
                     'if self.skipped(options, self.missing(), "a FUSE file system"):',
                     'if self.prepare(options) or self.skipped(options, self.missing(), "a FUSE file system"):')
def test_a_killed_servers_mount_is_removed_by_the_next_run(tmp_path, capsys):
    """A lazy file system whose server was SIGKILLed stays mounted (a dead endpoint); a request refused in one line
    leaves it; the next run, before its first cell, removes it and names it in one line.

    Planted bugs caught: leftovers never looked for (a killed run's mount would outlive every later run); leftovers
    removed in the experiment's check, which a refused request runs too (a mistyped command would remove what
    another run left, and what a test running beside it left on purpose: a CI run saw that)."""
    from runners.cli import main
    from runners.experiment import Options
    from runners.resume.powerloss import ResumePowerloss

    m = mount(tmp_path)
    os.kill(m.proc.pid, signal.SIGKILL)
    m.proc.wait()
    try:
        assert str(m.point) in lazyfs.leftovers()
        assert main(["reproduce", "--only", "resume_powerloss", "--mechanisms", "langgraph", "--repetitions",
                     "1000000000000", "--out", str(tmp_path / "refused"), "--quiet"]) == 2
        assert str(m.point) in lazyfs.leftovers(), "a refused request removed a killed run's mount"
        ResumePowerloss().prepare(Options())
        assert str(m.point) not in lazyfs.leftovers()
        assert f"removed a lazy file system a killed run left mounted at {m.point}" in capsys.readouterr().out
    finally:  # the test's own mount never outlives it (a planted variant leaves it mounted)
        if str(m.point) in lazyfs.leftovers():
            lazyfs.unmount(str(m.point))
        m.proc = None
        m.stop()


@pytest.mark.parametrize("point", ["after_effect", "after_save_returned", pytest.param(
    "after_done", marks=pytest.mark.planted("runners.resume.powerloss:run_one", "fs.send(SENT[fault])",
                                            "fs.send(FLUSH)"))])
def test_the_guard_keeps_the_approved_effect_to_one_across_a_power_loss(tmp_path, point):
    """driftlab's guard at its stock durability, the power lost at each point of the resume path: the effect fires
    once, the run ends done, acknowledged progress is kept.

    Planted bugs caught: a power-loss cell that loses nothing (the stock tuned row below would not pay twice); a
    judgement that reads the effect count from the lazy file system instead of the world."""
    from runners.resume.powerloss import run_one

    got = run_one("langgraph+guard[stock-durability]", point, True, "power_loss", tmp_path / "cell")
    assert (got["effects"], got["liveness"], got["acknowledged_kept"], got["store_loads"]) == (1, "valid", True, True)
    if point == "after_done":
        tuned = run_one("langgraph", point, True, "power_loss", tmp_path / "tuned")
        assert tuned["store_loads"] and not tuned["acknowledged_kept"], tuned["witness"]  # NORMAL lost the commit


planted_state_lost_ignored = pytest.mark.planted("driftlab_guard.consume_once:ConsumeOnce._guard_state_lost",
                                                 "if not claims:", "if True:")
planted_claims_not_synced = pytest.mark.planted("driftlab_guard.claims:SqliteClaims.__init__",
                                                'self.conn.execute("PRAGMA synchronous = FULL")',
                                                'self.conn.execute("PRAGMA synchronous = NORMAL")')
planted_recovery_not_followed = pytest.mark.planted("runners.resume.powerloss:_restart",
                                                    "if st.state == REFUSED and st.reason.startswith(STATE_LOST_REASON):",
                                                    "if False:")


@pytest.mark.parametrize("flush", [True, pytest.param(False, marks=[
    planted_state_lost_ignored, planted_claims_not_synced, planted_recovery_not_followed])],
    ids=["flushed-at-park", "not-flushed-at-park"])
def test_the_guards_claim_outlives_a_rolled_back_saver_and_names_the_recovery(tmp_path, flush):
    """The guard wrapping the tuned saver (WAL + synchronous=NORMAL), its claims in a SQLite file of their own at
    synchronous=FULL (row ``langgraph+guard[any-saver]``), the power lost a moment after the resume returned done.
    Flushed at park, the saver keeps the park and loses the rest: the resend is refused ``consumed`` and
    invoke(None) finishes the run with the claimed value.  Not flushed, the saver loses the whole thread and the
    claim survives: the resend is refused ``state_lost`` (the witness names it), and the recovery it names (start
    the run again, then invoke(None), which the guard hands the claimed value) ends the run done; the charge fires
    once either way, and the acknowledged progress is honestly lost.

    Bug class caught: a guard that answers "nothing is parked" to a thread whose claim outlived its checkpoints,
    leaving the run stuck forever (the issue's §4).  Planted: the guard's state-lost branch disabled (the resend is
    refused ``no_checkpoint``, invoke(None) has no input); the claim store at synchronous=NORMAL (its stated
    durability not kept: the claim is lost with the checkpoints, nothing names the loss); the lab's restart not
    following the named recovery."""
    from runners.resume.powerloss import run_one

    got = run_one("langgraph+guard[any-saver]", "after_done", flush, "power_loss", tmp_path / "cell")
    assert (got["effects"], got["liveness"], got["store_loads"]) == (1, "valid", True), got["witness"]
    if flush:
        assert "was already consumed by" in got["witness"] and "recover -> done" in got["witness"], got["witness"]
    else:
        assert got["state_after_restart"].startswith("gone") and not got["acknowledged_kept"], got["witness"]
        assert "resend -> refused (state lost: interrupt " in got["witness"], got["witness"]
        assert "start again -> parked; recover -> done" in got["witness"], got["witness"]
    assert "synchronous=NORMAL; claims: journal_mode=wal, synchronous=FULL" in got["configuration"]
