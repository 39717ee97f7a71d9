"""A lazy file system: data written and not fsynced lives only in this process's memory (LazyFS's model).

Serves issue 31 (``resume_powerloss``): the fault that loses what was written
but not yet synced, which a SIGKILL never loses (the OS holds it).  A FUSE file
system (libfuse 3 through ``mfusepy``'s ctypes binding: no compiler, no
trio, Debian's ``fuse3`` for the library and ``fusermount3``) is mounted over
a backing folder:

- ``write`` goes to a per-file **shadow** in memory (4 KiB pages, a logical
  size); ``read`` and ``getattr`` see the shadow over the backing file;
- ``fsync`` / ``fdatasync``, and every write on a descriptor opened
  ``O_SYNC`` / ``O_DSYNC``, write the file's shadow to the backing file and
  fsync it;
- metadata (create, rename, unlink, mkdir, truncate's size) reaches the backing
  folder at once, as LazyFS's default model has it; :class:`StrictLazyFS`
  (``ops="runners.resume.lazyfs:StrictLazyFS"``) is POSIX's stricter reading:
  a create, rename or unlink of a file is durable only once its folder is
  fsynced, and a power loss undoes the ones that were not;
- faults, sent on a control socket: ``power_loss`` drops every shadow (every
  unsynced byte is gone), ``torn`` keeps the last unsynced write's prefix cut
  at a 4 KiB boundary and drops the rest, ``flush`` writes every shadow (what
  the OS does in the background, given time).

After a fault the lab kills every process of the cell, unmounts and mounts
again, so no page cache of the kernel survives into the recovery.  Locks are
left to the kernel (the ``lock`` operation is not implemented, so FUSE locks
locally, which is right for processes on one machine).  What it trades away:
speed (every read and write crosses into Python), and a crash of this process
is a failure of the lab (``mount`` reports it), never a result.

``python -m runners.resume.lazyfs serve BACKING MOUNT CONTROL`` is the server;
:class:`Mount` starts, commands and stops it.  The server never outlives the
process that mounted it: once that process is gone, it unmounts, removes the
caller's scratch folder and exits (:func:`watch_parent`).
"""
from __future__ import annotations

import errno
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PAGE = 4096
#: mount points the lab makes carry this in their path: a run removes what a killed run left
PREFIX = "driftlab-lazyfs-"


@dataclass
class Shadow:
    """A file's unsynced state: its logical size, its written pages, and how much of the backing file still counts."""

    size: int
    clean_limit: int  # backing bytes at or past this offset read as zeros (a truncate cut them)
    pages: dict[int, bytearray] = field(default_factory=dict)


class LazyFS:
    """The file system's operations (mfusepy's high-level API; paths are relative to the mount)."""

    def __init__(self, root: str):
        self.root = root
        self.lock = threading.RLock()
        self.shadows: dict[str, Shadow] = {}
        self.sync_fhs: set[int] = set()
        self.last_write: tuple[str, int, int] | None = None  # (path, offset, length) of the newest unsynced write

    # ------------------------------------------------------------------ helpers
    def _full(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _backing(self, path: str, offset: int, size: int, limit: int) -> bytes:
        """Exactly ``size`` bytes from ``offset``: the backing file's, zeros at or past ``limit`` and past its end."""
        real, got = max(0, min(size, limit - offset)), b""
        if real > 0:
            try:
                fd = os.open(self._full(path), os.O_RDONLY)
            except FileNotFoundError:
                fd = -1
            if fd >= 0:
                try:
                    got = os.pread(fd, real, offset)
                finally:
                    os.close(fd)
        return got + b"\0" * (size - len(got))

    def _shadow(self, path: str) -> Shadow:
        sh = self.shadows.get(path)
        if sh is None:
            size = os.lstat(self._full(path)).st_size
            sh = self.shadows[path] = Shadow(size, size)
        return sh

    def _page(self, path: str, sh: Shadow, index: int) -> bytearray:
        page = sh.pages.get(index)
        if page is None:
            page = bytearray(self._backing(path, index * PAGE, PAGE, sh.clean_limit).ljust(PAGE, b"\0"))
            sh.pages[index] = page
        return page

    def _sync(self, path: str) -> None:
        """Write the file's shadow to the backing file and fsync it; the shadow is then gone."""
        sh = self.shadows.pop(path, None)
        if sh is None:
            return
        fd = os.open(self._full(path), os.O_WRONLY)
        try:
            os.ftruncate(fd, min(sh.clean_limit, sh.size))
            for index, page in sorted(sh.pages.items()):
                keep = max(0, min(PAGE, sh.size - index * PAGE))
                if keep:
                    os.pwrite(fd, bytes(page[:keep]), index * PAGE)
            os.ftruncate(fd, sh.size)
            os.fsync(fd)
        finally:
            os.close(fd)
        if self.last_write and self.last_write[0] == path:
            self.last_write = None

    # ------------------------------------------------------------------ faults
    def flush(self) -> None:
        with self.lock:
            for path in list(self.shadows):
                self._sync(path)

    def power_loss(self) -> None:
        with self.lock:
            self.shadows.clear()
            self.last_write = None

    def torn(self) -> None:
        """The newest unsynced write reaches the disk up to its last 4 KiB boundary (a write torn by the power
        failing mid-way); everything else unsynced is lost."""
        with self.lock:
            last, data = self.last_write, b""
            if last is not None and last[0] in self.shadows:
                path, offset, length = last
                cut = (offset + length) // PAGE * PAGE
                if cut > offset:
                    data = self._read(path, cut - offset, offset)
            self.shadows.clear()
            self.last_write = None
            if data:
                fd = os.open(self._full(path), os.O_WRONLY)
                try:
                    os.pwrite(fd, data, offset)
                    os.fsync(fd)
                finally:
                    os.close(fd)

    # ------------------------------------------------------------------ the operations mfusepy calls
    def getattr(self, path: str, fh: int | None = None) -> dict:
        with self.lock:
            st = os.lstat(self._full(path))
            out = {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime",
                                                "st_mtime", "st_ctime")}
            sh = self.shadows.get(path)
            if sh is not None:
                out["st_size"] = sh.size
            return out

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._full(path))]

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._full(path), amode):
            raise OSError(errno.EACCES, "")
        return 0

    def open(self, path: str, flags: int) -> int:
        fh = os.open(self._full(path), os.O_RDONLY)
        if flags & (os.O_SYNC | os.O_DSYNC):
            self.sync_fhs.add(fh)
        return fh

    def create(self, path: str, mode: int, fi=None) -> int:
        with self.lock:
            fd = os.open(self._full(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)  # metadata: at once
            os.close(fd)
            self.shadows[path] = Shadow(0, 0)
            return os.open(self._full(path), os.O_RDONLY)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        with self.lock:
            if path not in self.shadows:
                return os.pread(fh, size, offset)
            return self._read(path, size, offset)

    def _read(self, path: str, size: int, offset: int) -> bytes:
        """Bytes as a reader sees them: the shadow's pages over the backing file (``path`` has a shadow)."""
        with self.lock:
            sh = self.shadows[path]
            end = min(offset + size, sh.size)
            out = bytearray()
            pos = offset
            while pos < end:
                index, start = divmod(pos, PAGE)
                take = min(PAGE - start, end - pos)
                page = sh.pages.get(index)
                out += page[start:start + take] if page is not None else self._backing(path, pos, take,
                                                                                        sh.clean_limit)
                pos += take
            return bytes(out)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        with self.lock:
            sh = self._shadow(path)
            pos, view = offset, memoryview(data)
            while view:
                index, start = divmod(pos, PAGE)
                take = min(PAGE - start, len(view))
                self._page(path, sh, index)[start:start + take] = view[:take]
                view, pos = view[take:], pos + take
            sh.size = max(sh.size, offset + len(data))
            self.last_write = (path, offset, len(data))
            if fh in self.sync_fhs:
                self._sync(path)
            return len(data)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        with self.lock:
            sh = self._shadow(path)
            if length < sh.size:
                for index in [i for i in sh.pages if i * PAGE >= length]:
                    del sh.pages[index]
                index, start = divmod(length, PAGE)
                if start and index in sh.pages:
                    sh.pages[index][start:] = b"\0" * (PAGE - start)
                sh.clean_limit = min(sh.clean_limit, length)
            sh.size = length
            return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        with self.lock:
            self._sync(path)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        return 0  # metadata reached the backing folder already (module docstring)

    def release(self, path: str, fh: int) -> int:
        self.sync_fhs.discard(fh)
        os.close(fh)
        return 0

    def unlink(self, path: str) -> int:
        with self.lock:
            os.unlink(self._full(path))
            self.shadows.pop(path, None)
        return 0

    def rename(self, old: str, new: str) -> int:
        with self.lock:
            os.rename(self._full(old), self._full(new))
            if old == new:
                return 0
            self.shadows.pop(new, None)
            if old in self.shadows:
                self.shadows[new] = self.shadows.pop(old)
            if self.last_write and self.last_write[0] == old:
                self.last_write = (new, *self.last_write[1:])
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._full(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._full(path))
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._full(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._full(path), uid, gid)
        return 0

    def utimens(self, path: str, times=None) -> int:
        os.utime(self._full(path), ns=times)
        return 0

    def statfs(self, path: str) -> dict:
        st = os.statvfs(self._full(path))
        return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                                            "f_files", "f_flag", "f_frsize", "f_namemax")}


class StrictLazyFS(LazyFS):
    """POSIX's reading of metadata: a file's create, rename or unlink is durable only after an fsync of its folder.

    Each such operation still reaches the backing folder at once (readers see it), and is logged with what undoes
    it (a replaced or unlinked file is moved aside into a stash beside the backing folder, not deleted).
    ``fsyncdir`` of a folder makes the operations on it durable (an operation spanning two folders, a rename
    between them, once both are synced); ``flush`` makes everything durable.  ``power_loss`` and ``torn`` drop
    the unsynced data as :class:`LazyFS` does, then undo every operation not yet durable, newest first.  Files in
    subfolders are handled like files at the top; folders themselves (mkdir, rmdir) stay immediate.  (The base
    class is called by name, not through super(), so that a test can plant a bug in one method.)
    """

    def __init__(self, root: str):
        LazyFS.__init__(self, root)
        self.stash = root.rstrip("/") + ".lazyfs-stash"
        self.pending: list[tuple[set[str], str, tuple]] = []  # (folders not yet synced, kind, what undoes it)
        self.stashed = 0

    @staticmethod
    def _folder(path: str) -> str:
        return os.path.dirname("/" + path.lstrip("/")) or "/"

    def _aside(self, path: str) -> str:
        """Move the backing file of ``path`` into the stash; returns where it went."""
        os.makedirs(self.stash, exist_ok=True)
        self.stashed += 1
        kept = os.path.join(self.stash, str(self.stashed))
        os.rename(self._full(path), kept)
        return kept

    def create(self, path: str, mode: int, fi=None) -> int:
        with self.lock:
            existed = os.path.lexists(self._full(path))
            kept = self._aside(path) if existed else None  # O_TRUNC on a file that exists: its old self is kept
            fh = LazyFS.create(self, path, mode, fi)
            self.pending.append(({self._folder(path)}, "create", (path, kept)))
            return fh

    def unlink(self, path: str) -> int:
        with self.lock:
            kept = self._aside(path)
            self.shadows.pop(path, None)
            self.pending.append(({self._folder(path)}, "unlink", (path, kept)))
        return 0

    def rename(self, old: str, new: str) -> int:
        with self.lock:
            if old == new:
                return 0
            kept = self._aside(new) if os.path.lexists(self._full(new)) else None
            LazyFS.rename(self, old, new)
            self.pending.append(({self._folder(old), self._folder(new)}, "rename", (old, new, kept)))
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        with self.lock:
            folder = "/" + path.strip("/") if path.strip("/") else "/"
            for folders, _, _ in self.pending:
                folders.discard(folder)
            self._settle()
        return 0

    def _settle(self) -> None:
        """Forget the operations that became durable; their stashed files are gone for good."""
        durable = [e for e in self.pending if not e[0]]
        self.pending = [e for e in self.pending if e[0]]
        for _, kind, args in durable:
            kept = args[-1]
            if kept:
                os.unlink(kept)

    def flush(self) -> None:
        with self.lock:
            LazyFS.flush(self)
            for folders, _, _ in self.pending:
                folders.clear()
            self._settle()

    def _undo(self) -> None:
        for _, kind, args in reversed(self.pending):
            if kind == "create":
                path, kept = args
                os.unlink(self._full(path))
                if kept:
                    os.rename(kept, self._full(path))
            elif kind == "unlink":
                path, kept = args
                os.rename(kept, self._full(path))
            else:
                old, new, kept = args
                os.rename(self._full(new), self._full(old))
                if kept:
                    os.rename(kept, self._full(new))
        self.pending = []

    def power_loss(self) -> None:
        with self.lock:
            LazyFS.power_loss(self)
            self._undo()

    def torn(self) -> None:
        with self.lock:
            LazyFS.torn(self)
            self._undo()


def operations(fs: LazyFS):
    """``fs`` as an mfusepy ``Operations`` (every method a syscall can reach; errors as OSError)."""
    import mfusepy

    names = ("getattr", "readdir", "access", "open", "create", "read", "write", "truncate", "fsync", "fsyncdir",
             "release", "unlink", "rename", "mkdir", "rmdir", "chmod", "chown", "utimens", "statfs")

    def wrap(name: str):
        method = getattr(fs, name)

        def call(self, *args):
            try:
                return method(*args)
            except OSError as exc:
                raise mfusepy.FuseOSError(exc.errno or errno.EIO) from None
        return call

    attrs = {n: wrap(n) for n in names}
    attrs["flush"] = lambda self, path, fh: 0
    return type("LazyOperations", (mfusepy.Operations,), attrs)()


def serve(backing: str, mount: str, control: str, ops: str = "") -> None:
    """The server: the file system in this process, its control socket in a thread (one command per line).
    ``ops`` (``module:Class``, a subclass of :class:`LazyFS`) is for the tests' planted file systems."""
    import importlib

    import mfusepy

    cls = LazyFS
    if ops:
        module, _, name = ops.partition(":")
        cls = getattr(importlib.import_module(module), name)
    fs = cls(backing)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(control)
    sock.listen(4)

    def control_loop() -> None:
        while True:
            conn, _ = sock.accept()
            with conn:
                cmd = conn.recv(64).decode().strip()
                if cmd in ("flush", "power_loss", "torn"):
                    getattr(fs, cmd)()
                conn.sendall(b"ok\n" if cmd in ("flush", "power_loss", "torn", "ping") else b"unknown\n")

    threading.Thread(target=control_loop, daemon=True).start()
    # no attribute or entry caching in the kernel: a size or a name the file system changed is seen at once
    mfusepy.FUSE(operations(fs), mount, foreground=True, nothreads=False, fsname="driftlab-lazyfs", attr_timeout=0,
                 entry_timeout=0, negative_timeout=0)


class LazyFSError(RuntimeError):
    """The lab's file system could not be mounted, commanded or unmounted: a failure of the lab, one line."""


def control_path(point: str) -> str:
    """The control socket of the mount at ``point``: beside it, or, where that path is longer than a Unix socket's
    address may be (108 bytes: a run folder deep in a long path), in the temporary folder under a name derived from
    the mount point's path."""
    beside = point + ".control"
    if len(beside.encode()) < 100:
        return beside
    import hashlib
    import tempfile

    return os.path.join(tempfile.gettempdir(), f"{PREFIX}{hashlib.sha256(point.encode()).hexdigest()[:16]}.control")


def _served(point: str) -> bool:
    """True if the mount's server still answers on its control socket (a live run's mount, not a leftover)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(control_path(point))
            s.sendall(b"ping\n")
            return s.recv(16).strip() == b"ok"
    except OSError:
        return False


def leftovers() -> list[str]:
    """Mount points of this lab's lazy file systems whose server is gone (a killed run's), from /proc/mounts; a
    mount another run is serving right now is never one."""
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return []
    points = [ln.split()[1] for ln in lines if len(ln.split()) > 2 and PREFIX in ln.split()[1]
              and ln.split()[2].startswith("fuse")]
    return [p for p in points if not _served(p)]


def unmount(point: str) -> None:
    subprocess.run(["fusermount3", "-u", "-z", point], capture_output=True, timeout=30)


def requirements() -> str:
    """Why the lazy file system cannot run here ("" when it can): /dev/fuse, fusermount3, libfuse3, and root or a
    setuid-root fusermount3 (a process that is not root mounts FUSE only through a setuid fusermount3)."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine"
    helper = shutil.which("fusermount3")
    if helper is None:
        return "fusermount3 not found (Debian's fuse3 package: apt-get install fuse3)"
    try:
        import ctypes.util

        if ctypes.util.find_library("fuse3") is None:
            return "libfuse3 not found (Debian's fuse3 package: apt-get install fuse3)"
    except Exception as exc:  # noqa: BLE001
        return f"libfuse3 not loadable: {exc}"
    if os.geteuid() != 0 and not _setuid_root(helper):
        return "not root, and fusermount3 is not setuid root (mounting FUSE needs one of them)"
    return ""


def _setuid_root(path: str) -> bool:
    st = os.stat(path)
    return st.st_uid == 0 and bool(st.st_mode & stat.S_ISUID)


class Mount:
    """One lazy file system over ``backing`` at ``point``: start, fault, remount, stop (module docstring).

    ``scratch``: the caller's folder that holds the mount (a cell's): the server removes it, and its own mount, if
    the caller dies first (a Ctrl-C or a SIGKILL of the lab: :func:`watch_parent`)."""

    def __init__(self, backing: Path, point: Path, ops: str = "", env: dict | None = None,
                 scratch: Path | None = None):
        self.backing, self.point = Path(backing), Path(point)
        self.ops, self.env, self.scratch = ops, env, scratch
        if PREFIX not in str(self.point):
            raise ValueError(f"{point}: a lazy mount point's path carries {PREFIX!r} (so a later run can find it)")
        self.control = control_path(str(self.point))
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 20.0) -> "Mount":
        self.backing.mkdir(parents=True, exist_ok=True)
        self.point.mkdir(parents=True, exist_ok=True)
        Path(self.control).unlink(missing_ok=True)
        self.proc = subprocess.Popen([sys.executable, "-m", "runners.resume.lazyfs", "serve", str(self.backing),
                                      str(self.point), self.control, *([self.ops] if self.ops else [])],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                                     cwd=str(Path(__file__).resolve().parents[2]),
                                     env={**(self.env or os.environ), "DRIFTLAB_LAZYFS_PARENT": str(os.getpid()),
                                          "DRIFTLAB_LAZYFS_SCRATCH": str(self.scratch or "")})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = (self.proc.stderr.read() or b"").decode().strip().splitlines() if self.proc.stderr else []
                raise LazyFSError(f"lazy file system at {self.point}: the server exited "
                                  f"({err[-1] if err else self.proc.returncode})")
            if os.path.ismount(self.point) and os.path.exists(self.control):
                try:
                    self.send("ping")
                    return self
                except LazyFSError:
                    pass
            time.sleep(0.02)
        self.stop()
        raise LazyFSError(f"lazy file system at {self.point}: not mounted within {timeout_s:g} s")

    def send(self, command: str) -> None:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(30)
                s.connect(self.control)
                s.sendall(command.encode() + b"\n")
                answer = s.recv(16).decode().strip()
        except OSError as exc:
            raise LazyFSError(f"lazy file system at {self.point}: {command} failed ({exc})") from None
        if answer != "ok":
            raise LazyFSError(f"lazy file system at {self.point}: {command} answered {answer!r}")

    def stop(self) -> None:
        unmount(str(self.point))
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            if self.proc.stderr:
                self.proc.stderr.close()
            self.proc = None
        Path(self.control).unlink(missing_ok=True)

    def remount(self) -> None:
        """Unmount and mount again: a fresh server, no page cache of the kernel carried over."""
        self.stop()
        self.start()

    def __enter__(self) -> "Mount":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def clean_up(point: str, scratch: str = "") -> None:
    """Unmount ``point`` (lazily: a dead reader's open file cannot keep it), remove its control socket, and, once
    nothing is mounted there, ``scratch`` (the folder holding it)."""
    unmount(point)
    Path(control_path(point)).unlink(missing_ok=True)
    if scratch and not os.path.ismount(point):
        shutil.rmtree(scratch, ignore_errors=True)


def watch_parent(parent: int, point: str, scratch: str, every_s: float = 0.1) -> None:
    """In the server: never outlive the process that mounted us.  Once ``parent`` is gone (the lab's worker killed
    by a Ctrl-C of the lab or a SIGKILL), unmount, remove the caller's ``scratch`` folder, and exit.  (Were this
    server itself SIGKILLed, its mount would stay: the next run removes it before its first cell, naming it.)"""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        clean_up(point, scratch)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


if __name__ == "__main__":
    if sys.argv[1:2] != ["serve"] or len(sys.argv) not in (5, 6):
        sys.exit("usage: python -m runners.resume.lazyfs serve BACKING MOUNT CONTROL [module:Class]")
    PARENT = int(os.environ.get("DRIFTLAB_LAZYFS_PARENT") or 0)
    if PARENT:
        watch_parent(PARENT, sys.argv[3], os.environ.get("DRIFTLAB_LAZYFS_SCRATCH", ""))
    serve(*sys.argv[2:])
    if PARENT and os.getppid() != PARENT:  # unmounted by the watch: it exits once it has cleaned up
        time.sleep(60)
