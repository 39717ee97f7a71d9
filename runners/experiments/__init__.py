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
    __import__("runners.experiments.resume_overhead", fromlist=["_"]).ResumeOverhead(),
)}

FAMILIES = ("revalidation", "isolation", "resume")
