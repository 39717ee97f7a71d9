"""Rebuild every table, figure and the report of a run folder from its records alone.

``driftlab analyze RUN_DIR`` calls :func:`analyze`; so does ``reproduce``
after its cells have run.  Nothing here runs an experiment.
"""
from __future__ import annotations

import json
from pathlib import Path


from analysis.artifacts import ARTIFACTS
from analysis.records import experiments_in, load_records
from analysis.report import Section, markdown_table, write_report


def _atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def build_artifact(name: str, run_dir: Path) -> Section | None:
    art = ARTIFACTS[name]
    records = load_records(run_dir, art.experiment)
    if records.empty:
        return None
    table = art.table(records)
    tables, figures = run_dir / "tables", run_dir / "figures"
    tables.mkdir(exist_ok=True)
    figures.mkdir(exist_ok=True)
    table.to_csv(tables / f"{name}.csv.tmp", index=False)
    (tables / f"{name}.csv.tmp").replace(tables / f"{name}.csv")
    _atomic_text(tables / f"{name}.md", markdown_table(table))
    files = [f"tables/{name}.csv", f"tables/{name}.md"]
    if art.figure is not None:
        files += [str(p.relative_to(run_dir)) for p in art.figure(records, table, figures / name)]
    section = art.report(table, records)
    section.files = files
    return section


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


def analyze(run_dir: Path) -> list[Section]:
    """Build every artifact whose experiment has records in ``run_dir``; write report.md."""
    run_dir = Path(run_dir)
    present = set(experiments_in(run_dir))
    names = [n for n, a in ARTIFACTS.items() if a.experiment in present]
    sections = [s for s in (build_artifact(n, run_dir) for n in names) if s is not None]
    write_report(run_dir / "report.md", sections, header(run_dir))
    return sections
