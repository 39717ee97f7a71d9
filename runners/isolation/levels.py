"""Isolation level x anomaly, derived by running each anomaly's witness history (paper Table 2).

For every profile -- the named ``SRC``, ``RSR``, ``CR``, ``SSI`` and all
eight ⟨S,C,I⟩ combinations (or the mechanisms given with ``--mechanisms``)
-- the runtime runs the four witness programs of ``scenarios/isolation/
witness_*.toml`` and the four checkers judge each history.  The matrix cell
(profile, anomaly) is ``occurs`` if the anomaly's checker flags its own
witness history under that profile, ``prevented`` if not: nothing is typed
in.  Each record also keeps which *other* checkers flagged the history, so
the report can show the anomalies are independent (under SRC each witness
trips exactly its own checker).  The programs are deterministic: one
execution per (profile, witness) in both profiles.
"""
from __future__ import annotations

from mechanisms import resolve
from runners.experiment import Cell, Experiment, Options, artifact, derive_seed
from runners.experiment import CellOutput
from runners.isolation.workflow_runtime import combine, judge, run_scenario, verdict_word
from scenarios import load_scenarios
from vocabulary.isolation import ANOMALIES, NAMED_PROFILES, all_combinations

DEFAULT_PROFILES = (*NAMED_PROFILES, *(g.label for g in all_combinations()))


def witnesses(options: Options) -> dict:
    """anomaly -> its witness scenario (the first scenario declaring that anomaly, by name)."""
    found = {}
    for s in sorted(load_scenarios(tuple(options.scenario_dirs), family="isolation")["isolation"].values(),
                    key=lambda s: s.name):
        if s.anomaly and s.anomaly not in found:
            found[s.anomaly] = s
    return found


def guarantees_of(mechanism) -> tuple:
    g = getattr(mechanism, "guarantees", None)
    if g is None or getattr(mechanism, "name", "") == "StaticPinning":
        return ("-", "-", "-")
    return (f"S{int(g.stability)}", f"C{int(g.compatibility)}", f"I{int(g.inheritance)}")


class IsolationLevels(Experiment):
    name = "isolation_levels"
    family = "isolation"
    description = "profile x anomaly (paper Table 2), derived by running each anomaly's witness history"
    artifacts = (artifact("isolation_levels"),)
    compare = True

    def compare_table(self, table):
        """`driftlab compare` prints the matrix with the profiles side by side: anomaly x profile, verdicts."""
        return self.side_by_side(table, "anomaly", "profile")

    def profiles(self, options: Options) -> tuple[str, ...]:
        return tuple(options.mechanisms_for("isolation") or DEFAULT_PROFILES)

    def check(self, options: Options) -> None:
        for p in self.profiles(options):
            resolve(p, "isolation")
        witnesses(options)

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        return [Cell(self.name, (("profile", p),), 1, seed) for p in self.profiles(options)]

    def run_cell(self, cell: Cell, options: Options) -> CellOutput:
        p = cell.p["profile"]
        mechanism = resolve(p, "isolation")()
        s, c, i = guarantees_of(mechanism)
        rows, histories = [], []
        for anomaly, scenario in witnesses(options).items():
            rt, history = run_scenario(scenario, mechanism, group=f"{p}/{anomaly}")
            results = judge(history)
            own = results[anomaly]
            others = [a for a in ANOMALIES if a != anomaly and results[a].verdict.value == "invalid"]
            rows.append({"stability": s, "compatibility": c, "inheritance": i, "anomaly": anomaly,
                         "scenario": scenario.name, "repetition": 0, "seed": derive_seed(cell.seed, p, anomaly),
                         "verdict": verdict_word(own),
                         "witness": " | ".join(w.explanation for w in own.witnesses),
                         "other_anomalies": ",".join(others), "resolutions": rt.resolutions,
                         "refusals": rt.refusals,
                         "merges_refused": sum(1 for o in rt.ops if o.name == "merge" and o.status == "fail")})
            histories.append(history)
        return CellOutput({k: [r[k] for r in rows] for k in rows[0]}, combine(histories, profile=p))
