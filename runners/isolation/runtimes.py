"""Runtime x anomaly under one fixed deployment schedule, plus the open-world control (paper Table 3, §5.2).

Runtimes: the default runtime of today's frameworks (live aliases: the
``SRC`` profile), ``StaticPinning`` (a lockfile closed at start) and
``SSI``; and the same programs on real LangGraph (``runners/isolation/langgraph_runtime.py``):
``LangGraph`` resolving through live aliases (the paper measured its default
runtime there) and ``LangGraph+SSI``, whose SSI manifest lives in LangGraph's
own checkpoints.  ``--mechanisms`` replaces them.  Two programs:

- ``fixed_schedule``: one workflow binds its first resources, forks, pauses;
  four deployments land during the pause; on resume it re-reads, binds the
  model its index needs, spawns a child and merges its forks.  Each of the
  four anomalies has its chance in this one schedule.
- ``open_world``: the control where a tool is discovered mid-run (marked
  ``late``: outside any lockfile taken at start) and redeployed while the
  workflow runs.  Rows of this program are named ``<runtime>/open-world``.
- ``opaque_tool``: an opaque tool (cannot be versioned) redeployed during a
  pause, with forks and a merge; run also under ``SSI+capture`` and
  ``SSI+taint`` (``SSI`` itself aborts).  Rows ``<runtime>/opaque``; the
  records count the refused resolutions (abort's cost).

One record per (runtime, program, anomaly): the anomaly's checker on the
execution's history.  Deterministic: one execution per cell.
"""
from __future__ import annotations

import tempfile

from mechanisms import resolve
from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, artifact, derive_seed
from runners.isolation.workflow_runtime import judge, run_scenario, verdict_word
from scenarios import load_scenarios
from vocabulary.isolation import ANOMALIES

DEFAULT_RUNTIMES = ("SRC", "StaticPinning", "SSI", "LangGraph", "LangGraph+SSI")
#: rows run on real LangGraph (runners/isolation/langgraph_runtime.py, imported only when they run), with their profile
LANGGRAPH_ROWS = {"LangGraph": "SRC", "LangGraph+SSI": "SSI"}
RUNTIME_LABEL = {"SRC": "default"}  # the default runtime resolves live aliases: the SRC profile
PROGRAMS = {"fixed_schedule": "", "open_world": "/open-world", "opaque_tool": "/opaque"}
#: the opaque-resource policies run on the opaque program beside the default runtimes
OPAQUE_POLICIES = ("SSI+capture", "SSI+taint")


def label(mechanism: str, program: str) -> str:
    return RUNTIME_LABEL.get(mechanism, mechanism) + PROGRAMS[program]


class IsolationRuntimes(Experiment):
    name = "isolation_runtimes"
    family = "isolation"
    description = "runtime x anomaly under one fixed deployment schedule, plus the open-world control (paper Table 3)"
    artifacts = (artifact("isolation_runtimes"),)

    def runtimes(self, options: Options) -> tuple[str, ...]:
        return tuple(options.mechanisms_for("isolation") or DEFAULT_RUNTIMES)

    def check(self, options: Options) -> None:
        for m in self.runtimes(options):
            resolve(LANGGRAPH_ROWS.get(m, m), "isolation")
        found = load_scenarios(tuple(options.scenario_dirs), family="isolation")["isolation"]
        for p in PROGRAMS:
            if p not in found:
                raise DriftlabError(f"isolation_runtimes needs the scenario {p!r} (scenarios/isolation/{p}.toml)")

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        extra = () if options.mechanisms_for("isolation") else OPAQUE_POLICIES
        return [Cell(self.name, (("mechanism", m), ("program", p)), 1, seed)
                for p in PROGRAMS for m in self.runtimes(options) + (extra if p == "opaque_tool" else ())]

    def run_cell(self, cell: Cell, options: Options) -> CellOutput:
        m, program = cell.p["mechanism"], cell.p["program"]
        scenario = load_scenarios(tuple(options.scenario_dirs), family="isolation")["isolation"][program]
        if m in LANGGRAPH_ROWS:  # the same program, its workflows as LangGraph threads
            from runners.isolation.langgraph_runtime import run_scenario_langgraph

            with tempfile.TemporaryDirectory(prefix="isolation_langgraph_", dir=options.scratch) as folder:
                rt, history = run_scenario_langgraph(scenario, resolve(LANGGRAPH_ROWS[m], "isolation")(),
                                                     group=f"{m}/{program}", folder=folder)
        else:
            rt, history = run_scenario(scenario, resolve(m, "isolation")(), group=f"{m}/{program}")
        results = judge(history)
        rows = [{"runtime": label(m, program), "anomaly": a, "repetition": 0,
                 "seed": derive_seed(cell.seed, m, program), "verdict": verdict_word(results[a]),
                 "witness": " | ".join(w.explanation for w in results[a].witnesses),
                 "resolutions": rt.resolutions, "refusals": rt.refusals,
                 "merges_refused": sum(1 for o in rt.ops if o.name == "merge" and o.status == "fail")}
                for a in ANOMALIES]
        return CellOutput({k: [r[k] for r in rows] for k in rows[0]}, history)
