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
    __import__("runners.experiments.isolation_levels", fromlist=["_"]).IsolationLevels(),
    __import__("runners.experiments.isolation_runtimes", fromlist=["_"]).IsolationRuntimes(),
    __import__("runners.experiments.isolation_retrieval", fromlist=["_"]).IsolationRetrieval(),
    __import__("runners.experiments.isolation_undeclared", fromlist=["_"]).IsolationUndeclared(),
    __import__("runners.experiments.isolation_contract_omission", fromlist=["_"]).IsolationContractOmission(),
    __import__("runners.experiments.isolation_microbench", fromlist=["_"]).IsolationMicrobench(),
    __import__("runners.experiments.resume_faults", fromlist=["_"]).ResumeFaults(),
    __import__("runners.experiments.resume_independence", fromlist=["_"]).ResumeIndependence(),
    __import__("runners.experiments.resume_concurrency", fromlist=["_"]).ResumeConcurrency(),
    __import__("runners.experiments.resume_profile", fromlist=["_"]).ResumeProfile(),
)}

FAMILIES = ("revalidation", "isolation", "resume")

# Sweeps of the revalidation experiments (to move beside each experiment's class).
from runners.experiment import Sweep, points  # noqa: E402

if not RevalidationScaling.sweeps:
    RevalidationScaling.sweeps = {"reads": Sweep("reads", points(int, 1, 2**16, "read counts must be between 1 and 65536"),
                                                 "recorded reads per point, e.g. 13,29,61,125")}
if not RevalidationOmission.sweeps:
    RevalidationOmission.sweeps = {"omission": Sweep("rates", points(float, 0, 1, "omission rates are probabilities between 0 and 1"),
                                                     "omission probabilities, e.g. 0,0.01,0.05,0.1")}
if not RevalidationOutcomes.compare:
    RevalidationOutcomes.compare = True
    RevalidationOutcomes.compare_table = lambda self, table: table[table["mutation_class"] == "all"].drop(columns="mutation_class")
