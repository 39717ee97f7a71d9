"""A private PostgreSQL 15 cluster the lab starts itself, so that it may break it (issue 25, ``resume_nemesis``).

The machine's shared PostgreSQL (127.0.0.1:5432) is never a target: every
fault of the nemesis lands on a cluster made here, per cell, from the
machine's own PostgreSQL 15 binaries (``initdb``, ``pg_ctl``; run as the
``postgres`` system user, since they refuse root).  Its data folder is in the
run's scratch folder and is named ``dlnem-pg-<owner pid>-<tag>``; it keeps
PostgreSQL's stock durability (``fsync = on``, ``synchronous_commit = on``).
It listens on the store-side addresses of the hosts' links (TCP, ``trust``
for the lab's 10.213.0.0/16 only) and on a Unix socket in its own folder
(what the lab's driver and the proxies use, so a partition never cuts the
lab's own view of the store).

``initdb`` runs once per run (per scratch folder) into a template folder; each
cell copies it (``cp -a``) and starts it.  The copy lives in memory
(:data:`MEMORY`, ``/dev/shm``, a tmpfs) when there is room, else in the
scratch folder: on this machine kind's disk each file PostgreSQL's folder
holds (about 1,000) costs about 0.4 ms to create and a cell's copy about
0.65 s of CPU, 0.06 s on tmpfs (2026-12-06; one repetition of the DBOS
nemesis cells: 164 core-seconds on disk, 132 in memory).  No fault of the
nemesis reaches below the kernel (a store crash is a SIGKILL of the
postmaster: what it wrote is in the page cache either way, and PostgreSQL
runs its crash recovery from its WAL); power loss is ``resume_powerloss``'s,
on a real disk under lazyfs.  Dynamic shared memory goes in the data folder
(``dynamic_shared_memory_type = mmap``), so a crashed postmaster's segments
leave with it rather than in ``/dev/shm``.  :meth:`Cluster.crash` is the
store-crash fault: SIGKILL of the postmaster (its backends notice and exit),
and :meth:`Cluster.restart` starts it again on the same folder, so
PostgreSQL replays its WAL (crash recovery) before it accepts connections.

:func:`leftovers` finds postmasters of this lab's folders whose owner is gone
(a run that was SIGKILLed); :func:`sweep` stops them.
"""
from __future__ import annotations

import fcntl
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

BIN = Path("/usr/lib/postgresql/15/bin")
PREFIX = "dlnem-pg-"
MEMORY = Path("/dev/shm")  # where cells' clusters go when it is a writable tmpfs with room (module docstring)
MEMORY_FREE = 2 << 30  # bytes it must have free (a cluster is about 40 MB; a run has a few at once)
USER = "postgres"
START_S = 30.0
SOCKET_PATH_MAX = 100  # a Unix socket's path must fit sockaddr_un (107 bytes)


class ClusterError(Exception):
    """The lab's private cluster could not be made, started or stopped (a failure of the lab, never a result)."""


def requirements() -> str:
    """'' when a private cluster can be made here, else the one-line reason."""
    if not (BIN / "initdb").exists():
        return f"PostgreSQL 15's initdb is not at {BIN}"
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return f"no {USER!r} system user to run initdb and pg_ctl as"
    return ""


def _as_postgres(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    proc = subprocess.run(["runuser", "-u", USER, "--", *args], capture_output=True, text=True, timeout=timeout,
                          cwd="/")
    if proc.returncode != 0:
        raise ClusterError(f"{Path(args[0]).name}: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
    return proc


def _chown(path: Path) -> None:
    u = pwd.getpwnam(USER)
    for root, dirs, files in os.walk(path):
        os.chown(root, u.pw_uid, u.pw_gid)
        for f in files:
            os.chown(os.path.join(root, f), u.pw_uid, u.pw_gid)


def template(scratch: Path) -> Path:
    """The scratch folder's initdb'd folder (stock settings, trust for the lab's link range only, owned by the
    postgres user), made once by the first process that asks; the run's other workers wait on its lock.  A maker
    killed halfway leaves no ``.made`` mark, so the next one makes it again."""
    folder, made = scratch / f"{PREFIX}template", scratch / f"{PREFIX}template.made"
    if made.exists():
        return folder
    scratch.mkdir(parents=True, exist_ok=True)
    with open(scratch / f"{PREFIX}template.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if made.exists():
            return folder
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        _chown(folder)
        for parent in folder.parents:  # the postgres user must reach the folder
            if parent == Path("/"):
                break
            mode = parent.stat().st_mode
            if not mode & 0o001:
                raise ClusterError(f"the postgres user cannot enter {parent} (the run's scratch folder's parent)")
        _as_postgres(str(BIN / "initdb"), "-D", str(folder), "-U", USER, "--auth-local=trust", "--auth-host=reject",
                     "-E", "UTF8", "--locale=C", "--no-instructions")
        with open(folder / "pg_hba.conf", "w") as f:
            f.write("local all all trust\nhost all all 10.213.0.0/16 trust\n")
        _chown(folder)
        made.touch()
    return folder


def home(scratch: Path) -> Path:
    """Where a cell's cluster folder goes: :data:`MEMORY` if it is a writable tmpfs with :data:`MEMORY_FREE`
    bytes free, else ``scratch``."""
    try:
        fs = os.statvfs(MEMORY)
        tmpfs = any(line.split()[1] == str(MEMORY) and line.split()[2] == "tmpfs"
                    for line in Path("/proc/mounts").read_text().splitlines())
    except OSError:
        return scratch
    return MEMORY if tmpfs and os.access(MEMORY, os.W_OK) and fs.f_bavail * fs.f_frsize >= MEMORY_FREE else scratch


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """One private cluster (module docstring).  Use as a context manager; ``close`` stops it and removes its folder."""

    def __init__(self, scratch: Path, listen: list[str], tag: str):
        self.folder = home(scratch) / f"{PREFIX}{os.getpid()}-{tag}"
        shutil.rmtree(self.folder, ignore_errors=True)
        copied = subprocess.run(["cp", "-a", str(template(scratch)), str(self.folder)], capture_output=True, text=True)
        if copied.returncode:
            raise ClusterError(f"cp -a of the template: {copied.stderr.strip()}")
        os.chmod(self.folder, 0o700)
        self.port, self.listen = _free_port(), listen
        self.sockets = self.folder  # the Unix socket's folder: a short one of its own if the path would be too long
        if len(str(self.folder / f".s.PGSQL.{self.port}")) > SOCKET_PATH_MAX:
            self.sockets = Path("/tmp") / f"{PREFIX}{os.getpid()}-{tag}s"
            self.sockets.mkdir(exist_ok=True)
            _chown(self.sockets)
        self.crashes = 0
        try:
            self.start()
        except BaseException:  # its folder may be in memory: never left behind by a cluster that did not start
            self.close()
            raise

    @property
    def options(self) -> str:
        return (f"-c listen_addresses={','.join(self.listen)} -p {self.port} -k {self.sockets} -c fsync=on "
                "-c synchronous_commit=on -c max_connections=60 -c shared_buffers=16MB "
                "-c dynamic_shared_memory_type=mmap")

    def dsn(self, host: str | None = None) -> str:
        """A DSN to this cluster: over TCP to ``host`` (a link address or a proxy's), or its Unix socket."""
        where = f"host={host} port={self.port}" if host else f"host={self.sockets} port={self.port}"
        return f"{where} user={USER} dbname=postgres sslmode=disable connect_timeout=10"

    def start(self) -> None:
        deadline = time.monotonic() + START_S
        while True:  # after a crash the killed backends may hold the old shared memory for a moment
            try:
                _as_postgres(str(BIN / "pg_ctl"), "-D", str(self.folder), "-l", str(self.folder / "log"), "-w",
                             "-t", "30", "-o", self.options, "start")
                return
            except ClusterError as exc:
                if time.monotonic() > deadline:
                    tail = (self.folder / "log").read_text(errors="replace").splitlines()[-2:]
                    raise ClusterError(f"the private cluster did not start: {exc} {tail}") from None
                time.sleep(0.2)

    def postmaster(self) -> int:
        return int((self.folder / "postmaster.pid").read_text().split()[0])

    def crash(self) -> int:
        """The store-crash fault: SIGKILL the postmaster; wait until it and its backends are gone.  Its pid."""
        from runners.resume.hosts import _alive

        pid = self.postmaster()
        os.kill(pid, signal.SIGKILL)
        self.crashes += 1
        deadline = time.monotonic() + START_S
        while (_alive(pid) or _postgres_of(self.folder)) and time.monotonic() < deadline:
            time.sleep(0.01)
        if not _alive(pid):
            # its lock files name a dead postmaster, which the restart would take for a live one until the machine's
            # init reaps it (this machine kind's init takes about 1.3 s): PostgreSQL replaces such stale files itself
            # once the pid is gone, and reads whether to run crash recovery from pg_control, not from them
            (self.folder / "postmaster.pid").unlink(missing_ok=True)
            (self.sockets / f".s.PGSQL.{self.port}.lock").unlink(missing_ok=True)
        return pid

    def restart(self) -> None:
        """Start again on the same folder: PostgreSQL runs crash recovery before it accepts connections."""
        self.start()

    def recovered(self) -> bool:
        """The server log says it recovered from a crash (read after :meth:`restart`)."""
        log = (self.folder / "log").read_text(errors="replace")
        return "database system was interrupted" in log or "was not properly shut down" in log

    def close(self) -> None:
        """PostgreSQL's immediate shutdown (SIGQUIT to the postmaster, what ``pg_ctl -m immediate stop`` sends),
        waited for here in 10 ms steps (pg_ctl polls in 100 ms ones); what outlives it is SIGKILLed."""
        from runners.resume.hosts import _alive

        try:
            pid = self.postmaster()
            os.kill(pid, signal.SIGQUIT)
        except (OSError, ValueError, IndexError):
            pid = None
        deadline = time.monotonic() + 30
        while pid and (_alive(pid) or _postgres_of(self.folder)) and time.monotonic() < deadline:
            time.sleep(0.01)
        _kill_folder(self.folder)
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.sockets != self.folder:
            shutil.rmtree(self.sockets, ignore_errors=True)

    @property
    def socket(self) -> str:
        """The path of the cluster's Unix socket (what the proxies forward to)."""
        return str(self.sockets / f".s.PGSQL.{self.port}")

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _postgres_of(folder: Path | None) -> list[tuple[int, str]]:
    """(pid, data folder) of every postgres process of this lab's folders (``folder`` only, if given)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        text = " ".join(c.decode(errors="replace") for c in cmd)
        m = re.search(rf"(\S*{PREFIX}\d+-\w+)", text + " " + cwd)
        if m and "postgres" in text and (folder is None or m.group(1).startswith(str(folder))):
            out.append((int(entry.name), m.group(1)))
    return out


def _kill_folder(folder: Path) -> None:
    for pid, _ in _postgres_of(folder):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _owner_alive(folder: str) -> bool:
    from runners.resume.hosts import _alive

    m = re.search(rf"{PREFIX}(\d+)-", folder)
    return _alive(int(m.group(1))) if m else True


def leftovers() -> list[str]:
    """Data folders of this lab whose owner process is gone: those of running postmasters, and those left in
    :data:`MEMORY` (a killed run's folders there would hold memory until the machine restarts)."""
    running = {f for _, f in _postgres_of(None) if not _owner_alive(f)}
    kept = {str(f) for f in MEMORY.glob(f"{PREFIX}*") if not _owner_alive(str(f))} if MEMORY.is_dir() else set()
    return sorted(running | kept)


def sweep() -> list[str]:
    """SIGKILL the postgres processes of :func:`leftovers` and remove their folders; what was removed."""
    gone = leftovers()
    for folder in gone:
        _kill_folder(Path(folder))
        shutil.rmtree(folder, ignore_errors=True)
    return gone
