"""``resume_independence``: the paper's independence matrix, reproduced on the implementation.

Serves the paper's 39-cell matrix (arXiv 2608.03836): the sequencer with one
fault switch at a time (``scenarios/resume/switch_*.toml`` name the switches
and their registered runtimes) through every fault-matrix cell.
"""
from __future__ import annotations

from runners.resume import common as rc
from mechanisms.resume import REGISTRY as RUNTIMES
from runners.experiment import DriftlabError, Options, artifact
from runners.resume.faults import FaultCells
from scenarios.resume.loader import by_kind

REPETITIONS = {"quick": 1, "paper": 1}


class ResumeIndependence(FaultCells):
    name = "resume_independence"
    description = "independence matrix: the sequencer with one of seven fault switches on, through every fault cell"
    artifacts = (artifact("resume_independence"),)
    uses_mechanisms = False  # its runtimes are the switches' (scenarios/resume/switch_*.toml)
    profile_repetitions = REPETITIONS

    def runtime_names(self, options: Options) -> list[str]:
        switches = by_kind(rc.resume_scenarios(options), "switch")
        return [s.runtime for s in switches.values()]

    def check(self, options: Options) -> None:
        """Every switch names a registered runtime (the message names the switch's file)."""
        super().check(options)
        for s in by_kind(rc.resume_scenarios(options), "switch").values():
            if s.runtime not in RUNTIMES:
                raise DriftlabError(f"{s.path}: runtime: {s.runtime!r} is not a registered resume runtime "
                                    f"({', '.join(RUNTIMES)})")
