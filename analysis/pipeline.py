"""Rebuild every table, figure and the report of a run folder from its records alone.

``driftlab analyze RUN_DIR`` calls :func:`analyze`; so does ``reproduce``
after its cells have run.  Nothing here runs an experiment: the artifact
declarations (:class:`analysis.artifact.Artifact`) come from the caller.
Every table is built in memory and every figure in a staging folder first;
files are published only once all of them succeeded, so bad records leave no
partial table or figure behind.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from analysis.artifact import Artifact
from analysis.questions import QUESTIONS
from analysis.records import RecordsError, check_schemas, experiments_in, load_records
from analysis.report import Section, markdown_table, write_report


def _atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def header(run_dir: Path) -> str:
    prov_path = run_dir / "provenance.json"
    lines = [f"# driftlab report: `{run_dir.name}`", ""]
    if prov_path.exists():
        prov = json.loads(prov_path.read_text())
        lines += [
            f"- command: `{prov.get('command', '?')}`",
            f"- profile: {prov.get('profile', '?')}, seed: {prov.get('seed', '?')}",
            f"- git: {prov.get('git', {}).get('revision', '?')}" + (" (dirty tree)" if prov.get("git", {}).get("dirty") else ""),
            "- wall time: " + ", ".join(f"{k} {v:.1f} s" for k, v in prov.get("wall_seconds", {}).items()),
            "",
        ]
    lines += ["Every number under \"ours\" is computed from this run's records (`records/`); the \"paper\" column "
              "comes from `data/reference/`. `driftlab analyze` rebuilds this file from the records alone.", ""]
    return "\n".join(lines)


def writable(folder: Path) -> bool:
    """A folder the lab may write: the OS allows it *and* its mode grants a write bit (root honours 0o555 too)."""
    return os.access(folder, os.W_OK | os.X_OK) and bool(folder.stat().st_mode & 0o222)


def json_kind(value: object) -> str:
    """What a JSON value is, in words (for messages)."""
    return {list: "a list", str: "a string", bool: "true or false", type(None): "null", dict: "an object"}.get(
        type(value), "a number")


def _json_object(path: Path) -> None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        problem = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        raise RecordsError(f"{path}: unreadable ({problem})") from None
    if not isinstance(value, dict):
        raise RecordsError(f"{path}: holds {json_kind(value)}, not a JSON object")


def check_layout(run_dir: Path) -> None:
    """Refuse an odd run folder before anything reads or writes it: RecordsError naming the path, one line.

    A run folder holds the folders ``records/<experiment>/``, ``tables/``, ``figures/`` and the files
    ``run.json``, ``provenance.json`` (JSON objects) and ``report.md``; whatever of them exists must be
    what it should be, and every records file must be readable with its siblings' schema."""
    for name in ("run.json", "provenance.json"):
        if (run_dir / name).exists() or (run_dir / name).is_symlink():
            _json_object(run_dir / name)
    for name in ("records", "tables", "figures", "histories"):
        path = run_dir / name
        if (path.exists() or path.is_symlink()) and not path.is_dir():
            raise RecordsError(f"{path}: should be a folder, and is not")
    if (run_dir / "report.md").is_dir():
        raise RecordsError(f"{run_dir / 'report.md'}: a folder where the report file should be")
    records = run_dir / "records"
    if records.is_dir():
        for path in sorted(records.iterdir()):
            if not path.is_dir():
                raise RecordsError(f"{path}: a file where the folder of an experiment's records should be")
            check_schemas(run_dir, path.name)


def check_run_folder(run_dir: Path, artifacts: list[Artifact]) -> None:
    """Refuse, before writing anything, a folder analyze cannot rebuild: RecordsError with one line."""
    if not (run_dir / "records").is_dir():
        raise RecordsError(f"{run_dir}: not a run folder (no records/ inside)")
    check_layout(run_dir)
    if not writable(run_dir):
        raise RecordsError(f"{run_dir}: run folder is not writable, so tables and report cannot be rebuilt")
    known = {a.experiment for a in artifacts}
    present = experiments_in(run_dir)
    if not present:
        raise RecordsError(f"{run_dir}/records: holds no experiment's records")
    for name in present:
        if name not in known:
            raise RecordsError(f"{run_dir}/records/{name}: not an experiment of this driftlab (`driftlab list` names them)")
        if not any((run_dir / "records" / name).glob("*.parquet")):
            raise RecordsError(f"{run_dir}/records/{name}: holds no records (no .parquet file)")


#: ``map_all(fn, items)``: ``[fn(item) for item in items]``, in that order (the runners pass one that runs them in
#: worker processes: ``runners.engine.map_in_workers``)
MapAll = Callable[[Callable, list], list]


def map_here(fn: Callable, items: list) -> list:
    return [fn(item) for item in items]


def build(run_dir: Path, experiment: str, arts: list[Artifact], stage: Path) -> list[tuple]:
    """One experiment's artifacts from its records: per artifact its table, its report section (files not yet
    set) and the figure files it drew into ``stage`` (a folder no reader looks at)."""
    records = load_records(run_dir, experiment)
    built = []
    for art in arts:
        table = art.table(records)
        drawn = art.draw(records, table, stage / art.name) if art.draw is not None else []
        section = art.report(table, records)
        section.question = section.question or QUESTIONS.get(art.name, "")
        if art.findings is not None:
            section.findings = [*section.findings, *art.findings(table, records)]
        built.append((table, section, drawn))
    return built


def analyze(run_dir: Path, artifacts: list[Artifact], map_all: MapAll = map_here) -> list[Section]:
    """Build every artifact whose experiment has records in ``run_dir``; write tables, figures, report.md.

    Each experiment's artifacts are built by ``map_all`` (here by default; the runners pass one that builds them in
    worker processes), figures into a staging folder; only once every experiment's were built are the tables
    written and the figures moved into ``figures/``, so bad records leave no partial output behind."""
    run_dir = Path(run_dir)
    check_run_folder(run_dir, artifacts)
    present = set(experiments_in(run_dir))
    groups: dict[str, list[Artifact]] = {}
    for art in artifacts:
        if art.experiment in present:
            groups.setdefault(art.experiment, []).append(art)
    for old in run_dir.glob(".analysis-*"):  # left by an analysis that was killed
        shutil.rmtree(old, ignore_errors=True)
    stage = Path(tempfile.mkdtemp(prefix=".analysis-", dir=run_dir))
    try:
        built = map_all(lambda exp: build(run_dir, exp, groups[exp], stage), list(groups))
        of = {exp: iter(done) for exp, done in zip(groups, built)}
        tables, figures = run_dir / "tables", run_dir / "figures"
        tables.mkdir(exist_ok=True)
        figures.mkdir(exist_ok=True)
        sections = []
        for art in (a for a in artifacts if a.experiment in of):  # the report keeps the artifacts' order
            table, section, drawn = next(of[art.experiment])
            table.to_csv(tables / f"{art.name}.csv.tmp", index=False)
            (tables / f"{art.name}.csv.tmp").replace(tables / f"{art.name}.csv")
            _atomic_text(tables / f"{art.name}.md", markdown_table(table))
            section.files = [f"tables/{art.name}.csv", f"tables/{art.name}.md"]
            for path in drawn:
                Path(path).replace(figures / Path(path).name)
                section.files.append(f"figures/{Path(path).name}")
            sections.append(section)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    write_report(run_dir / "report.md", sections, header(run_dir))
    return sections
