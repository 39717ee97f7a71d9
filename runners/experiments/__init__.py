"""Every experiment the lab runs, by artifact name (one line each)."""
from __future__ import annotations

from runners.experiment import Experiment
from runners.experiments.revalidation_durable import RevalidationDurable
from runners.experiments.revalidation_omission import RevalidationOmission
from runners.experiments.revalidation_outcomes import RevalidationOutcomes
from runners.experiments.revalidation_races import RevalidationRaces
from runners.experiments.revalidation_scaling import RevalidationScaling

EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    RevalidationOutcomes(),
    RevalidationDurable(),
    RevalidationScaling(),
    RevalidationRaces(),
    RevalidationOmission(),
)}

FAMILIES = ("revalidation", "isolation", "resume")
