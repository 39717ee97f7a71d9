"""Every experiment the lab runs, by artifact name: one import and one line per experiment."""
from __future__ import annotations

from runners.experiment import Experiment
from runners.experiments.isolation_contract_omission import IsolationContractOmission
from runners.experiments.isolation_levels import IsolationLevels
from runners.experiments.isolation_microbench import IsolationMicrobench
from runners.experiments.isolation_retrieval import IsolationRetrieval
from runners.experiments.isolation_runtimes import IsolationRuntimes
from runners.experiments.isolation_undeclared import IsolationUndeclared
from runners.experiments.resume_concurrency import ResumeConcurrency
from runners.experiments.resume_faults import ResumeFaults
from runners.experiments.resume_independence import ResumeIndependence
from runners.experiments.resume_overhead import ResumeOverhead
from runners.experiments.resume_profile import ResumeProfile
from runners.experiments.revalidation_durable import RevalidationDurable
from runners.experiments.revalidation_omission import RevalidationOmission
from runners.experiments.revalidation_outcomes import RevalidationOutcomes
from runners.experiments.revalidation_races import RevalidationRaces
from runners.experiments.revalidation_scaling import RevalidationScaling

EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    # decision revalidation (ATR paper)
    RevalidationOutcomes(),
    RevalidationDurable(),
    RevalidationScaling(),
    RevalidationRaces(),
    RevalidationOmission(),
    # semantic isolation (SemIso paper)
    IsolationLevels(),
    IsolationRuntimes(),
    IsolationRetrieval(),
    IsolationUndeclared(),
    IsolationContractOmission(),
    IsolationMicrobench(),
    # resume semantics (Resume Means Resume paper)
    ResumeFaults(),
    ResumeIndependence(),
    ResumeConcurrency(),
    ResumeProfile(),
    ResumeOverhead(),
)}

FAMILIES = ("revalidation", "isolation", "resume")
