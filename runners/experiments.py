"""Every experiment the lab runs, by artifact name: one line per experiment, imported on first use.

An experiment's module pulls in what it drives (LangGraph, the framework adapters' protocol, the nemesis):
importing all of them cost every ``driftlab`` command about 1.7 s, an argument error included.  The registry
names each experiment's class and imports it when the experiment is first looked up; its family is the
name's first word (the artifact convention of ``runners/experiment.py``), so ``--only <family>`` selects
without importing the other families.  ``tests/unit/test_unit_experiments.py`` holds each entry to its class.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping

from runners.experiment import Experiment

#: artifact name -> "module:Class", in the report's order
WHERE: dict[str, str] = {
    # decision revalidation (ATR paper)
    "revalidation_outcomes": "runners.revalidation.outcomes:RevalidationOutcomes",
    "revalidation_durable": "runners.revalidation.durable:RevalidationDurable",
    "revalidation_scaling": "runners.revalidation.scaling:RevalidationScaling",
    "revalidation_races": "runners.revalidation.races:RevalidationRaces",
    "revalidation_omission": "runners.revalidation.omission:RevalidationOmission",
    # semantic isolation (SemIso paper)
    "isolation_levels": "runners.isolation.levels:IsolationLevels",
    "isolation_runtimes": "runners.isolation.runtimes:IsolationRuntimes",
    "isolation_retrieval": "runners.isolation.retrieval:IsolationRetrieval",
    "isolation_undeclared": "runners.isolation.undeclared:IsolationUndeclared",
    "isolation_contract_omission": "runners.isolation.contract_omission:IsolationContractOmission",
    "isolation_microbench": "runners.isolation.microbench:IsolationMicrobench",
    # resume semantics (Resume Means Resume paper)
    "resume_faults": "runners.resume.faults:ResumeFaults",
    "resume_independence": "runners.resume.independence:ResumeIndependence",
    "resume_concurrency": "runners.resume.concurrency:ResumeConcurrency",
    "resume_profile": "runners.resume.profile:ResumeProfile",
    "resume_overhead": "runners.resume.overhead:ResumeOverhead",
    "resume_frameworks": "runners.resume.frameworks:ResumeFrameworks",
    "resume_guards": "runners.resume.guards:ResumeGuards",
    "resume_powerloss": "runners.resume.powerloss:ResumePowerloss",
    "resume_nemesis": "runners.resume.nemesis:ResumeNemesis",
    "resume_hosts": "runners.resume.nemesis_hosts:ResumeHosts",
    # one agent, three failure modes, the guard's layers (issue 15)
    "agent_matrix": "runners.agent.matrix:AgentMatrix",
    "agent_overhead": "runners.agent.overhead:AgentOverhead",
}

#: the experiments that declare sweeps (``driftlab sweep``): the parser imports these only
SWEEPING = ("revalidation_scaling", "revalidation_omission", "isolation_contract_omission")

FAMILIES = ("revalidation", "isolation", "resume", "agent")


def family_of(name: str) -> str:
    """An experiment's family: its name's first word."""
    return name.partition("_")[0]


class Registry(MutableMapping[str, Experiment]):
    """Experiments by name, each built from its class on first lookup (a test may add or replace one)."""

    def __init__(self, where: dict[str, str]):
        self._where = dict(where)
        self._built: dict[str, Experiment] = {}

    def __getitem__(self, name: str) -> Experiment:
        if name not in self._built:
            module, _, cls = self._where[name].partition(":")  # KeyError: no such experiment
            self._built[name] = getattr(importlib.import_module(module), cls)()
        return self._built[name]

    def __setitem__(self, name: str, experiment: Experiment) -> None:
        self._where.setdefault(name, "")
        self._built[name] = experiment

    def __delitem__(self, name: str) -> None:
        del self._where[name]
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, name: object) -> bool:
        return name in self._where

    def of_family(self, family: str) -> list[str]:
        """The names of ``family``'s experiments, none of them imported."""
        return [n for n in self._where if family_of(n) == family]


EXPERIMENTS = Registry(WHERE)
