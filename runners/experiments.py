"""Every experiment the lab runs, by artifact name: one import and one line per experiment."""
from __future__ import annotations

from runners.agent.matrix import AgentMatrix
from runners.agent.overhead import AgentOverhead
from runners.experiment import Experiment
from runners.isolation.contract_omission import IsolationContractOmission
from runners.isolation.levels import IsolationLevels
from runners.isolation.microbench import IsolationMicrobench
from runners.isolation.retrieval import IsolationRetrieval
from runners.isolation.runtimes import IsolationRuntimes
from runners.isolation.undeclared import IsolationUndeclared
from runners.resume.concurrency import ResumeConcurrency
from runners.resume.faults import ResumeFaults
from runners.resume.frameworks import ResumeFrameworks
from runners.resume.guards import ResumeGuards
from runners.resume.powerloss import ResumePowerloss
from runners.resume.independence import ResumeIndependence
from runners.resume.nemesis import ResumeNemesis
from runners.resume.nemesis_hosts import ResumeHosts
from runners.resume.overhead import ResumeOverhead
from runners.resume.profile import ResumeProfile
from runners.revalidation.durable import RevalidationDurable
from runners.revalidation.omission import RevalidationOmission
from runners.revalidation.outcomes import RevalidationOutcomes
from runners.revalidation.races import RevalidationRaces
from runners.revalidation.scaling import RevalidationScaling

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
    ResumeFrameworks(),
    ResumeGuards(),
    ResumePowerloss(),
    ResumeNemesis(),
    ResumeHosts(),
    # one agent, three failure modes, the guard's layers (issue 15)
    AgentMatrix(),
    AgentOverhead(),
)}

FAMILIES = ("revalidation", "isolation", "resume", "agent")
