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
it.  That file is the mark of a finished build: a killed build is redone, a
finished one is reused (a new lock is a new folder).  Any failure is one line
naming the env and the step (``read``, ``uv``, ``sync``, ``record``) and exit
2 (:class:`EnvError`); cells already finished stay in the run folder.

**Serve.**  :func:`server` starts the env's fork server (``python -P
mechanisms/resume/frameworks/protocol.py MODULE:CLASS``, one per adapter and
worker process, started on first use) and speaks the lab's fork-server line
protocol with it, so a framework's calls are children of a warm server in
its env, SIGKILLed at named points (``runners/resume_zygote.py`` does the
same for the lab's own runtimes).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mechanisms.resume.frameworks import ENVS, Declared, declared
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
        super().__init__(f"environment {env}: {step} failed: {reason}")


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


def ensure(name: str, root: Path = ENVS) -> Env:
    """The env ``name`` built from its lock (building it on first use; reusing it afterwards)."""
    if name in _BUILT and _BUILT[name].path.exists():
        return _BUILT[name]
    folder = root / name
    try:
        lock = (folder / "uv.lock").read_bytes()
        (folder / "pyproject.toml").read_bytes()
    except OSError as exc:
        raise EnvError(name, "read", f"{folder}: {exc.strerror or exc}") from None
    lock_hash = hashlib.sha256(lock).hexdigest()[:12]
    path = folder_of(name, lock)
    mark = path / MARK
    if not mark.exists():
        uv = _uv()
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.parent / f".{path.name}.lock", "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)  # another worker may be building it: wait, then reuse
            if not mark.exists():
                t0 = time.perf_counter()
                env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
                env["UV_PROJECT_ENVIRONMENT"] = str(path)
                _run(name, "sync", [*uv, *SYNC, "--project", str(folder)], env=env, timeout=900)
                listed = _run(name, "record", [*uv, "pip", "list", "--python", str(path / "bin" / "python"),
                                               "--format", "json"], env=env, timeout=120)
                installed = {p["name"]: p["version"] for p in json.loads(listed.stdout)}
                tmp = path / (MARK + ".tmp")
                tmp.write_text(json.dumps({"env": name, "lock_sha256_12": lock_hash, "installed": installed,
                                           "build_s": time.perf_counter() - t0, "built_at": time.time()}, indent=1))
                os.replace(tmp, mark)
                _BUILT[name] = Env(name, lock_hash, path, installed, json.loads(mark.read_text())["build_s"], False)
                return _BUILT[name]
    try:
        raw = json.loads(mark.read_text())
    except (OSError, ValueError) as exc:
        raise EnvError(name, "record", f"{mark}: {exc}") from None
    _BUILT[name] = Env(name, lock_hash, path, raw["installed"], 0.0, True)
    return _BUILT[name]


def built(root: Path = ENVS) -> dict[str, dict]:
    """Provenance of every declared env already built from its current lock (provenance.json), building none."""
    out = {}
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


# ------------------------------------------------------------------------------------------- the env's server
class EnvServer:
    """The client of one env fork server (the lab's fork-server protocol; module docstring)."""

    def __init__(self, decl: Declared):
        self.decl = decl
        env = ensure(decl.env)
        clean = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME",
                                                                   "PYTHONSTARTUP")}
        try:
            self.proc = subprocess.Popen([str(env.python), "-P", str(PROTOCOL), decl.adapter,
                                          json.dumps(decl.options)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True, env=clean)
        except OSError as exc:
            raise EnvError(decl.env, "start", exc) from None
        self.owner = os.getpid()

    def call(self, request: dict) -> dict:
        try:
            self.proc.stdin.write(json.dumps(request, default=str) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            raise EnvError(self.decl.env, "serve", f"the fork server of {self.decl.name} exited with code "
                           f"{self.proc.wait()} (its stderr says why)")
        return json.loads(line)

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - gone or stuck: make sure it is gone
            self.proc.kill()
            self.proc.wait()


_SERVERS: dict[str, EnvServer] = {}


def server(name: str) -> EnvServer:
    """This process's fork server for the framework runtime ``name`` (started on first use; a dead one replaced)."""
    decl = declared()[name]
    key = f"{decl.env}/{decl.adapter}/{json.dumps(decl.options, sort_keys=True)}"
    s = _SERVERS.get(key)
    if s is None or s.proc.poll() is not None or s.owner != os.getpid():
        s = _SERVERS[key] = EnvServer(decl)
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
        answers = reply["answers"]
        failed = [(label, a["error"]) for label, a in zip(labels, answers) if a is not None and "error" in a]
        if failed:  # no race was run: never a framework's answer (a hung racer, None, is)
            raise PluginFailed(self.runtime, "; ".join(f"{label}: {why}" for label, why in failed[:2])
                               + (f" (and {len(failed) - 2} more racers)" if len(failed) > 2 else ""))
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
