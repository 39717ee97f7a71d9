"""One declaration per artifact: a table, an optional figure and a report section.

An artifact is a pure function of one experiment's records (DESIGN.md, "One
declaration per artifact").  Each experiment declares its artifacts beside
itself, as ``artifacts = (Artifact(...),)`` on the experiment class, with the
three functions in one signature each:

- ``table(records) -> DataFrame``
- ``draw(records, table, out) -> list[Path]``  (``out`` is a path stem; write PNG + SVG)
- ``report(table, records) -> Section``
- optionally ``findings(table, records) -> list[Finding]``: lines for the report's opening Findings

Nothing here runs an experiment; :mod:`analysis.pipeline` receives the
declarations from the caller and builds every artifact whose records exist.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from analysis.report import Finding, Section

if TYPE_CHECKING:  # the declarations name pandas' frames; importing pandas is left to those who build tables
    import pandas as pd

Table = Callable[["pd.DataFrame"], "pd.DataFrame"]
Draw = Callable[["pd.DataFrame", "pd.DataFrame", Path], list[Path]]
Report = Callable[["pd.DataFrame", "pd.DataFrame"], Section]
Findings = Callable[["pd.DataFrame", "pd.DataFrame"], list[Finding]]


@dataclass(frozen=True)
class Artifact:
    name: str
    table: Table
    report: Report
    draw: Draw | None = None
    experiment: str = ""  # whose records it reads; filled in from the declaring experiment when empty
    findings: Findings | None = None
