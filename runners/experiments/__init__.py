"""Every experiment the lab runs, by artifact name (one line each)."""
from __future__ import annotations

from runners.experiment import Experiment
from runners.experiments.revalidation_outcomes import RevalidationOutcomes

EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    RevalidationOutcomes(),
    # revalidation_durable
    # revalidation_scaling
    # revalidation_races
    # revalidation_omission
)}

FAMILIES = ("revalidation", "isolation", "resume")
