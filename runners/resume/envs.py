"""Framework environments: build each locked env with ``uv`` on first use, reuse it, serve its adapter.

Serves issue 14: every framework release under the resume harness of "Resume
Means Resume" (arXiv 2608.03836) runs in its own virtual environment, declared
as data in ``data/envs/<env>/`` (``pyproject.toml`` pinning the framework, the
``uv.lock`` made from it).  The lab never imports a framework under test.

**Build.**  :func:`ensure` builds ``<cache>/<env>-<key>``
(``~/.cache/driftlab/envs`` or ``$DRIFTLAB_ENV_CACHE``: outside the
repository; ``key`` = the first 12 hex digits of the SHA-256 of the lock and
the build command, :data:`SYNC`) with ``uv sync --frozen`` exactly from the
lock, bytecode compiled (a machine with ``PYTHONDONTWRITEBYTECODE`` would
otherwise compile every module a forked call imports, in every call), under a file lock
(parallel workers build once), then records the exact installed versions
(``uv pip list``) and the build's wall time in ``driftlab-env.json`` inside
it.  That file is the mark of a finished build.  The build goes to a temporary
folder beside its place and is renamed into place only once complete and
marked: a killed or failed build is never marked built, and the next use
builds it again; a damaged mark is named, never guessed at.  The lock's hash
is part of every run's identity (:func:`run_locks`): a changed lock is a
changed run.  Any failure is one line naming the env, the step (``read``,
``uv``, ``cache``, ``sync``, ``record``, ``release``) and the path, and exit
2 (:class:`EnvError`); cells already finished stay in the run folder.  The
installed version of each row's framework must be the ``release`` it declares
(:func:`check_release`).

**Serve.**  :func:`server` starts the env's fork server (``python -P
mechanisms/resume/frameworks/protocol.py MODULE:CLASS``, one per adapter and
worker process, started on first use) and speaks the lab's fork-server line
protocol with it, so a framework's calls are children of a warm server in
its env, SIGKILLed at named points (``runners/resume_zygote.py`` does the
same for the lab's own runtimes).  For the nemesis, :func:`host` asks the
warm server for a **hosted** server inside a host's network namespace, which
serves one resumer over a Unix socket (:class:`HostedServer`).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mechanisms.resume.frameworks import ENVS, Declared, declared, envs_root, norm, problems  # noqa: F401
from runners.experiment import DriftlabError
from runners.plugins import PluginFailed

PROTOCOL = Path(__file__).resolve().parents[2] / "mechanisms" / "resume" / "frameworks" / "protocol.py"
MARK = "driftlab-env.json"
#: the build command after ``uv``: part of an env's cache key, so a changed recipe builds a new folder
SYNC = ("sync", "--frozen", "--no-install-project", "--no-dev", "--compile-bytecode", "--quiet")


class EnvError(DriftlabError):
    """An environment that cannot be built or started: one line naming it and the failing step."""

    def __init__(self, env: str, step: str, reason: str):
        reason = " ".join(str(reason).split())[:300]
        DriftlabError.__init__(self, f"environment {env}: {step} failed: {reason}")  # by name: a test plants here


def cache_root() -> Path:
    return Path(os.environ.get("DRIFTLAB_ENV_CACHE") or Path.home() / ".cache" / "driftlab" / "envs").expanduser()


@dataclass(frozen=True)
class Env:
    """A built environment: its folder in the cache, its interpreter and what is installed in it."""

    name: str
    lock_hash: str  # the first 12 hex digits of the lock's SHA-256
    path: Path
    installed: dict[str, str]
    build_s: float  # the wall time of the build that made it (0 when it was reused in this process)
    reused: bool

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def provenance(self) -> dict:
        return {"env": self.name, "lock_sha256_12": self.lock_hash, "path": str(self.path),
                "installed": self.installed}


def _uv() -> list[str]:
    exe = shutil.which("uv")
    if exe:
        return [exe]
    try:  # pip install uv puts the module beside the lab
        import uv  # noqa: F401

        return [sys.executable, "-m", "uv"]
    except ImportError:
        raise EnvError("?", "uv", "uv is not installed (pip install uv)") from None


def _run(name: str, step: str, cmd: list[str], **kw) -> subprocess.CompletedProcess:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    except OSError as exc:
        raise EnvError(name, step, exc) from None
    if out.returncode != 0:
        lines = [ln for ln in (out.stderr or out.stdout).splitlines() if ln.strip()]
        raise EnvError(name, step, lines[-1] if lines else f"exit code {out.returncode}")
    return out


_BUILT: dict[str, Env] = {}


def folder_of(name: str, lock: bytes) -> Path:
    """Where the env ``name`` built from ``lock`` by :data:`SYNC` lives in the cache."""
    key = hashlib.sha256(lock + "\0".join(SYNC).encode()).hexdigest()[:12]
    return cache_root() / f"{name}-{key}"


def read_lock(name: str, root: Path | None = None) -> bytes:
    """The env's ``uv.lock`` (its ``pyproject.toml`` must be there too); one line naming the missing file."""
    folder = (root or envs_root()) / name
    for f in (folder / "pyproject.toml", folder / "uv.lock"):
        try:
            data = f.read_bytes()
        except OSError as exc:
            raise EnvError(name, "read", f"{f}: {exc.strerror or exc}") from None
    return data


def lock_hash(name: str, root: Path | None = None) -> str:
    """The first 12 hex digits of the SHA-256 of the env's ``uv.lock`` (part of a run's identity)."""
    return hashlib.sha256(read_lock(name, root)).hexdigest()[:12]


def _mark(name: str, mark: Path) -> dict:
    """A finished build's record; one line naming the file when it is damaged (delete the folder to rebuild)."""
    try:
        raw = json.loads(mark.read_text())
        if not isinstance(raw, dict) or not isinstance(raw.get("installed"), dict):
            raise ValueError("not a build record (no 'installed' table)")
        float(raw.get("build_s", 0.0))
        return raw
    except (OSError, ValueError, TypeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        raise EnvError(name, "record", f"{mark}: damaged build mark ({why}); delete {mark.parent} to rebuild "
                       "it") from None


def ensure(name: str, root: Path | None = None) -> Env:
    """The env ``name`` built from its lock (building it on first use; reusing it afterwards).

    The build goes to a temporary folder beside its place, renamed into place once complete and marked: a killed
    or failed build is never marked built, and the next use builds it again (issue 24 §5)."""
    if name in _BUILT and _BUILT[name].path.exists():
        return _BUILT[name]
    root = root or envs_root()
    folder = root / name
    lock = read_lock(name, root)
    lock_hash = hashlib.sha256(lock).hexdigest()[:12]
    path = folder_of(name, lock)
    mark = path / MARK
    try:
        if not mark.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path.parent / f".{path.name}.lock", "w") as held:
                fcntl.flock(held, fcntl.LOCK_EX)  # another worker may be building it: wait, then reuse
                if not mark.exists():
                    _BUILT[name] = _build(name, folder, path, lock_hash)
                    return _BUILT[name]
    except OSError as exc:
        where = exc.filename or path.parent
        raise EnvError(name, "cache", f"{where}: {exc.strerror or exc} (the environment cache "
                       f"{cache_root()} must be a writable folder; $DRIFTLAB_ENV_CACHE names another)") from None
    raw = _mark(name, mark)
    _BUILT[name] = Env(name, lock_hash, path, raw["installed"], 0.0, True)
    return _BUILT[name]


def _build(name: str, folder: Path, path: Path, lock_hash: str) -> Env:
    """``uv sync`` into ``<path>.tmp-<pid>``, record what is installed, mark it, rename it into place."""
    uv = _uv()
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    for stale in path.parent.glob(f".{path.name}.tmp-*"):  # a killed build's (we hold the build lock)
        shutil.rmtree(stale, ignore_errors=True)
    if path.exists():  # a folder without its mark: a build of the old, non-atomic form that never finished
        shutil.rmtree(path)
    t0 = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["UV_PROJECT_ENVIRONMENT"] = str(tmp)
    try:
        _run(name, "sync", [*uv, *SYNC, "--project", str(folder)], env=env, timeout=900)
        listed = _run(name, "record", [*uv, "pip", "list", "--python", str(tmp / "bin" / "python"),
                                       "--format", "json"], env=env, timeout=120)
        installed = {p["name"]: p["version"] for p in json.loads(listed.stdout)}
        build_s = time.perf_counter() - t0
        (tmp / MARK).write_text(json.dumps({"env": name, "lock_sha256_12": lock_hash, "installed": installed,
                                            "build_s": build_s, "built_at": time.time()}, indent=1))
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Env(name, lock_hash, path, installed, build_s, False)


def built(root: Path | None = None) -> dict[str, dict]:
    """Provenance of every declared env already built from its current lock (provenance.json), building none."""
    out = {}
    root = root or envs_root()
    for name in sorted({d.env for d in declared(root).values()}):
        try:
            lock = (root / name / "uv.lock").read_bytes()
            path = folder_of(name, lock)
            raw = json.loads((path / MARK).read_text())
        except (OSError, ValueError):
            continue
        out[name] = {"lock_sha256_12": hashlib.sha256(lock).hexdigest()[:12], "path": str(path),
                     "installed": raw["installed"], "build_seconds": round(raw["build_s"], 2)}
    return out


def run_locks(runtimes: list[str] | None) -> dict[str, str]:
    """The lock hash of every env the named runtimes use (``None``: every declared env), for the run's identity."""
    rows = declared()
    names = sorted({rows[r].env for r in rows} if runtimes is None else {rows[r].env for r in runtimes if r in rows})
    return {name: lock_hash(name) for name in names}


def check_declarations(root: Path | None = None) -> None:
    """Refuse a run on the first problem of an environment declaration (one line naming the file and the field:
    :func:`mechanisms.resume.frameworks.problems`), before any name is resolved (issue 24 §4)."""
    found = problems(root)
    if found:
        more = f" (and {len(found) - 1} more problems)" if len(found) > 1 else ""
        raise DriftlabError(" ".join(found[0].split())[:400] + more)


def check_release(decl: Declared, env: Env) -> None:
    """The installed version of the row's distribution is its declared ``release``, else one line (issue 24 §4):
    a row is never published under a release its environment does not hold."""
    installed = {norm(k): v for k, v in env.installed.items()}
    got = installed.get(norm(decl.distribution))
    if got != decl.release:
        raise EnvError(decl.env, "release", f"{decl.name} declares release {decl.release} of {decl.distribution}, "
                       f"but the environment holds {decl.distribution} {got or '(not installed)'} "
                       f"(data/envs/{decl.env}/pyproject.toml: release, or the pin)")


def ensure_row(decl: Declared) -> Env:
    """The row's environment, built or reused, holding the release the row declares."""
    env = ensure(decl.env)
    check_release(decl, env)
    return env


# ------------------------------------------------------------------------------------------- the env's server
#: how long past a call's own limit the server may take to answer (its child is cut at the limit; the server then
#: reaps it, and may import what the child imported lazily before reading the next request)
SERVER_GRACE_S = 120.0
CALL_TIMEOUT_S = 60.0  # a request without its own limit (protocol.CALL_TIMEOUT_S)


class EnvServer:
    """The client of one env fork server (the lab's fork-server protocol; module docstring)."""

    def __init__(self, decl: Declared):
        self.decl = decl
        env = ensure_row(decl)
        clean = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME",
                                                                   "PYTHONSTARTUP", "DRIFTLAB_PLANT")}
        if os.environ.get("DRIFTLAB_PLANT") and os.environ.get("DRIFTLAB_PLANT_SITE"):  # a test's planted variant
            clean.update(DRIFTLAB_PLANT=os.environ["DRIFTLAB_PLANT"],  # reaches the server (tests/planting.py)
                         PYTHONPATH=os.environ["DRIFTLAB_PLANT_SITE"])
        try:
            self.proc = subprocess.Popen([str(env.python), "-P", str(PROTOCOL), decl.adapter,
                                          json.dumps(decl.options)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True, env=clean)
        except OSError as exc:
            raise EnvError(decl.env, "start", exc) from None
        self.requests, self.replies = self.proc.stdin, self.proc.stdout
        self.owner = os.getpid()

    def alive(self) -> bool:
        return self.proc.poll() is None and self.owner == os.getpid()

    def kill(self) -> None:
        self.proc.kill()

    def ended(self) -> str:
        return f"exited with code {self.proc.wait()}"

    def call(self, request: dict) -> dict:
        """The server's reply, within the call's own limit (``timeout``, which the server enforces on its child)
        plus :data:`SERVER_GRACE_S`: a server that hangs itself (not a call's child) is killed and named."""
        limit = float(request.get("timeout") or CALL_TIMEOUT_S) + SERVER_GRACE_S
        try:
            self.requests.write(json.dumps(request, default=str) + "\n")
            self.requests.flush()
            if not select.select([self.replies], [], [], limit)[0]:
                self.kill()
                raise EnvError(self.decl.env, "serve", f"the fork server of adapter {self.decl.adapter} did not "
                               f"answer call {request.get('call')} {request.get('label') or ''} within {limit:g} s "
                               "(killed)")
            line = self.replies.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            raise EnvError(self.decl.env, "serve", f"the fork server of adapter {self.decl.adapter} {self.ended()} "
                           f"during call {request.get('call')} {request.get('label') or ''} (its stderr says why)")
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            raise EnvError(self.decl.env, "serve", f"the fork server of adapter {self.decl.adapter} answered "
                           f"{line[:60]!r} to call {request.get('call')}, not a reply")
        return reply

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - gone or stuck: make sure it is gone
            self.proc.kill()
            self.proc.wait()


class HostedServer(EnvServer):
    """A hosted server (the protocol's ``host`` request): a fork of this worker's warm env server that entered a
    nemesis host's network namespace and serves one resumer over a Unix socket (issue 25, ``resume_nemesis``).

    The resumer no longer starts an env server of its own inside its host (a fresh interpreter importing the
    framework, for every resumer): the warm server, started outside any host, forks one for it, which then
    enters the host, so each call is still a fresh process reaching the store over the host's link only.  The
    hosted server ends when its client closes the socket; a client SIGKILLed during a call takes the call's
    process with it (the server sees the socket's end)."""

    def __init__(self, decl: Declared, sock: socket.socket, pid: int):
        self.decl, self.sock, self.pid, self.owner = decl, sock, pid, os.getpid()
        self.requests, self.replies = sock.makefile("w"), sock.makefile("r")

    def alive(self) -> bool:
        return self.owner == os.getpid()

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def ended(self) -> str:
        return f"(hosted, pid {self.pid}) exited"

    def close(self) -> None:
        for f in (self.requests, self.replies, self.sock):  # the socket closes with its last file
            f.close()


def host(warm: EnvServer, netns: str) -> tuple[socket.socket, int]:
    """A hosted server in host ``netns``, forked by the warm server ``warm`` (this process's :func:`server` of the
    runtime): the socket connected to it (hand it to the resumer with :func:`attach`) and its pid."""
    reply = warm.call({"call": "host", "netns": netns, "timeout": 20})
    if "error" in reply:
        raise EnvError(warm.decl.env, "host", reply["error"])
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect("\0" + reply["address"])
    except OSError as exc:
        sock.close()
        raise EnvError(warm.decl.env, "host", f"connecting to the hosted server {reply['pid']}: {exc}") from None
    return sock, int(reply["pid"])


def attach(name: str, sock: socket.socket, pid: int) -> None:
    """In a resumer: serve ``name``'s calls through the hosted server on ``sock`` (:func:`host`), not a server of
    its own."""
    decl = declared()[name]
    _SERVERS[_key(decl)] = HostedServer(decl, sock, pid)


_SERVERS: dict[str, EnvServer] = {}


def _key(decl: Declared) -> str:
    # a server started under a test's planted variant (tests/planting.py) is never one a later call without it reuses
    return f"{decl.env}/{decl.adapter}/{json.dumps(decl.options, sort_keys=True)}/{os.environ.get('DRIFTLAB_PLANT', '')}"


def where(runtime: str) -> str:
    """``"environment E, adapter A: "`` for a framework runtime (the start of its fault's one line), else ""."""
    d = declared().get(runtime)
    return f"environment {d.env}, adapter {d.adapter}: " if d else ""


def server(name: str) -> EnvServer:
    """This process's fork server for the framework runtime ``name`` (started on first use; a dead one replaced)."""
    return server_of(declared()[name])


def server_of(decl: Declared) -> EnvServer:
    """:func:`server` of a declaration (a test's planted adapter in a real env has one, not a name in the envs)."""
    s = _SERVERS.get(_key(decl))
    if s is None or not s.alive():
        s = _SERVERS[_key(decl)] = EnvServer(decl)
    return s


class EnvRacers:
    """k racers of a framework runtime, forked for each race from its env's warm server (``RacerPool``'s interface).

    The server forks k children that build the adapter (opening its
    connections) before they meet at one barrier, so what is timed from the
    barrier on is the same as for the lab's warm pool.  A racer that fails
    before the race (its connections refused) breaks the barrier at once and
    the cell fails (:class:`PluginFailed`), as the lab's pool does: a race
    without all its racers is never recorded as the framework's answer."""

    def __init__(self, k: int, runtime: str, backend, graph, timeout_s: float = 60):
        self.k, self.runtime, self.backend, self.graph, self.timeout_s = k, runtime, backend, graph, timeout_s

    def race(self, run_id: str, value, labels: list[str], jitters_s: list[float]) -> list[dict | None]:
        reply = server(self.runtime).call({"call": "race", "runtime": self.runtime, "backend": self.backend.to_dict(),
                                           "graph": self.graph.to_dict(), "run": run_id, "value": value,
                                           "labels": list(labels), "jitters": list(jitters_s),
                                           "timeout": self.timeout_s})
        answers = reply.get("answers") if isinstance(reply, dict) else None
        if not isinstance(answers, list) or len(answers) != len(labels):
            raise PluginFailed(self.runtime, f"{where(self.runtime)}the race answered {str(reply)[:80]}, not "
                                             f"{len(labels)} answers (call race {labels[0]})")
        # a racer that raised (undeclared), exited, hung or answered malformed: never a framework's answer, and the
        # race is not run again (issue 24 §1)
        failed = [(label, "no answer within the race's time limit (hung or exited)" if a is None else
                   a.get("error") or f"answered {str(a)[:60]}") for label, a in zip(labels, answers)
                  if a is None or "status" not in a]
        if failed:
            raise PluginFailed(self.runtime, f"{where(self.runtime)}"
                               + "; ".join(f"racer {label}: {why}" for label, why in failed[:2])
                               + (f" (and {len(failed) - 2} more racers)" if len(failed) > 2 else "")
                               + " (call race)")
        return answers

    def close(self) -> None:
        pass

    def __enter__(self) -> "EnvRacers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _connect() -> None:
    from mechanisms.resume import framework

    framework.CONNECT = server


_connect()


def main(argv: list[str] | None = None) -> int:
    """``python -m runners.resume.envs [ENV ...]``: build (or reuse) the named envs, or every declared one (CI)."""
    names = (argv if argv is not None else sys.argv[1:]) or sorted({d.env for d in declared().values()})
    try:
        for name in names:
            t0 = time.perf_counter()
            env = ensure(name)
            print(f"{name}: {'reused' if env.reused else 'built'} in {time.perf_counter() - t0:.1f} s at {env.path}")
    except EnvError as exc:
        print(f"driftlab: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
