"""The engine: plan the cells, claim and check the run folder, execute them, analyse the records.

``driftlab reproduce``, ``compare`` and ``sweep`` are all one call of
:func:`run` with a typed :class:`Request`; the CLI only parses arguments into
it and maps errors to exit codes.  Everything that can be refused is refused
before the first file is written: unknown names, malformed scenario files,
impossible sizes (with the estimated duration), an unusable ``--out``.

The run folder is claimed with an OS file lock (``.lock``, ``flock``): a
second run into the same folder is refused while the first holds it, and the
lock dies with its process, so a killed run never blocks its own rerun.  Its
identity (``run.json``: profile, seed, mechanisms, backend, workloads, sweep
points and a content hash of every scenario file loaded) must match for a
rerun to reuse the finished cells; anything else is a changed run and is
refused.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from analysis.artifact import Artifact
from analysis.pipeline import writable
from mechanisms import family_of_name
from runners.execute import pending, run_cells
from runners.experiment import Cell, DriftlabError, Experiment, Options
from runners.experiments import EXPERIMENTS, FAMILIES
from runners.provenance import write_provenance
from scenarios import scenario_files

def default_runs() -> Path:
    """Where default run folders go: ``$DRIFTLAB_RUNS``; else ``data/runs`` of the driftlab clone this code runs
    from (whatever the current folder); else, for an installed copy, ``~/.local/share/driftlab/runs``."""
    if os.environ.get("DRIFTLAB_RUNS"):
        return Path(os.environ["DRIFTLAB_RUNS"])
    clone = Path(__file__).resolve().parent.parent
    if (clone / "pyproject.toml").is_file() and (clone / "runners").is_dir():
        return clone / "data" / "runs"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "driftlab" / "runs"


#: A request whose estimated duration exceeds this is refused before it starts.
MAX_HOURS = 24.0


@dataclass
class Request:
    """One run: which experiments, at which size, where, and how to execute them."""

    experiments: tuple[str, ...]
    profile: str = "quick"
    seed: int = 20260901
    jobs: int = 1
    out: str | Path | None = None  # None: data/runs/<stamp>-<profile> with a 'latest' link
    quiet: bool = False
    executor: str = "local"  # local | dask
    scheduler: str | None = None  # tcp://HOST:PORT of an existing Dask cluster (dask executor)
    options: Options = field(default_factory=Options)


def select(only: str | None) -> list[str]:
    """Experiment names for ``--only`` (a family or an artifact name)."""
    if only is None:
        return list(EXPERIMENTS)
    if only in FAMILIES:
        names = [n for n, e in EXPERIMENTS.items() if e.family == only]
        if not names:
            raise DriftlabError(f"--only {only}: the {only} family has no experiments in this version of driftlab")
        return names
    if only in EXPERIMENTS:
        return [only]
    raise DriftlabError(f"--only {only!r} is neither a family ({', '.join(FAMILIES)}) nor an artifact ({', '.join(EXPERIMENTS)})")


def artifacts_of(experiment: Experiment) -> list[Artifact]:
    return [a if a.experiment else replace(a, experiment=experiment.name) for a in experiment.artifacts]


def all_artifacts() -> list[Artifact]:
    return [a for e in EXPERIMENTS.values() for a in artifacts_of(e)]


def assign_mechanisms(options: Options) -> None:
    """Split --mechanisms by the family whose protocol each implements; a name that fits none is refused."""
    options.mechanism_families = {}
    for name in options.mechanisms or ():
        for fam in family_of_name(name):
            options.mechanism_families.setdefault(fam, ())
            options.mechanism_families[fam] += (name,)


def usable_out(out: Path) -> None:
    """Refuse an --out that cannot hold a run folder (a file, under a file, read-only), writing nothing."""
    if out.exists():
        if not out.is_dir():
            raise DriftlabError(f"--out {out}: is a file, not a folder")
        if not writable(out):
            raise DriftlabError(f"--out {out}: folder is read-only")
        return
    parent = out.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise DriftlabError(f"--out {out}: {parent} is a file, so no folder can be made under it")
    if not writable(parent):
        raise DriftlabError(f"--out {out}: {parent} is read-only")


def scenario_hashes(options: Options) -> dict[str, str]:
    """Content hash of every scenario file the run loads (a rerun after an edit is a changed run), keyed by a
    path that does not depend on where the clone lives: relative to the built-in scenario root, or to the
    ``--scenario-dir`` as given."""
    import scenarios

    root = Path(scenarios.__file__).resolve().parent

    def key(p: Path) -> str:
        resolved = p.resolve()
        return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(p)

    return {key(p): hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in scenario_files(tuple(options.scenario_dirs))}


def identity(request: Request) -> dict:
    o = request.options
    return {"profile": request.profile, "seed": request.seed, "mechanisms": list(o.mechanisms or []) or None,
            "backend": o.backend, "workloads": list(o.workloads) if o.workloads else None,
            "scenario_dirs": [str(d) for d in o.scenario_dirs], "extra": o.extra,
            "scenario_files": scenario_hashes(o)}


def check_identity(run_dir: Path, manifest: dict) -> bool:
    """True if the folder already holds this run; error if it holds another."""
    path = run_dir / "run.json"
    if not path.exists():
        if run_dir.exists() and any(p.name != ".lock" for p in run_dir.iterdir()):
            raise DriftlabError(f"--out {run_dir}: folder is not empty and holds no driftlab run")
        return False
    try:
        previous = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DriftlabError(f"--out {run_dir}: run.json is unreadable ({exc}); pick another --out") from None
    for key, value in manifest.items():
        if previous.get(key) != value:
            what = "scenario files changed since" if key == "scenario_files" else f"{key}={previous.get(key)!r}, not {value!r}"
            raise DriftlabError(f"--out {run_dir}: it holds a run with {what}; this is a changed run: "
                                "rerun with the same options and files or pick another --out")
    return True


class RunLock:
    """An exclusive OS lock on ``run_dir/.lock``, released when the process ends (however it ends)."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / ".lock"
        self.fd: int | None = None

    def __enter__(self) -> "RunLock":
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self.fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(self.fd)
            self.fd = None
            raise DriftlabError(f"--out {self.path.parent}: another driftlab run (pid {holder}) is using this folder; "
                                "wait for it or pick another --out") from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, str(os.getpid()).encode(), 0)
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the lock
            self.fd = None


def _folder(request: Request) -> tuple[Path, bool]:
    if request.out is not None:
        if not str(request.out).strip():
            raise DriftlabError("--out is empty: give a folder")
        return Path(request.out), False
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return default_runs() / f"{stamp}-{request.profile}", True


def link_latest(run_dir: Path) -> None:
    latest = run_dir.parent / "latest"
    tmp = run_dir.parent / f".latest.{os.getpid()}.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(run_dir.name)
    os.replace(tmp, latest)


def _seconds(request: Request, name: str, executions: int) -> float:
    """The declared cost of ``executions`` of one experiment on ``request.jobs`` workers, in seconds."""
    e = EXPERIMENTS[name]
    return executions * e.seconds_per_execution / (request.jobs if e.parallel else 1)


def _progress_line(k: int, name: str, cells: int, estimate: dict[str, float], order: tuple[str, ...],
                   elapsed: float) -> str:
    """``experiment k of N`` and the whole run's remaining time, the declared estimate scaled by how the
    experiments finished so far compare with theirs."""
    before = sum(estimate[n] for n in order[:k - 1])
    remaining = sum(estimate[n] for n in order[k - 1:])
    if before > 0 and elapsed > 1:
        remaining *= elapsed / before
    what = f"{cells} cell(s) to run" if cells else "every cell already done"
    return f"experiment {k} of {len(order)}: {name} ({what}); about {_duration(remaining)} left in all"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def _refuse_if_impossible(request: Request, executions: dict[str, int]) -> None:
    seconds = sum(_seconds(request, n, executions[n]) for n in executions)
    if seconds > MAX_HOURS * 3600:
        size = sum(executions.values())
        raise DriftlabError(f"this run is {size:,} executions, about {seconds / 3600:,.0f} hours on {request.jobs} job(s); "
                            f"the limit is {MAX_HOURS:.0f} hours (the paper profile is far smaller: --profile paper)")


def plan(request: Request) -> dict[str, list[Cell]]:
    """Validate everything and expand every grid, writing nothing; refuse impossible sizes.

    With ``--repetitions`` the size is estimated from a one-repetition plan
    first, so a huge request is refused before any grid is expanded.
    """
    options = request.options
    assign_mechanisms(options)
    for name in request.experiments:
        EXPERIMENTS[name].check(options)
    reps = options.extra.get("repetitions")
    if reps:
        probe = replace(options, extra={**options.extra, "repetitions": 1})
        _refuse_if_impossible(request, {n: reps * sum(c.repetitions for c in EXPERIMENTS[n].cells(request.profile, request.seed, probe))
                                        for n in request.experiments})
    cells = {name: EXPERIMENTS[name].cells(request.profile, request.seed, options) for name in request.experiments}
    if options.workloads:
        from scenarios import load_scenarios

        known = load_scenarios(tuple(options.scenario_dirs), family="revalidation")["revalidation"]
        unknown = [w for w in options.workloads if w not in known]
        if unknown:
            raise DriftlabError(f"--workloads: unknown workload {unknown[0]!r} (known: {', '.join(known)})")
        cells = {name: [c for c in cs if "workload" not in c.p or c.p["workload"] in options.workloads]
                 for name, cs in cells.items()}
    _refuse_if_impossible(request, {name: sum(c.repetitions for c in cs) for name, cs in cells.items()})
    return cells


def notes(request: Request) -> Iterator[str]:
    """One-line notes on what the request asks that some experiments cannot do."""
    o = request.options
    if o.scenario_dirs or o.workloads:
        for name in request.experiments:
            e = EXPERIMENTS[name]
            if not e.uses_user_scenarios and e.family == "revalidation":
                yield f"{name} runs the lab's own refund scenario only; --scenario-dir/--workloads do not apply to it"


def run(request: Request) -> Path:
    """Plan, claim the folder, run every pending cell, write provenance, analyse; returns the run folder."""
    from analysis.pipeline import analyze

    run_dir, is_default = _folder(request)
    cells = plan(request)
    usable_out(run_dir)
    manifest = identity(request)
    check_identity(run_dir, manifest)  # refuse a changed run before creating anything
    run_dir.mkdir(parents=True, exist_ok=True)
    with RunLock(run_dir):
        resumed = check_identity(run_dir, manifest)  # again, now that no other run can change the folder
        options = request.options
        options.run_dir = run_dir.resolve()  # experiments may run subprocesses in other folders
        shutil.rmtree(run_dir / "scratch", ignore_errors=True)  # temporary databases of a killed run
        if not resumed:
            tmp = run_dir / "run.json.tmp"
            tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True))
            tmp.replace(run_dir / "run.json")
        if is_default:
            link_latest(run_dir)
        say = (lambda msg: None) if request.quiet else (lambda msg: print(f"driftlab: {msg}", file=sys.stderr))
        say(f"run folder {run_dir}")
        for note in notes(request):
            print(f"driftlab: note: {note}", file=sys.stderr)
        done = {}
        estimate = {n: _seconds(request, n, sum(c.repetitions for c in pending(run_dir, cells[n])))
                    for n in request.experiments}
        started = time.perf_counter()
        for k, name in enumerate(request.experiments, 1):
            todo = pending(run_dir, cells[name])
            say(_progress_line(k, name, len(todo), estimate, request.experiments, time.perf_counter() - started))
            t0 = time.perf_counter()
            written = run_cells(EXPERIMENTS[name], cells[name], options, run_dir, request.jobs,
                                progress=not request.quiet, executor=request.executor, scheduler=request.scheduler,
                                label=f"[{k}/{len(request.experiments)}] {name}")
            done[name] = {"cells": len(cells[name]), "cells_run_now": len(todo), "records_written_now": written,
                          "wall_seconds": round(time.perf_counter() - t0, 3)}
        shutil.rmtree(run_dir / "scratch", ignore_errors=True)
        write_provenance(run_dir, profile=request.profile, seed=request.seed, jobs=request.jobs, experiments=done,
                         resumed=resumed, executor=request.executor)
        analyze(run_dir, all_artifacts())
    return run_dir
