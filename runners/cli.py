"""The ``driftlab`` command: parse arguments, call the engine, map errors to exit codes.

Commands: reproduce, compare, sweep, analyze, check, list.  All the work is
in :mod:`runners.engine` (runs), :mod:`analysis.pipeline` (tables, figures,
report) and the checkers; this module only turns arguments into typed
requests.  Bad input (unknown names, malformed files, impossible sizes, an
unusable ``--out``) is one line on stderr and exit code 2, with nothing
written; ``check`` exits 0 valid, 1 invalid, 2 unknown or bad input.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from runners.experiment import PROFILES, DriftlabError, Options

DEFAULT_SEED = 20260901

ABOUT = ("driftlab is a benchmarking and fault-injection lab for the consistency of long-running AI agent "
         "workflows: it reruns three 2026 papers' experiments (decision revalidation, semantic isolation, resume "
         "semantics) on real processes and stores, and writes every table and figure beside the published number.")
EXAMPLES = """examples:
  driftlab reproduce --profile quick            every experiment at CI scale -> data/runs/<run-id>/report.md
  driftlab reproduce --only resume              one family (revalidation, isolation, resume) or one artifact
  driftlab compare --mechanisms SRC,SSI         mechanisms of any family side by side
  driftlab check RUN/histories/EXP/CELL.jsonl   judge a history (yours too): exit 0 valid, 1 invalid, 2 unknown
  driftlab list                                 experiments, scenarios, mechanisms, checkers, faults
"""


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


#: the longest --cell-timeout: 30 days (a larger one overflows the timers that enforce it)
MAX_CELL_TIMEOUT_S = 30 * 86400


def _cell_seconds(text: str) -> float:
    value = _seconds(text)
    if value > MAX_CELL_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_CELL_TIMEOUT_S} seconds (30 days), got {text}")
    return value


def _names(what: str):
    """An argparse type: a comma-separated list of names; a repeated name is dropped, and said so."""
    def parse(text: str) -> tuple[str, ...]:
        names = [m.strip() for m in text.split(",") if m.strip()]
        if not names:
            raise argparse.ArgumentTypeError(f"no {what} named")
        unique = tuple(dict.fromkeys(names))
        if len(unique) < len(names):
            repeated = sorted({n for n in names if names.count(n) > 1})
            print(f"driftlab: note: {what} {', '.join(repeated)} named more than once; running each once",
                  file=sys.stderr)
        return unique
    return parse


def _request(args: argparse.Namespace, experiments: list[str], extra: dict | None = None):
    from runners.engine import Request

    extra = {k: v for k, v in {"repetitions": args.repetitions, **(extra or {})}.items() if v is not None}
    options = Options(mechanisms=getattr(args, "mechanisms", None), scenario_dirs=tuple(args.scenario_dir or ()),
                      backend=getattr(args, "backend", "sqlite"), workloads=getattr(args, "workloads", None), extra=extra)
    return Request(tuple(experiments), profile=args.profile, seed=args.seed, jobs=args.jobs,
                   out=args.out, quiet=args.quiet, cell_timeout=args.cell_timeout,
                   executor=args.executor, scheduler=args.scheduler, options=options)


def _run(request) -> int:
    from runners.engine import run
    from runners.interrupt import sticky

    try:
        with sticky():
            run_dir = run(request)
    except KeyboardInterrupt:
        print("driftlab: interrupted; finished cells are kept; run the same command to go on", file=sys.stderr)
        return 130
    print(f"driftlab: report {run_dir / 'report.md'}", file=sys.stderr)
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from runners.engine import select

    request = _request(args, select(args.only))
    request.options.only = args.only
    return _run(request)


def cmd_compare(args: argparse.Namespace) -> int:
    import pandas as pd

    from analysis.report import markdown_table
    from mechanisms import family_of_name
    from runners.engine import artifacts_of, default_runs
    from runners.experiments import EXPERIMENTS

    families = {f for name in args.mechanisms for f in family_of_name(name)}
    names = [n for n, e in EXPERIMENTS.items() if e.compare and e.family in families]
    if not names:
        raise DriftlabError(f"compare: no experiment compares mechanisms of {', '.join(sorted(families))}")
    request = _request(args, names)
    code = _run(request)
    if code == 0:
        run_dir = Path(request.out) if request.out is not None else default_runs() / "latest"
        for name in names:
            experiment = EXPERIMENTS[name]
            first = artifacts_of(experiment)[0].name
            table = pd.read_csv(run_dir / "tables" / f"{first}.csv")
            print(f"## {first}\n")
            print(markdown_table(experiment.compare_table(table)))
    return code


def cmd_sweep(args: argparse.Namespace) -> int:
    return _run(_request(args, [args.experiment], {args.option: getattr(args, args.option.replace("-", "_")),
                                                   **{k: getattr(args, k, None) for k in ("rounds",)}}))


def cmd_analyze(args: argparse.Namespace) -> int:
    from analysis.pipeline import analyze
    from runners.engine import all_artifacts, map_in_workers

    run_dir = Path(args.run_dir).resolve()  # `data/runs/latest` -> the run's own folder name
    sections = analyze(run_dir, all_artifacts(run_dir), map_in_workers)
    print(f"driftlab: rebuilt {len(sections)} artifact(s) and {run_dir / 'report.md'}", file=sys.stderr)
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    """The report's opening Findings, printed; ``--headline`` the frameworks' table; ``--readme`` the README's blocks."""
    from runners import summary

    run_dir = Path(args.run_dir)
    if args.headline:
        print(summary.headline(run_dir).rstrip())
    elif args.readme:
        written = summary.write_readme(run_dir, Path(args.readme))
        print(f"driftlab: {written} block(s) of {args.run_dir} written into {args.readme}", file=sys.stderr)
    else:
        print(summary.findings(run_dir))
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    """``env add FRAMEWORK==RELEASE``: write, lock, check and build an environment; ``env list``: every one."""
    from runners.resume import env_add

    if args.env_command == "add":
        name, rows = env_add.add(args.request)
        print(f"driftlab: environment {name} written, locked and built (data/envs/{name}); judge it with:\n"
              f"  driftlab reproduce --only resume_frameworks --mechanisms {','.join(rows)}")
        return 0
    import pandas as pd

    from analysis.report import markdown_table

    print(markdown_table(pd.DataFrame(env_add.listing())).rstrip())
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from runners.check import check
    from vocabulary import Verdict

    try:
        outcome = check(Path(args.history), args.checker, jobs=args.jobs, allow_unknown=args.allow_unknown_ops,
                        max_bytes=args.max_bytes)
    except KeyboardInterrupt:
        print("driftlab: interrupted; no verdict", file=sys.stderr)
        return 130
    if outcome.plan.unknown:
        extra = ", ".join(f"{name} ({n})" for name, n in sorted(outcome.plan.unknown.items()))
        print(f"driftlab: note: accepted operations the {outcome.plan.family} family does not declare: {extra}",
              file=sys.stderr)
    try:
        print(outcome.json() if args.format == "json" else outcome.prose(), flush=True)
    except BrokenPipeError:  # `driftlab check h.jsonl | head`: the reader left; the exit code still says the verdict
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if outcome.verdict is Verdict.UNKNOWN:
        print("driftlab: an unknown verdict is not a valid one: some outcome could not be determined", file=sys.stderr)
    return outcome.verdict.exit_code


def cmd_list(args: argparse.Namespace) -> int:
    from analysis.checkers import checkers
    from faults import FAULTS
    from mechanisms import FAMILIES as MECHANISM_FAMILIES
    from runners.experiments import EXPERIMENTS, FAMILIES
    from scenarios import load_scenarios

    scenarios = load_scenarios(tuple(args.scenario_dir or ()))
    for family in FAMILIES:
        print(f"[{family}]")
        print("  experiments (artifacts):")
        for name, e in EXPERIMENTS.items():
            if e.family == family:
                sweeps = f"  (sweep {', '.join(e.sweeps)})" if e.sweeps else ""
                _item(name, f"{e.description}{sweeps}")
                for item, text in e.listing():
                    _item(item, text, indent=6)
        print("  scenarios:")
        for name, s in scenarios.get(family, {}).items():
            _item(name, f"{getattr(s, 'description', '')}  ({_shown(getattr(s, 'path', ''))})")
        fam = MECHANISM_FAMILIES.get(family)
        print("  mechanisms" + (f" ({fam.protocol}):" if fam else ":"))
        for name, path in (fam.registry.items() if fam else ()):
            _item(name, path)
        print("  checkers:")
        for name, c in checkers(family).items():
            _item(name, first_sentence(type(c).__doc__ or ""))
    print("[faults]")
    for name, doc in FAULTS.items():
        _item(name, doc)
    return 0


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring's first paragraph, whole (never cut mid-word)."""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[:end + 1]


def _item(name: str, text: str, indent: int = 4) -> None:
    """One `driftlab list` entry: the name, then its text wrapped at word boundaries to the terminal's width."""
    import shutil
    import textwrap

    width = max(60, shutil.get_terminal_size((100, 24)).columns)
    lead = " " * indent + f"{name:{34 - indent}s} "
    if len(lead) > 35:  # a long name gets its own line
        print(lead.rstrip())
        lead = " " * 35
    print(textwrap.fill(text, width=width, initial_indent=lead, subsequent_indent=" " * 35, break_long_words=False,
                        break_on_hyphens=False))


def _shown(path) -> str:
    """A scenario's path relative to the current folder when it is under it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        return str(path)


class _Parser(argparse.ArgumentParser):
    """argparse, but bad input is one line on stderr and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def add_check(sub) -> None:
    """The ``check`` command (alone, it needs none of the experiments: ``driftlab check`` imports only the checkers)."""
    from runners.check import MAX_BYTES

    ck = sub.add_parser("check", help="run the checkers on a history file (exit 0 valid, 1 invalid, 2 unknown)")
    ck.add_argument("history", help="a history in driftlab's JSON Lines format (histories/<experiment>/<cell>.jsonl)")
    ck.add_argument("--checker", action="append", help="only this checker (repeatable; default: every checker of the family)")
    ck.add_argument("--jobs", type=_positive, default=None,
                    help="read and judge in this many processes (default: one per core for a file over 8 MiB)")
    ck.add_argument("--format", choices=("prose", "json"), default="prose", help="verdicts and witnesses as prose or JSON")
    ck.add_argument("--allow-unknown-ops", action="store_true",
                    help="accept operations the family does not declare (default: refuse the history)")
    ck.add_argument("--max-bytes", type=_positive, default=MAX_BYTES, help="refuse a larger file (default 4 GiB)")
    ck.set_defaults(func=cmd_check)


def parser() -> argparse.ArgumentParser:
    from runners.experiments import EXPERIMENTS, FAMILIES, SWEEPING

    import textwrap

    p = _Parser(prog="driftlab", description=textwrap.fill(ABOUT, 100), epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    def run_options(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--profile", choices=PROFILES, default="quick", help="quick (CI scale) or paper (the papers' full scale)")
        sp.add_argument("--jobs", type=_positive, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
        sp.add_argument("--seed", type=int, default=DEFAULT_SEED, help="base seed; every cell's seed derives from it")
        sp.add_argument("--out", help="run folder (default data/runs/<run-id>/, with a 'latest' link)")
        sp.add_argument("--scenario-dir", action="append", help="extra folder of scenario files (repeatable)")
        sp.add_argument("--workloads", type=_names("workload"), help="revalidation workloads to run (default: all)")
        sp.add_argument("--repetitions", type=_positive, help="override the profile's repetitions per cell")
        sp.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite", help="shared store for cross-process experiments")
        sp.add_argument("--executor", choices=("local", "dask"), default="local",
                        help="local process pool, or a Dask distributed cluster")
        sp.add_argument("--scheduler", help="tcp://HOST:PORT of an existing Dask scheduler (default: start a LocalCluster)")
        sp.add_argument("--quiet", action="store_true", help="no progress bar")
        sp.add_argument("--cell-timeout", type=_cell_seconds, metavar="SECONDS",
                        help="stop the run when one cell runs longer (default: per experiment, from its size)")

    r = sub.add_parser("reproduce", help="run the experiments of a profile and build every artifact")
    run_options(r)
    r.add_argument("--only", help=f"a family ({', '.join(FAMILIES)}) or one artifact")
    r.add_argument("--mechanisms", type=_names("mechanism"), help="mechanisms to run (names or package.module:Class)")
    r.set_defaults(func=cmd_reproduce)

    c = sub.add_parser("compare", help="the same cells, mechanisms side by side")
    run_options(c)
    c.add_argument("--mechanisms", type=_names("mechanism"), default=("ATR", "FullScan", "VersionAbort", "NoCheck"))
    c.set_defaults(func=cmd_compare)

    sw = sub.add_parser("sweep", help="the papers' sweeps at any points you pick")
    sweeps = sw.add_subparsers(dest="sweep", required=True)
    for name in SWEEPING:
        for sweep_name, sweep in EXPERIMENTS[name].sweeps.items():
            one = sweeps.add_parser(sweep_name, help=f"run {name} at the given points")
            run_options(one)
            one.add_argument(f"--{sweep.option}", type=sweep.parse, required=True, help=sweep.help)
            if sweep_name == "reads":
                one.add_argument("--rounds", type=_positive, help="timed validations per repetition (default: profile's)")
            one.set_defaults(func=cmd_sweep, experiment=name, option=sweep.option, mechanisms=None)

    a = sub.add_parser("analyze", help="rebuild tables, figures and report of a run folder from its records")
    a.add_argument("run_dir")
    a.set_defaults(func=cmd_analyze)

    sm = sub.add_parser("summary", help="print the findings a run's report opens with")
    sm.add_argument("run_dir")
    sm.add_argument("--headline", action="store_true", help="print the frameworks' headline table instead")
    sm.add_argument("--readme", metavar="FILE", help="write the headline table into FILE's marked block")
    sm.set_defaults(func=cmd_summary)

    ev = sub.add_parser("env", help="framework environments: add a release of your own, list them")
    env_sub = ev.add_subparsers(dest="env_command", required=True)
    add = env_sub.add_parser("add", help="write, lock and build data/envs/<framework>-<release>/ from the "
                                         "framework's adapter template, then print the command that judges it")
    add.add_argument("request", metavar="FRAMEWORK==RELEASE")
    env_sub.add_parser("list", help="each environment: framework, release, rows, built or not, lock hash")
    ev.set_defaults(func=cmd_env)

    add_check(sub)

    ls = sub.add_parser("list", help="experiments, scenarios, mechanisms, checkers and faults, per family")
    ls.add_argument("--scenario-dir", action="append")
    ls.set_defaults(func=cmd_list)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    check = argv[:1] == ["check"]  # a history's check starts at once: no experiment, framework or pandas imported
    try:
        if check:
            only = _Parser(prog="driftlab")
            add_check(only.add_subparsers(dest="command", required=True))
            args = only.parse_args(argv)
        else:
            args = parser().parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a one-line usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return args.func(args)
    except (DriftlabError,) if check else _errors() as exc:
        print(f"driftlab: error: {exc}", file=sys.stderr)
        return 2


def _errors() -> tuple[type[Exception], ...]:
    """The errors of bad input or an impossible request, printed as one line with exit code 2."""
    from analysis.records import RecordsError
    from mechanisms import MechanismError
    from runners.execute import CellFailed
    from scenarios import ScenarioError

    return DriftlabError, ScenarioError, MechanismError, RecordsError, CellFailed

if __name__ == "__main__":
    sys.exit(main())
