"""Contract omission: how often SSI admits an incompatible combination when contracts go missing.

The fault (``faults/isolation/contract_omission.py``) drops each declared contract of
``scenarios/isolation/omission_pipeline.toml`` with probability p before an
execution; the runtime runs the program under SSI (or ``--mechanisms``)
with the contracts that are left; the compatibility-skew checker judges the
history by the full set.  An execution counts as **incompatible admitted**
when that checker flags it.

Which contracts matter is derived by running, not assumed: per cell the
program is run once with every contract but one, for each contract; a
contract *matters* if dropping it alone lets the checker flag the run.
The expected share is then 1 - Π(1 - p) over the contracts that matter
(here three of six: the ``@1`` contracts of resources bound before the
pause), and the table gives the measured share with an exact
(Clopper-Pearson) 95% interval beside it.

``driftlab sweep contract-omission --rates 0,0.05,0.1`` runs it at any
rates.  The cell's history keeps the executions that admitted an
incompatible combination (the witnesses), so ``driftlab check`` can
re-judge them.
"""
from __future__ import annotations

import math
import random

from faults.isolation.contract_omission import ContractOmission
from mechanisms import resolve
from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, Sweep, artifact, derive_seed, points
from runners.isolation.workflow_runtime import combine, run_scenario
from scenarios import load_scenarios
from vocabulary.isolation import COMPATIBILITY_SKEW

DEFAULT_RATES = (0.0, 0.01, 0.05, 0.10, 0.20)
REPETITIONS = {"quick": 200, "paper": 2000}
SCENARIO = "omission_pipeline"
DEFAULT_MECHANISM = "SSI"


def rates(options: Options) -> tuple[float, ...]:
    found = tuple(float(r) for r in options.extra.get("rates") or DEFAULT_RATES)
    bad = [r for r in found if not (math.isfinite(r) and 0.0 <= r <= 1.0)]
    if bad:
        raise DriftlabError(f"contract omission rates are probabilities between 0 and 1, got {bad[0]}")
    return tuple(sorted(set(found)))


def flagged(history) -> bool:
    from analysis.isolation.checkers import CHECKERS

    return CHECKERS[COMPATIBILITY_SKEW].check(history).verdict.value == "invalid"


def contracts_that_matter(scenario, mechanism_name: str) -> tuple:
    """The contracts whose omission, alone, lets the mechanism admit an incompatible combination."""
    out = []
    for c in scenario.contracts:
        kept = tuple(x for x in scenario.contracts if x != c)
        _, h = run_scenario(scenario, resolve(mechanism_name, "isolation")(), declared=kept)
        if flagged(h):
            out.append(c)
    return tuple(out)


class IsolationContractOmission(Experiment):
    name = "isolation_contract_omission"
    family = "isolation"
    description = "contract omission: share of executions in which SSI admits an incompatible combination vs p"
    artifacts = (artifact("isolation_contract_omission"),)
    sweeps = {"contract-omission": Sweep("rates", points(float, 0, 1, "contract omission rates are probabilities "
                                                                      "between 0 and 1"),
                                         "contract omission probabilities, e.g. 0,0.01,0.05,0.1")}
    seconds_per_execution = 0.0005

    def mechanisms(self, options: Options) -> tuple[str, ...]:
        return tuple(options.mechanisms_for("isolation") or (DEFAULT_MECHANISM,))

    def check(self, options: Options) -> None:
        rates(options)
        for m in self.mechanisms(options):
            resolve(m, "isolation")
        if SCENARIO not in load_scenarios(tuple(options.scenario_dirs), family="isolation")["isolation"]:
            raise DriftlabError(f"isolation_contract_omission needs the scenario {SCENARIO!r}")
        reps = options.extra.get("repetitions")
        if reps is not None and reps < 1:
            raise DriftlabError(f"--repetitions must be at least 1, got {reps}")

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        reps = options.extra.get("repetitions") or REPETITIONS[profile]
        return [Cell(self.name, (("rate", r), ("mechanism", m)), reps, seed)
                for r in rates(options) for m in self.mechanisms(options)]

    def run_cell(self, cell: Cell, options: Options) -> CellOutput:
        rate, name = cell.p["rate"], cell.p["mechanism"]
        scenario = load_scenarios(tuple(options.scenario_dirs), family="isolation")["isolation"][SCENARIO]
        matter = set(contracts_that_matter(scenario, name))
        fault = ContractOmission(rate)
        rows, witnesses = [], []
        for rep in range(cell.repetitions):
            seed = derive_seed(cell.seed, "contract_omission", rate, rep)  # same draws for every mechanism
            rng = random.Random(seed)
            fault.setup(scenario.contracts)
            try:
                kept, dropped = fault.invoke(rng)
            finally:
                fault.teardown()
            rt, h = run_scenario(scenario, resolve(name, "isolation")(), group=f"{rate}/{rep}", declared=kept)
            bad = flagged(h)
            if bad:
                witnesses.append(h)
            rows.append({"repetition": rep, "seed": seed,
                         "contracts": len(scenario.contracts), "dropped": len(dropped),
                         "dropped_that_matter": sum(c in matter for c in dropped), "contracts_that_matter": len(matter),
                         "incompatible_admitted": bad, "refusals": rt.refusals})
        history = combine(witnesses, rate=rate, mechanism=name) if witnesses else None
        return CellOutput({k: [r[k] for r in rows] for k in rows[0]}, history)
