"""Scenario files of every family, and the loader that dispatches on their ``family``.

A scenario is data: one TOML file that declares ``family = "<name>"`` and
whatever that family's parser expects (a revalidation workload, an isolation
deployment schedule, a resume fault cell...).  Files live in each family's
built-in folder and in the user's folders (``--scenario-dir`` or the
``DRIFTLAB_SCENARIOS`` environment variable, ``:``-separated), which may mix
families.  A new family is one line in :data:`PARSERS`; a new scenario is one
file.  Every problem is a :class:`ScenarioError` of one line,
``<file>: <field>: <problem>``.
"""
from __future__ import annotations

import importlib
import os
import tomllib
from pathlib import Path
from typing import Any

ENV_DIRS = "DRIFTLAB_SCENARIOS"
HERE = Path(__file__).parent


class ScenarioError(ValueError):
    """A malformed scenario file: ``<file>: <field>: <problem>``."""


#: family -> (parser "module:function" taking (path, raw TOML dict) and returning an object with .name, built-in folder)
PARSERS: dict[str, tuple[str, Path]] = {
    "revalidation": ("scenarios.revalidation.workload:parse_scenario", HERE / "revalidation" / "workloads"),
    "resume": ("scenarios.resume.loader:parse_scenario", HERE / "resume"),
    "isolation": ("scenarios.isolation.loader:parse_scenario", HERE / "isolation"),
    "agent": ("scenarios.agent.loader:parse_scenario", HERE / "agent"),
}


def user_dirs(extra: tuple[Path | str, ...] = ()) -> list[Path]:
    env = [Path(p) for p in os.environ.get(ENV_DIRS, "").split(os.pathsep) if p]
    return [*env, *map(Path, extra)]


def read_toml(path: Path) -> dict[str, Any]:
    """A scenario file's TOML, or a one-line ScenarioError (unreadable, not UTF-8, bad TOML)."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: file: not UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: file: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: toml: {exc}") from None


def family_of(path: Path, raw: dict[str, Any]) -> str:
    family = raw.get("family")
    if not isinstance(family, str) or family not in PARSERS:
        raise ScenarioError(f"{path}: family: {'missing' if family is None else repr(family)} "
                            f"(every scenario file declares family = one of {', '.join(PARSERS)})")
    return family


def scenario_files(extra_dirs: tuple[Path | str, ...] = ()) -> list[Path]:
    """Every scenario file: the built-in folders, then the user's, each sorted by name."""
    files: list[Path] = []
    for folder in [builtin for _, builtin in PARSERS.values()] + user_dirs(extra_dirs):
        if not folder.is_dir():
            raise ScenarioError(f"{folder}: scenario folder: not a directory")
        files += sorted(folder.glob("*.toml"))
    return files


#: what :func:`load_scenarios` parsed, by family asked and the files' (path, inode, size, modification time): a cell
#: loads its scenarios at every call (the revalidation family once per cell), and parsing every file each time was
#: most of that family's CPU (2026-12-06, the quick profile's 420 outcome cells at 2 repetitions: 15.9 s -> 1.4 s)
_PARSED: dict[tuple, dict[str, dict[str, Any]]] = {}


def _stamp(path: Path) -> tuple:
    try:
        st = path.stat()
    except OSError:
        return (str(path),)  # read_toml says what is wrong with it
    return (str(path), st.st_ino, st.st_size, st.st_mtime_ns)


def load_scenarios(extra_dirs: tuple[Path | str, ...] = (), family: str | None = None) -> dict[str, dict[str, Any]]:
    """family -> scenario name -> the parsed scenario (only ``family`` if given).

    Parsed once per process while no file changes (the scenarios are frozen, shared by the cells that use them); a
    file added, removed or rewritten is parsed again at the next call."""
    files = scenario_files(extra_dirs)
    key = (family, tuple(_stamp(p) for p in files))
    if key not in _PARSED:
        if len(_PARSED) >= 16:  # a long-lived process whose user keeps editing files: forget the old versions
            _PARSED.clear()
        _PARSED[key] = _parse(files, family)
    return {fam: dict(scenarios) for fam, scenarios in _PARSED[key].items()}


def _parse(files: list[Path], family: str | None) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {f: {} for f in PARSERS}
    where: dict[tuple[str, str], Path] = {}
    for path in files:
        raw = read_toml(path)
        fam = family_of(path, raw)
        if family is not None and fam != family:
            continue
        module, _, func = PARSERS[fam][0].partition(":")
        scenario = getattr(importlib.import_module(module), func)(path, raw)
        if (fam, scenario.name) in where:
            raise ScenarioError(f"{path}: name: {scenario.name!r} is already defined by {where[fam, scenario.name]}")
        where[fam, scenario.name] = path
        out[fam][scenario.name] = scenario
    for fam, scenarios in out.items():  # references between files, resolved now, so the message names the file
        link = getattr(importlib.import_module(PARSERS[fam][0].partition(":")[0]), "link", None)
        if link is not None and (family is None or fam == family):
            link(scenarios)
    return out if family is None else {family: out[family]}
