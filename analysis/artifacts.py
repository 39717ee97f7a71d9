"""Every artifact (table + figure + report section) the analysis builds, by name.

An artifact is a pure function of one experiment's records.  A new artifact
is one analysis module, one figure module and one entry here.
"""
from __future__ import annotations

from analysis import revalidation_omission, revalidation_outcomes
from analysis.artifact import Artifact
from analysis import revalidation_races
from figures import revalidation_races as fig_revalidation_races
from analysis import revalidation_durable
from figures import revalidation_durable as fig_revalidation_durable
from figures import revalidation_omission as fig_revalidation_omission
from figures import revalidation_outcomes as fig_revalidation_outcomes
from analysis import revalidation_scaling
from figures import revalidation_scaling as fig_revalidation_scaling


def _legacy(name, experiment, table, figure, report) -> Artifact:
    return Artifact(name, table=table, report=report, draw=figure, experiment=experiment)


ARTIFACTS: dict[str, Artifact] = {a.name: a for a in (
    _legacy("revalidation_outcomes", "revalidation_outcomes",
             revalidation_outcomes.table,
             lambda records, table, out: fig_revalidation_outcomes.draw(records, out),
             lambda table, records: revalidation_outcomes.report(table)),
    _legacy("revalidation_durable", "revalidation_durable",
             revalidation_durable.table,
             lambda records, table, out: fig_revalidation_durable.draw(table, out),
             revalidation_durable.report),
    _legacy("revalidation_scaling", "revalidation_scaling",
             revalidation_scaling.table,
             lambda records, table, out: fig_revalidation_scaling.draw(table, out),
             lambda table, records: revalidation_scaling.report(table)),
    _legacy("revalidation_races", "revalidation_races",
             revalidation_races.table,
             lambda records, table, out: fig_revalidation_races.draw(records, out),
             revalidation_races.report),
    _legacy("revalidation_omission", "revalidation_omission",
             revalidation_omission.table,
             lambda records, table, out: fig_revalidation_omission.draw(table, out),
             lambda table, records: revalidation_omission.report(table)),
)}
