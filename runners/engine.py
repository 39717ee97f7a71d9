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
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import psutil

from analysis.artifact import Artifact
from analysis.pipeline import check_layout, json_kind, writable
from analysis.records import experiments_in
from mechanisms import family_of_name
from runners.execute import Part, pending, run_together
from runners.experiment import Cell, DriftlabError, Experiment, Options
from runners.experiments import EXPERIMENTS, FAMILIES
from runners.interrupt import raise_if_interrupted
from runners import timings
from runners.provenance import write_provenance
from runners.workers import keep_from_workers
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
    cell_timeout: float | None = None  # seconds; None: each experiment's default (Experiment.time_limit)


def select(only: str | None) -> list[str]:
    """Experiment names for ``--only`` (a family or an artifact name)."""
    if only is None:
        return list(EXPERIMENTS)
    if only in FAMILIES:
        names = EXPERIMENTS.of_family(only)
        if not names:
            raise DriftlabError(f"--only {only}: the {only} family has no experiments in this version of driftlab")
        return names
    if only in EXPERIMENTS:
        return [only]
    raise DriftlabError(f"--only {only!r} is neither a family ({', '.join(FAMILIES)}) nor an artifact ({', '.join(EXPERIMENTS)})")


def artifacts_of(experiment: Experiment) -> list[Artifact]:
    return [a if a.experiment else replace(a, experiment=experiment.name) for a in experiment.artifacts]


def all_artifacts(run_dir: Path | None = None) -> list[Artifact]:
    """Every experiment's artifacts; given a run folder, only those of the experiments with records in it, so that
    analysing one family's run imports no other family (the resume family's modules import LangGraph and the guard:
    about a second of every command)."""
    present = set(EXPERIMENTS if run_dir is None else experiments_in(run_dir))
    names = [n for n in EXPERIMENTS if n in present]
    return [a for n in names for a in artifacts_of(EXPERIMENTS[n])]


def map_in_workers(fn, items: list, workers: int = 2) -> list:
    """``analysis.pipeline.analyze``'s ``map_all``: ``fn`` of each item (an experiment's artifacts: its tables,
    figures and report section) in forked worker processes, handed back in the order given.  An item whose ``fn``
    raised in a worker is run again here, so its error is raised as it would be without workers."""
    from analysis.pipeline import map_here
    from runners.workers import run_workers

    if len(items) < 2 or workers < 2 or (os.cpu_count() or 1) < 2:
        return map_here(fn, items)

    def one(i: int):
        try:
            return (fn(items[i]),)
        except Exception:  # noqa: BLE001 - said again in the main process, with its own traceback
            return None

    got = dict(run_workers(one, list(range(len(items))), workers, None))
    return [got[i][0] if got[i] is not None else fn(items[i]) for i in range(len(items))]


def assign_mechanisms(options: Options) -> None:
    """Split --mechanisms by the family whose protocol each implements; a name that fits none is refused."""
    options.mechanism_families = {}
    for name in options.mechanisms or ():
        for fam in family_of_name(name):
            options.mechanism_families.setdefault(fam, ())
            options.mechanism_families[fam] += (name,)


def usable_out(out: Path) -> None:
    """Refuse an --out that cannot hold a run folder (a file, under a file, read-only, a dangling or looping
    symbolic link, a name longer than the file system allows), writing nothing."""
    long = next((part for part in out.parts if len(os.fsencode(part)) > 255), None)
    if long is not None or len(os.fsencode(str(out))) > 4000:
        what = f"the name {long[:40]}... is {len(os.fsencode(long))} bytes" if long else "the path is too long"
        raise DriftlabError(f"--out {str(out)[:60]}...: {what} (at most 255 bytes a name, 4000 a path)")
    try:
        out.resolve(strict=False)
    except (RuntimeError, OSError) as exc:  # a symlink loop (RuntimeError before Python 3.13)
        raise DriftlabError(f"--out {out}: a symbolic link that loops ({getattr(exc, 'strerror', None) or exc})") from None
    if out.is_symlink() and not out.exists():
        raise DriftlabError(f"--out {out}: is a symbolic link to {os.readlink(out)}, which does not exist")
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
    out = {"profile": request.profile, "seed": request.seed, "mechanisms": list(o.mechanisms or []) or None,
           "backend": o.backend, "workloads": list(o.workloads) if o.workloads else None,
           "scenario_dirs": [str(d) for d in o.scenario_dirs], "extra": o.extra,
           "scenario_files": scenario_hashes(o)}
    if any(EXPERIMENTS[n].family == "resume" for n in request.experiments):
        from runners.resume.envs import run_locks  # a changed env lock is a changed run (issue 24 §5)

        default = None if "resume_frameworks" in request.experiments else []
        locks = run_locks(list(o.mechanisms) if o.mechanisms else default)
        if locks:
            out["env_locks"] = locks
    return out


#: what a run killed before its run.json was in place can leave: the lab's own, so a rerun takes the folder
OWN_TEMPORARY = frozenset({".lock", "run.json.tmp", "scratch"})


def check_identity(run_dir: Path, manifest: dict) -> bool:
    """True if the folder already holds this run; error if it holds another."""
    path = run_dir / "run.json"
    if not path.exists() and not path.is_symlink():
        if run_dir.exists() and any(p.name not in OWN_TEMPORARY for p in run_dir.iterdir()):
            raise DriftlabError(f"--out {run_dir}: folder is not empty and holds no driftlab run")
        return False
    try:
        previous = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        problem = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        raise DriftlabError(f"--out {run_dir}: run.json is unreadable ({problem}); pick another --out") from None
    if not isinstance(previous, dict):
        raise DriftlabError(f"--out {run_dir}: run.json holds {json_kind(previous)}, not a driftlab run's "
                            "identity (an object); pick another --out")
    for key, value in manifest.items():
        if previous.get(key) != value:
            what = ("scenario files changed since" if key == "scenario_files" else "environment locks changed since "
                    f"({', '.join(sorted(k for k in {*value, *(previous.get(key) or {})} if (previous.get(key) or {}).get(k) != value.get(k)))})"
                    if key == "env_locks" else f"{key}={previous.get(key)!r}, not {value!r}")
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
        keep_from_workers(self.fd)  # a worker outliving this process must never hold the folder
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            keep_from_workers(None)
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


#: memory one worker process holds (the lab's libraries mapped plus a cell's data), for refusing --jobs
MEMORY_PER_JOB = 200 * 2**20


def estimate_seconds(request: Request, cells: dict[str, list[Cell]], scale: float = 1.0) -> float:
    """Estimated wall time: every cell's :meth:`Experiment.seconds` (repetitions, rounds, declared work...),
    divided by the parallelism the machine really has (``--jobs``, at most its cores)."""
    cores = min(request.jobs, os.cpu_count() or 1)
    return sum(EXPERIMENTS[n].seconds(c, request.options) * scale / (cores if EXPERIMENTS[n].parallel else 1)
               for n, cs in cells.items() for c in cs)


def _progress_line(k: int, name: str, cells: int, order: tuple[str, ...], left: float) -> str:
    """``experiment k of N`` and the whole run's remaining time (:func:`runners.timings.remaining`)."""
    what = f"{cells} cell(s) to run" if cells else "every cell already done"
    return f"experiment {k} of {len(order)}: {name} ({what}); about {_duration(left)} left in all"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def _refuse_if_impossible(request: Request, cells: dict[str, list[Cell]], scale: float = 1.0) -> None:
    seconds = estimate_seconds(request, cells, scale)
    if seconds > MAX_HOURS * 3600:
        size = sum(c.repetitions for cs in cells.values() for c in cs) * scale
        raise DriftlabError(f"this run is {size:,.0f} executions, about {seconds / 3600:,.0f} hours on {request.jobs} "
                            f"job(s); the limit is {MAX_HOURS:.0f} hours (the paper profile is far smaller: --profile paper)")
    workers = min(request.jobs, max((len(cs) for cs in cells.values()), default=1))
    memory = psutil.virtual_memory().total
    if workers * MEMORY_PER_JOB > memory:
        raise DriftlabError(f"--jobs {request.jobs}: {workers:,} worker processes need about "
                            f"{workers * MEMORY_PER_JOB / 2**30:,.0f} GB; this machine has {memory / 2**30:,.0f} GB")


def check_flags(request: Request) -> None:
    """Refuse a flag that would mislead if ignored: mechanisms of no selected experiment's family."""
    o = request.options
    families = {EXPERIMENTS[n].family for n in request.experiments}
    if o.mechanisms and not families & set(o.mechanism_families or {}):
        name = o.mechanisms[0]
        fams = ", ".join(family_of_name(name))
        raise DriftlabError(f"--mechanisms {','.join(o.mechanisms)}: mechanisms of {fams}, and no selected experiment "
                            f"is of that family ({', '.join(sorted(families))}); running the defaults instead would "
                            "mislead")


def plan(request: Request) -> dict[str, list[Cell]]:
    """Validate everything and expand every grid, writing nothing; refuse impossible sizes.

    With ``--repetitions`` the size is estimated from a one-repetition plan
    first, so a huge request is refused before any grid is expanded.
    """
    options = request.options
    if any(EXPERIMENTS[n].family == "resume" for n in request.experiments) and (
            options.mechanisms or "resume_frameworks" in request.experiments):
        from runners.resume.envs import check_declarations  # a broken env file is named, not "unknown mechanism"

        check_declarations()
    assign_mechanisms(options)
    check_flags(request)
    for name in request.experiments:
        EXPERIMENTS[name].check(options)
    reps = options.extra.get("repetitions")
    if reps:
        probe = replace(options, extra={**options.extra, "repetitions": 1})
        _refuse_if_impossible(request, {n: EXPERIMENTS[n].cells(request.profile, request.seed, probe)
                                        for n in request.experiments}, reps)
    cells = {name: EXPERIMENTS[name].cells(request.profile, request.seed, options) for name in request.experiments}
    if options.workloads and any(EXPERIMENTS[n].family == "revalidation" for n in request.experiments):
        from scenarios import load_scenarios

        known = load_scenarios(tuple(options.scenario_dirs), family="revalidation")["revalidation"]
        unknown = [w for w in options.workloads if w not in known]
        if unknown:
            raise DriftlabError(f"--workloads: unknown workload {unknown[0]!r} (known: {', '.join(known)})")
        cells = {name: [c for c in cs if "workload" not in c.p or c.p["workload"] in options.workloads]
                 for name, cs in cells.items()}
    _refuse_if_impossible(request, cells)
    return cells


def notes(request: Request) -> Iterator[str]:
    """One-line notes on what the request asks that some experiments cannot do (said, then ignored)."""
    o = request.options
    selected = [EXPERIMENTS[n] for n in request.experiments]
    families = {e.family for e in selected}
    if o.scenario_dirs or o.workloads:
        for e in selected:
            if not e.uses_user_scenarios and e.family == "revalidation":
                yield f"{e.name} runs the lab's own refund scenario only; --scenario-dir/--workloads do not apply to it"
    for fam, names in (o.mechanism_families or {}).items():
        if fam not in families:
            yield (f"--mechanisms {', '.join(names)}: {fam} mechanism(s), and no selected experiment is of the {fam} "
                   "family; ignored")
    for e in selected:
        if not e.uses_mechanisms and e.family in (o.mechanism_families or {}):
            yield f"{e.name} runs its own mechanisms only; --mechanisms does not apply to it"
    if o.workloads and "revalidation" not in families:
        yield "--workloads names revalidation workloads, and no selected experiment is of that family; ignored"
    if o.backend != "sqlite" and not any(e.uses_backend for e in selected):
        yield (f"--backend {o.backend}: none of the selected experiments ({', '.join(request.experiments)}) runs on a "
               "chosen backend; ignored")
    if request.scheduler and request.executor != "dask":
        yield f"--scheduler {request.scheduler} applies only with --executor dask; ignored (cells run locally)"


def check_scheduler(address: str) -> None:
    """Refuse a Dask scheduler that does not answer, before anything is written."""
    from dask.distributed import Client

    try:
        Client(address, timeout="5s").close()
    except (OSError, TimeoutError) as exc:
        raise DriftlabError(f"--scheduler {address}: cannot connect ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    except ValueError as exc:
        raise DriftlabError(f"--scheduler {address}: {str(exc).splitlines()[0]}") from None


def time_limit(request: Request, cells: list[Cell], experiment: Experiment) -> float:
    """``--cell-timeout``, else the longest default limit of the experiment's cells."""
    if request.cell_timeout is not None:
        return request.cell_timeout
    return max((experiment.time_limit(c, request.options) for c in cells), default=experiment.cell_timeout_s)



def batches(request: Request) -> list[list[str]]:
    """The order experiments run in: each benchmark (an experiment that wants a quiet machine) first and alone, then
    every other experiment's cells in one pool of workers, where a worker freed in one experiment's last cells takes
    the next one's (``runners.execute.run_together``); on Dask, one experiment at a time."""
    alone = [n for n in request.experiments if not EXPERIMENTS[n].parallel]
    rest = [n for n in request.experiments if EXPERIMENTS[n].parallel]
    if request.executor == "dask":
        return [[n] for n in alone + rest]
    return [[n] for n in alone] + ([rest] if rest else [])


def _earlier_walls(run_dir: Path) -> dict[str, float]:
    """The wall seconds an earlier invocation on this run folder recorded per experiment (none if none finished)."""
    try:
        return dict(json.loads((run_dir / "provenance.json").read_text(encoding="utf-8"))["wall_seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}

def run(request: Request) -> Path:
    """Plan, claim the folder, run every pending cell, write provenance, analyse; returns the run folder."""
    from analysis.pipeline import analyze

    run_dir, is_default = _folder(request)
    usable_out(run_dir)  # before the experiments' checks, which may build a framework's environment
    cells = plan(request)
    manifest = identity(request)
    check_identity(run_dir, manifest)  # refuse a changed run before creating anything
    if run_dir.is_dir():
        check_layout(run_dir)  # what a rerun keeps must be readable: refuse now, not after its cells ran
    if request.executor == "dask" and request.scheduler:
        check_scheduler(request.scheduler)
    for note in notes(request):
        print(f"driftlab: note: {note}", file=sys.stderr)
    run_dir.mkdir(parents=True, exist_ok=True)
    with RunLock(run_dir):
        resumed = check_identity(run_dir, manifest)  # again, now that no other run can change the folder
        options = request.options
        options.run_dir = run_dir.resolve()  # experiments may run subprocesses in other folders
        shutil.rmtree(run_dir / "scratch", ignore_errors=True)  # temporary databases of a killed run
        for name in request.experiments:
            EXPERIMENTS[name].prepare(options)
        if not resumed:
            tmp = run_dir / "run.json.tmp"
            tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True))
            tmp.replace(run_dir / "run.json")
        if is_default:
            link_latest(run_dir)
        say = (lambda msg: None) if request.quiet else (lambda msg: print(f"driftlab: {msg}", file=sys.stderr))
        say(f"run folder {run_dir}")
        done = {}
        todo_of = {n: pending(run_dir, cells[n]) for n in request.experiments}
        declared = {n: estimate_seconds(request, {n: todo_of[n]}) for n in request.experiments}
        key = f"{request.profile}/j{request.jobs}"
        known = timings.load()
        per_cell = {n: known[f"{key}/{n}"] for n in request.experiments if f"{key}/{n}" in known}
        measured: dict[str, tuple[float, float]] = {}  # finished experiment -> (wall seconds, declared)
        earlier = _earlier_walls(run_dir)  # a rerun that finds an experiment done keeps the time it took then
        runs = batches(request)
        order = [name for batch in runs for name in batch]

        def begin(name: str, n: int) -> None:
            k = order.index(name) + 1
            left = timings.remaining(order[k - 1:], {n: len(todo_of[n]) for n in todo_of}, declared, per_cell, measured)
            say(_progress_line(k, name, n, tuple(order), left))

        for batch in runs:
            parts = [Part(EXPERIMENTS[n], cells[n], f"[{order.index(n) + 1}/{len(order)}] {n}",
                          time_limit(request, cells[n], EXPERIMENTS[n])) for n in batch]
            got = run_together(parts, options, run_dir, request.jobs, progress=not request.quiet,
                               executor=request.executor, scheduler=request.scheduler, begin=begin)
            for name in batch:
                written, wall = got[name]
                todo = todo_of[name]
                done[name] = {"cells": len(cells[name]), "cells_run_now": len(todo), "records_written_now": written,
                              "wall_seconds": round(wall, 3) if todo or name not in earlier else earlier[name]}
                if todo:  # an experiment whose cells were all done says nothing about how long cells take
                    measured[name] = (done[name]["wall_seconds"], declared[name])
                    timings.remember(key, name, done[name]["wall_seconds"], len(todo))
        done = {name: done[name] for name in request.experiments}
        raise_if_interrupted()  # a Ctrl-C swallowed after the last cell still stops before the report
        shutil.rmtree(run_dir / "scratch", ignore_errors=True)
        write_provenance(run_dir, profile=request.profile, seed=request.seed, jobs=request.jobs, experiments=done,
                         resumed=resumed, executor=request.executor)
        analyze(run_dir, all_artifacts(run_dir), map_in_workers)
    return run_dir
