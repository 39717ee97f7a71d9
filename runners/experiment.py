"""Experiments, cells and profiles: what the runner expands and executes.

An experiment declares its grid as :class:`Cell` values (one point of the
parameter grid, run for N repetitions) and knows how to run one cell in a
worker process, returning that cell's records as columns.  A profile
(``quick`` or ``paper``) sets the sizes.  Records hold the cell's
parameters, the derived seed, the outcome, the oracle, the counters and the
timings; everything the analysis computes comes from them.
"""
from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

from analysis.artifact import Artifact
from vocabulary import History

PROFILES = ("quick", "paper")


class DriftlabError(Exception):
    """Bad input or an impossible request: printed as one line, exit code 2."""


def derive_seed(*parts: Any) -> int:
    """A 63-bit seed from the base seed and a cell's parameters (stable across runs and machines)."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


@dataclass(frozen=True)
class Cell:
    experiment: str
    params: tuple[tuple[str, Any], ...]  # ordered (name, value) pairs
    repetitions: int
    seed: int  # the run's base seed

    @property
    def id(self) -> str:
        return "/".join(str(v) for _, v in self.params)

    @property
    def p(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def filename(self) -> str:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.id.replace("/", "__"))
        return safe + ".parquet"


@dataclass
class Options:
    """What the user asked for beyond the profile (mechanisms, scenario folders, sweep points...)."""

    mechanisms: tuple[str, ...] | None = None
    #: family -> the names given for it (set by the engine; None: every name applies to every family)
    mechanism_families: dict[str, tuple[str, ...]] | None = None
    workloads: tuple[str, ...] | None = None  # --workloads: the revalidation workloads to run (None: all)
    scenario_dirs: tuple[str, ...] = ()
    backend: str = "sqlite"  # sqlite | postgres: the shared store of cross-process experiments
    extra: dict[str, Any] = field(default_factory=dict)  # sweep points and overrides, e.g. {"reads": [13, 29]}
    run_dir: Path | None = None  # set by the runner before cells run (for side files such as benchmark JSON)
    #: what ``--only`` named (a family or an experiment), not part of the run's identity: an experiment that
    #: cannot run on this machine refuses when named, and is skipped with a note inside a larger selection
    only: str | None = None

    def mechanisms_for(self, family: str) -> tuple[str, ...] | None:
        """The mechanisms the user named that implement ``family``'s protocol (None: use the defaults)."""
        if self.mechanisms is None:
            return None
        if self.mechanism_families is None:
            return self.mechanisms
        return self.mechanism_families.get(family) or None

    @property
    def scratch(self) -> Path | None:
        """Where cells put temporary databases: inside the run folder, so that what a killed
        run left behind is removed when the run is started again (None: the system's temp)."""
        if self.run_dir is None:
            return None
        folder = Path(self.run_dir) / "scratch"
        folder.mkdir(exist_ok=True)
        return folder


@dataclass
class CellOutput:
    """What one cell returns: its records as columns (equal-length lists) and, optionally, its history.

    The history (every operation of the cell's executions, grouped by
    ``value["group"]``) is written to ``histories/<experiment>/<cell>.jsonl``
    beside the records, so ``driftlab check`` can re-judge it later.
    """

    records: dict[str, list]
    history: History | None = None


def points(cast: Callable[[str], Any], low: float, high: float, what: str) -> Callable[[str], list]:
    """A sweep's parser: a comma-separated list of numbers in [low, high], deduplicated and sorted."""
    import argparse

    def parse(text: str) -> list:
        try:
            found = sorted({cast(x) for x in text.split(",") if x.strip()})
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of {cast.__name__} values") from None
        if not found or found[0] < low or found[-1] > high:
            raise argparse.ArgumentTypeError(what)
        return found
    return parse


@dataclass(frozen=True)
class Sweep:
    """A sweep an experiment offers on the command line: ``driftlab sweep NAME --OPTION a,b,c``."""

    option: str  # the option's name, also the key in Options.extra
    parse: Callable[[str], list]  # argparse type: text -> sorted points (raises argparse.ArgumentTypeError)
    help: str


class Experiment:
    """Base class: subclasses set the class attributes and implement ``cells`` and ``run_cell``.

    An experiment declares everything the engine and the CLI need about it:
    its artifacts (table, figure, report section), the sweeps it offers, and
    whether ``driftlab compare`` runs it.
    """

    name: ClassVar[str]  # the experiment's artifact name, e.g. "revalidation_outcomes"
    family: ClassVar[str]  # revalidation | isolation | resume
    description: ClassVar[str]
    #: cells run in parallel worker processes, beside other experiments' cells, unless False (benchmarks, which
    #: want a quiet machine: they run before the others, alone, one cell at a time; ``runners.engine.batches``)
    parallel: ClassVar[bool] = True
    #: workers of the waiting lane (cells :meth:`waits` marks) per job: more than one only where a waiting cell
    #: sleeps nearly all its time, measured with the CPU it adds (each worker starts its own env servers)
    waiting_workers_per_job: ClassVar[int] = 1
    #: the artifacts built from this experiment's records (analysis.artifact.Artifact)
    artifacts: ClassVar[tuple[Artifact, ...]] = ()
    #: sweeps offered as `driftlab sweep NAME`
    sweeps: ClassVar[dict[str, Sweep]] = {}
    #: `driftlab compare` runs this experiment and prints ``compare_table`` of its first artifact
    compare: ClassVar[bool] = False
    #: False if the experiment runs only the lab's own scenarios (a --scenario-dir is then said to be ignored)
    uses_user_scenarios: ClassVar[bool] = True
    #: rough cost of one execution on one core, for refusing impossible requests before they start
    seconds_per_execution: ClassVar[float] = 0.001
    #: True if the experiment runs on ``--backend`` (otherwise the flag is said not to apply)
    uses_backend: ClassVar[bool] = False
    #: False if the experiment runs only its own mechanisms (``--mechanisms`` is then said not to apply to it)
    uses_mechanisms: ClassVar[bool] = True
    #: the least time limit of one cell (``--cell-timeout`` overrides); see :meth:`time_limit`
    cell_timeout_s: ClassVar[float] = 300.0

    def listing(self) -> list[tuple[str, str]]:
        """Extra (name, description) lines for `driftlab list` under this experiment (e.g. its schedules)."""
        return []

    def skipped(self, options: "Options", missing: str, needs: str) -> bool:
        """For an experiment this machine cannot run (``missing`` says why, "" when it can): refused in one line
        when ``--only`` names it, skipped with a one-line note inside a larger selection.  True when skipped."""
        if not missing:
            return False
        if options.only == self.name:
            raise DriftlabError(f"{self.name} needs {needs}: {missing}")
        print(f"{self.family}: {self.name} skipped: it needs {needs} ({missing})", flush=True)
        return True

    @staticmethod
    def side_by_side(table, rows: str, mechanisms: str, value: str = "verdict"):
        """A long table as a matrix with the mechanisms side by side (rows and columns in the table's order)."""
        wide = table.pivot(index=rows, columns=mechanisms, values=value)
        wide = wide.reindex(index=list(dict.fromkeys(table[rows])), columns=list(dict.fromkeys(table[mechanisms])))
        return wide.reset_index().rename_axis(None, axis=1)

    def compare_table(self, table):
        """The part of the first artifact's table that `driftlab compare` prints (default: all of it)."""
        return table

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        raise NotImplementedError

    def seconds(self, cell: Cell, options: Options) -> float:
        """Estimated time of one cell on one core (every size option counts: override where a cell's cost
        depends on more than its repetitions, e.g. rounds or a graph's declared work)."""
        return cell.repetitions * self.seconds_per_execution

    def waits(self, cell: Cell, options: Options) -> bool:
        """True for a cell that spends its time waiting, not computing (e.g. out a server's timeout): it then runs
        in a worker of its own beside the computing cells (``runners.workers.run_workers``).  Only for cells whose
        verdicts do not depend on how busy the machine is (a fault cell's come from named crash points; a
        race's do depend on it).  Default: no cell waits."""
        return False

    def affinity(self, cell: Cell, options: Options) -> str | None:
        """What ``cell`` keeps warm in its worker process (e.g. a framework's env server), or None: cells of one
        affinity go to one worker where they can (``runners.workers.run_workers``'s ``keys``), so a second worker
        does not start a second copy.  Only where it moves no verdict (where each cell runs, not what it does).
        Default: none."""
        return None

    def time_limit(self, cell: Cell, options: Options) -> float:
        """A cell's default time limit: ten times its estimate, at least :attr:`cell_timeout_s`."""
        return max(self.cell_timeout_s, 10 * self.seconds(cell, options))

    def run_cell(self, cell: Cell, options: Options) -> "dict[str, list] | CellOutput":
        """Run one cell; return its records as columns (equal-length lists), or a CellOutput with its history."""
        raise NotImplementedError

    def check(self, options: Options) -> None:
        """Raise DriftlabError for bad options before anything is written."""

    def prepare(self, options: Options) -> None:
        """Called by a run that holds its folder, before its first cell: remove what a killed run left on the machine
        (mounts, hosts, clusters whose owner is gone).  Never in :meth:`check`, which a refused request runs too: a
        request refused in one line leaves the machine as it found it (another run's leftovers included)."""


#: the cell parameters that name the mechanism a cell runs (families name it differently; a scaling cell times
#: several mechanisms, named as a list)
MECHANISM_PARAMS = ("mechanism", "runtime", "profile", "mechanisms")


def mechanism_of(cell: Cell) -> str | None:
    """The mechanism a cell runs, from its parameters (None for cells of no one mechanism)."""
    p = cell.p
    return next((str(p[k]) for k in MECHANISM_PARAMS if k in p), None)


def compute(experiment: Experiment, cell: Cell, options: Options) -> tuple[Cell, "CellOutput | str"]:
    """Run one cell where it is (a worker, a Dask worker); a failure comes back as its one-line text.

    A lost connection of the lab's own store is retried once (:func:`runners.plugins.retry_on_store_fault`);
    ``sys.exit`` in a plug-in is a failure of the cell, not the end of the worker."""
    from runners.plugins import PluginFailed, describe, retry_on_store_fault

    who = mechanism_of(cell)
    try:
        output = retry_on_store_fault(experiment.run_cell, cell, options)
        return cell, output if isinstance(output, CellOutput) else CellOutput(output)
    except PluginFailed as exc:
        return cell, str(exc) if exc.mechanism or not who else f"mechanism {who}: {exc}"
    except SystemExit as exc:
        return cell, (f"mechanism {who}: " if who else "") + f"called sys.exit({exc.code!r})"
    except Exception as exc:  # noqa: BLE001 - any failure of a cell (a plug-in's bug included) is reported, not raised
        return cell, (f"mechanism {who}: " if who else "") + describe(exc)


def lazy(dotted: str):
    """``module:function`` called on first use, so that running cells never imports pandas' plotting stack."""
    module, _, attr = dotted.partition(":")

    def call(*args):
        return getattr(importlib.import_module(module), attr)(*args)

    call.__name__ = call.__qualname__ = attr
    call.__doc__ = f"{dotted}, imported on first use"
    return call


def artifact(name: str, figure: bool = True, findings: bool = False) -> Artifact:
    """The artifact ``<family>_<table>`` declared by convention: ``analysis/<family>/<table>.py`` (table, report,
    and ``findings`` if asked), and, if ``figure``, ``figures/<family>/<table>.py`` (draw); imported on first use,
    so cells never load the plotting stack."""
    family, sep, table = name.partition("_")
    if not sep or not table:
        raise ValueError(f"artifact {name!r}: name it <family>_<table>")
    return Artifact(name, table=lazy(f"analysis.{family}.{table}:table"),
                    report=lazy(f"analysis.{family}.{table}:report"),
                    draw=lazy(f"figures.{family}.{table}:draw") if figure else None,
                    findings=lazy(f"analysis.{family}.{table}:findings") if findings else None)
