"""Every artifact (table + figure + report section) the analysis builds, by name.

An artifact is a pure function of one experiment's records.  A new artifact
is one analysis module, one figure module and one entry here.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from analysis import revalidation_outcomes
from analysis.report import Section
from figures import revalidation_outcomes as fig_revalidation_outcomes


@dataclass(frozen=True)
class Artifact:
    name: str
    experiment: str  # whose records it reads
    family: str
    table: Callable[[pd.DataFrame], pd.DataFrame]  # records -> table
    figure: Callable[[pd.DataFrame, pd.DataFrame, Path], list[Path]] | None  # (records, table, out) -> files
    report: Callable[[pd.DataFrame, pd.DataFrame], Section]  # (table, records) -> section


ARTIFACTS: dict[str, Artifact] = {a.name: a for a in (
    Artifact("revalidation_outcomes", "revalidation_outcomes", "revalidation",
             revalidation_outcomes.table,
             lambda records, table, out: fig_revalidation_outcomes.draw(records, out),
             lambda table, records: revalidation_outcomes.report(table)),
    # revalidation_durable
    # revalidation_scaling
    # revalidation_races
    # revalidation_omission
)}
