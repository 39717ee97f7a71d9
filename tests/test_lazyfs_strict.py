"""The lazy file system's strict mode: a create, rename or unlink is durable only after its folder's fsync (issue 31).

POSIX promises a new name, a replaced name or a removed one across a crash only once the folder holding it is
fsynced; LazyFS's default model (``runners.resume.lazyfs.LazyFS``) makes every metadata operation durable at once.
The known answers below are POSIX's: the classic "write a temporary file, fsync it, rename it over the target"
loses the rename without an fsync of the folder, and keeps it with one.  They run on the file system's operations
in this process (each with the planted bug it must fail on), and once through a real FUSE mount, where the kernel
must carry a folder's fsync down to the file system.
"""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from runners.resume import lazyfs
from runners.resume.lazyfs import LazyFS, StrictLazyFS

#: one xdist worker for the tests that mount the lazy file system (why: tests/test_powerloss_cleanup.py)
pytestmark = pytest.mark.xdist_group("powerloss")

S = "runners.resume.lazyfs:StrictLazyFS."


def put(fs: LazyFS, name: str, data: bytes, sync: bool = True) -> None:
    """Create ``name`` (or truncate it), write ``data``, fsync it if ``sync``, close it."""
    fh = fs.create(name, 0o644)
    fs.write(name, data, 0, fh)
    if sync:
        fs.fsync(name, 0, fh)
    fs.release(name, fh)


def after_power_loss(cls, steps, tmp: Path) -> dict[str, bytes]:
    """The backing folder's files after ``steps`` (callables of the file system) and a power loss."""
    backing = tmp / cls.__name__
    backing.mkdir()
    fs = cls(str(backing))
    for step in steps:
        step(fs)
    fs.power_loss()
    return {p.name: p.read_bytes() for p in sorted(backing.iterdir())}


def dirsync(fs: LazyFS) -> None:
    fs.fsyncdir("/", 0, 0)


CREATE = [lambda fs: put(fs, "/a", b"new")]
REPLACE = [lambda fs: put(fs, "/t", b"old"), dirsync, lambda fs: put(fs, "/t.tmp", b"new"),
           lambda fs: fs.rename("/t.tmp", "/t")]
UNLINK = [lambda fs: put(fs, "/a", b"old"), dirsync, lambda fs: fs.unlink("/a")]


@pytest.mark.parametrize("steps,strict,default", [
    pytest.param(CREATE, {}, {"a": b"new"}, id="create-fsync-no-dirsync", marks=pytest.mark.planted(
        S + "create", 'self.pending.append(({self._folder(path)}, "create", (path, kept)))', "pass")),
    pytest.param(CREATE + [dirsync], {"a": b"new"}, {"a": b"new"}, id="create-fsync-dirsync", marks=pytest.mark.planted(
        S + "fsyncdir", "folders.discard(folder)", "pass")),
    pytest.param(REPLACE, {"t": b"old"}, {"t": b"new"}, id="replace-no-dirsync",  # the temporary's create too
                 marks=pytest.mark.planted(S + "rename", 'self.pending.append(({self._folder(old), self._folder(new)}, '
                                                         '"rename", (old, new, kept)))', "pass")),
    pytest.param(REPLACE + [dirsync], {"t": b"new"}, {"t": b"new"}, id="replace-dirsync"),
    pytest.param(UNLINK, {"a": b"old"}, {}, id="unlink-no-dirsync", marks=pytest.mark.planted(
        S + "unlink", 'self.pending.append(({self._folder(path)}, "unlink", (path, kept)))', "pass")),
    pytest.param(UNLINK + [dirsync], {}, {}, id="unlink-dirsync"),
    pytest.param([lambda fs: put(fs, "/a", b"v1"), dirsync, lambda fs: put(fs, "/a", b"v2")],
                 {"a": b"v1"}, {"a": b"v2"}, id="recreate-no-dirsync", marks=pytest.mark.planted(
                     S + "create", "kept = self._aside(path) if existed else None", "kept = None")),
])
def test_known_answers_of_posix_metadata(steps, strict, default, tmp_path):
    """Bug classes (each row with its plant): a create, rename or unlink that a power loss keeps although its folder
    was never fsynced (the strict mode then reads like the default); a folder's fsync that makes nothing durable; a
    re-created file whose old contents are not brought back.  The default mode keeps every name at once."""
    assert after_power_loss(StrictLazyFS, steps, tmp_path) == strict
    assert after_power_loss(LazyFS, steps, tmp_path) == default


def test_flush_makes_metadata_durable_and_a_run_equals_a_plain_folder(tmp_path):
    """After ``flush`` (what the OS does in the background) a power loss changes nothing, and the backing folder
    holds what the same operations leave in a plain folder; the stash beside it is empty."""
    rng = random.Random(7)
    plain, backing = tmp_path / "plain", tmp_path / "backing"
    plain.mkdir()
    backing.mkdir()
    fs = StrictLazyFS(str(backing))
    for _ in range(200):
        name, op = rng.choice("abcd"), rng.random()
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5000)))
        if op < 0.5:
            put(fs, f"/{name}", data, sync=rng.random() < 0.5)
            (plain / name).write_bytes(data)
        elif op < 0.75 and (plain / name).exists():
            other = rng.choice("abcd")
            fs.rename(f"/{name}", f"/{other}")
            os.rename(plain / name, plain / other)
        elif op < 0.9 and (plain / name).exists():
            fs.unlink(f"/{name}")
            os.unlink(plain / name)
        else:
            dirsync(fs)
    fs.flush()
    fs.power_loss()
    snap = lambda root: {p.name: p.read_bytes() for p in sorted(root.iterdir())}  # noqa: E731
    assert snap(backing) == snap(plain)
    assert not list(Path(fs.stash).glob("*")) if Path(fs.stash).exists() else True


def test_through_fuse_a_folders_fsync_reaches_the_file_system(tmp_path):
    """Through a real mount: a file created and fsynced is gone after a power loss unless its folder was fsynced
    (the kernel carries ``fsync`` of a folder's descriptor down as FUSE's fsyncdir)."""
    missing = lazyfs.requirements() or ("" if os.geteuid() == 0 else "not root")
    if missing:
        if os.environ.get("DRIFTLAB_REQUIRE_FUSE") == "1":
            pytest.fail(f"FUSE needed and DRIFTLAB_REQUIRE_FUSE=1: {missing}")
        pytest.skip(f"the lazy file system needs FUSE: {missing}")
    m = lazyfs.Mount(tmp_path / "backing", tmp_path / f"{lazyfs.PREFIX}strict", "runners.resume.lazyfs:StrictLazyFS")
    m.start()
    try:
        for name, sync_folder in (("lost", False), ("kept", True)):  # one at a time: the folder's fsync covers all
            fd = os.open(m.point / name, os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, b"data")
            os.fsync(fd)
            os.close(fd)
            if sync_folder:
                dfd = os.open(m.point, os.O_RDONLY)
                os.fsync(dfd)
                os.close(dfd)
            m.send("power_loss")
            m.remount()
        assert sorted(p.name for p in m.point.iterdir()) == ["kept"]
        assert (m.point / "kept").read_bytes() == b"data"
    finally:
        m.stop()
