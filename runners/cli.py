"""The ``driftlab`` command: reproduce, compare, sweep, analyze, list.

Bad input (unknown mechanism, malformed scenario file, impossible
parameters) is reported as one line on stderr with exit code 2, before
anything is written.  Long work shows a progress bar; an interrupted run is
resumed by running the same command with the same ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from mechanisms import REVALIDATION, MechanismError
from runners.execute import pending, run_cells
from runners.experiment import PROFILES, DriftlabError, Options
from runners.experiments import EXPERIMENTS, FAMILIES
from runners.provenance import write_provenance
from scenarios.workload import ScenarioError, load_workloads

RUNS = Path("data") / "runs"


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


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _mechanisms(text: str) -> tuple[str, ...]:
    names = tuple(m.strip() for m in text.split(",") if m.strip())
    if not names:
        raise argparse.ArgumentTypeError("no mechanism named")
    return names


def run_folder(out: str | None, profile: str) -> tuple[Path, bool]:
    if out:
        return Path(out), False
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return RUNS / f"{stamp}-{profile}", True


def link_latest(run_dir: Path) -> None:
    latest = run_dir.parent / "latest"
    tmp = run_dir.parent / ".latest.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(run_dir.name)
    os.replace(tmp, latest)


def check_manifest(run_dir: Path, manifest: dict) -> bool:
    """True if the folder already holds this run; error if it holds another."""
    path = run_dir / "run.json"
    if not path.exists():
        if run_dir.exists() and any(run_dir.iterdir()):
            raise DriftlabError(f"--out {run_dir}: folder is not empty and holds no driftlab run")
        return False
    previous = json.loads(path.read_text())
    for key, value in manifest.items():
        if previous.get(key) != value:
            raise DriftlabError(f"--out {run_dir}: it holds a run with {key}={previous.get(key)!r}, not {value!r}; "
                                "rerun with the same options or pick another --out")
    return True


def reproduce(args: argparse.Namespace, names: list[str] | None = None) -> int:
    from analysis.pipeline import analyze

    names = names or select(args.only)
    options = Options(mechanisms=args.mechanisms, scenario_dirs=tuple(args.scenario_dir or ()),
                      backend=getattr(args, "backend", "sqlite"),
                      extra={k: v for k, v in (("repetitions", args.repetitions), *getattr(args, "extra", {}).items()) if v})
    # Validate everything, and expand every grid, before a single file is written.
    for name in names:
        EXPERIMENTS[name].check(options)
    cells = {name: EXPERIMENTS[name].cells(args.profile, args.seed, options) for name in names}

    run_dir, is_default = run_folder(args.out, args.profile)
    manifest = {"profile": args.profile, "seed": args.seed, "mechanisms": list(args.mechanisms or []) or None,
                "scenario_dirs": [str(Path(d).resolve()) for d in options.scenario_dirs], "extra": options.extra}
    resumed = check_manifest(run_dir, manifest)
    run_dir.mkdir(parents=True, exist_ok=True)
    options.run_dir = run_dir.resolve()  # experiments may run subprocesses in other folders
    shutil.rmtree(run_dir / "scratch", ignore_errors=True)  # temporary databases of a killed run
    if not resumed:
        (run_dir / "run.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    if is_default:
        link_latest(run_dir)
    print(f"driftlab: run folder {run_dir}", file=sys.stderr)

    done = {}
    try:
        for name in names:
            todo = pending(run_dir, cells[name])
            t0 = time.perf_counter()
            written = run_cells(EXPERIMENTS[name], cells[name], options, run_dir, args.jobs, progress=not args.quiet)
            done[name] = {"cells": len(cells[name]), "cells_run_now": len(todo), "records_written_now": written,
                          "wall_seconds": round(time.perf_counter() - t0, 3)}
    except KeyboardInterrupt:
        print(f"driftlab: interrupted; finished cells are kept in {run_dir}; run the same command to go on",
              file=sys.stderr)
        return 130
    shutil.rmtree(run_dir / "scratch", ignore_errors=True)
    write_provenance(run_dir, profile=args.profile, seed=args.seed, jobs=args.jobs, experiments=done,
                     resumed=resumed)
    analyze(run_dir)
    print(f"driftlab: report {run_dir / 'report.md'}", file=sys.stderr)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    import pandas as pd

    from analysis.report import markdown_table

    code = reproduce(args, ["revalidation_outcomes"])
    if code == 0:
        run_dir = run_folder(args.out, args.profile)[0] if args.out else RUNS / "latest"
        table = pd.read_csv(run_dir / "tables" / "revalidation_outcomes.csv")
        print(markdown_table(table[table["mutation_class"] == "all"].drop(columns="mutation_class")))
    return code


def _points(cast, low: float, high: float, what: str):
    """An argparse type: a comma-separated list of numbers in [low, high], deduplicated and sorted."""
    def parse(text: str) -> list:
        try:
            points = sorted({cast(x) for x in text.split(",") if x.strip()})
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of {cast.__name__} values") from None
        if not points or points[0] < low or points[-1] > high:
            raise argparse.ArgumentTypeError(what)
        return points
    return parse


_reads = _points(int, 1, float("inf"), "read counts must be at least 1")
_rates = _points(float, 0, 1, "omission rates are probabilities between 0 and 1")


#: sweep name -> (experiment it runs, option it sets, parser of the points)
SWEEPS = {
    "reads": ("revalidation_scaling", "reads", _reads, "recorded reads per point, e.g. 13,29,61,125"),
    "omission": ("revalidation_omission", "rates", _rates, "omission probabilities, e.g. 0,0.01,0.05,0.1"),
}


def cmd_sweep(args: argparse.Namespace) -> int:
    experiment, key, _, _ = SWEEPS[args.sweep]
    if experiment not in EXPERIMENTS:
        raise DriftlabError(f"sweep {args.sweep}: experiment {experiment} is not in this version of driftlab")
    args.extra = {key: getattr(args, key), "rounds": getattr(args, "rounds", None)}
    return reproduce(args, [experiment])


def cmd_analyze(args: argparse.Namespace) -> int:
    from analysis.pipeline import analyze

    run_dir = Path(args.run_dir).resolve()  # `data/runs/latest` -> the run's own folder name
    if not (run_dir / "records").is_dir():
        raise DriftlabError(f"{run_dir}: not a run folder (no records/ inside)")
    sections = analyze(run_dir)
    print(f"driftlab: rebuilt {len(sections)} artifact(s) and {run_dir / 'report.md'}", file=sys.stderr)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from scenarios.schedules import load_schedules

    print("experiments (artifacts):")
    for name, e in EXPERIMENTS.items():
        print(f"  {name:28s} [{e.family}] {e.description}")
    print("scenarios (workloads):")
    for name, w in load_workloads(tuple(args.scenario_dir or ())).items():
        print(f"  {name:28s} {w.description}  ({w.path})")
    print("schedules:")
    for s in load_schedules():
        print(f"  {s.id:28s} {s.description.splitlines()[0][:90]}")
    print("mechanisms (revalidation):")
    for name, path in REVALIDATION.items():
        print(f"  {name:28s} {path}")
    print("faults:")
    from faults import FAULTS

    for name, doc in FAULTS.items():
        print(f"  {name:28s} {doc}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, but bad input is one line on stderr and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="driftlab", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    def run_options(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--profile", choices=PROFILES, default="quick", help="quick (CI, about a minute) or paper (full scale)")
        sp.add_argument("--jobs", type=_positive, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
        sp.add_argument("--seed", type=int, default=20260901, help="base seed; every cell's seed derives from it")
        sp.add_argument("--out", help="run folder (default data/runs/<run-id>/, with a 'latest' link)")
        sp.add_argument("--scenario-dir", action="append", help="extra folder of workload files (repeatable)")
        sp.add_argument("--repetitions", type=_positive, help="override the profile's repetitions per cell")
        sp.add_argument("--quiet", action="store_true", help="no progress bar")

    r = sub.add_parser("reproduce", help="run the experiments of a profile and build every artifact")
    run_options(r)
    r.add_argument("--only", help=f"a family ({', '.join(FAMILIES)}) or one artifact")
    r.add_argument("--mechanisms", type=_mechanisms, help="mechanisms to run (names or package.module:Class)")
    r.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite", help="shared store for cross-process experiments")
    r.set_defaults(func=reproduce)

    c = sub.add_parser("compare", help="the controlled cells, mechanisms side by side")
    run_options(c)
    c.add_argument("--mechanisms", type=_mechanisms, default=("ATR", "FullScan", "VersionAbort", "NoCheck"))
    c.set_defaults(func=cmd_compare, only=None)

    sw = sub.add_parser("sweep", help="the papers' sweeps at any points you pick")
    sweeps = sw.add_subparsers(dest="sweep", required=True)
    for name, (experiment, key, parse, hint) in SWEEPS.items():
        one = sweeps.add_parser(name, help=f"run {experiment} at the given points")
        run_options(one)
        one.add_argument(f"--{key}", type=parse, required=True, help=hint)
        if name == "reads":
            one.add_argument("--rounds", type=_positive, help="timed validations per repetition (default: profile's)")
        one.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
        one.set_defaults(func=cmd_sweep, mechanisms=None)

    a = sub.add_parser("analyze", help="rebuild tables, figures and report of a run folder from its records")
    a.add_argument("run_dir")
    a.set_defaults(func=cmd_analyze)

    ls = sub.add_parser("list", help="experiments, scenarios, schedules, mechanisms and faults known")
    ls.add_argument("--scenario-dir", action="append")
    ls.set_defaults(func=cmd_list)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if os.getcwd() not in sys.path:  # so --mechanisms my_module:MyMechanism finds the user's module, as `python -m` would
        sys.path.insert(0, os.getcwd())
    try:
        return args.func(args)
    except (DriftlabError, ScenarioError, MechanismError) as exc:
        print(f"driftlab: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
