"""The toy family: a coin is flipped N times per cell; the oracle says 'heads' must follow 'tails'.

Everything a family declares, in one file: scenario parser, mechanism,
checker, experiment and artifact.  Used only by tests/test_engine.py.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.artifact import Artifact
from analysis.report import Matrix, Section
from runners.experiment import Cell, CellOutput, Experiment, Options
from scenarios import ScenarioError
from vocabulary import CheckResult, History, Operation, Verdict, Witness
from vocabulary.schema import ALWAYS, HistorySchema, Key, OpSpec


@dataclass(frozen=True)
class Coin:
    name: str
    description: str
    flips: int
    path: Path


def parse_scenario(path: Path, raw: dict) -> Coin:
    if not isinstance(raw.get("flips"), int) or raw["flips"] < 1:
        raise ScenarioError(f"{path}: flips: must be a whole number of at least 1")
    return Coin(raw["name"], raw.get("description", ""), raw["flips"], path)


class Alternating:
    """The toy protocol: flip(i) -> 'heads' | 'tails'."""

    def flip(self, i: int) -> str:
        return "heads" if i % 2 else "tails"


class Sticky:
    def flip(self, i: int) -> str:
        return "tails"


class Alternates:
    """Every 'tails' is followed by 'heads'."""

    name = "alternates"
    family = "toy"

    def check(self, history: History) -> CheckResult:
        ops = history.operations
        if any(op.indeterminate for op in ops):
            return CheckResult(self.name, Verdict.UNKNOWN, summary="an indeterminate flip")
        for a, b in zip(ops, ops[1:]):
            if a.value["side"] == "tails" and b.value["side"] == "tails":
                return CheckResult(self.name, Verdict.INVALID, (Witness((a.index, b.index), "two tails in a row"),))
        return CheckResult(self.name, Verdict.VALID)


CHECKERS = {"alternates": Alternates()}
HISTORY = HistorySchema("toy", (OpSpec("flip", "the coin is flipped", (Key("side", "string", ALWAYS),)),))


def table(records: pd.DataFrame) -> pd.DataFrame:
    return records.groupby("mechanism", sort=True).agg(flips=("side", "size"), valid=("verdict", lambda v: (v == "valid").sum())).reset_index()


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    cells = {(m, "alternates"): ("holds" if v == f else "violated") for m, v, f in tab[["mechanism", "valid", "flips"]].itertuples(index=False)}
    return Section("toy_flips", "Toy coin flips", matrices=[Matrix("mechanism x property", sorted(tab["mechanism"]), ["alternates"],
                                                                  cells, {("Alternating", "alternates"): "holds"})])


class ToyFlips(Experiment):
    name = "toy_flips"
    family = "toy"
    description = "coin flips by each toy mechanism"
    artifacts = (Artifact("toy_flips", table=table, report=report),)

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        from scenarios import load_scenarios

        coins = load_scenarios(tuple(options.scenario_dirs), family="toy")["toy"]
        mechanisms = options.mechanisms_for("toy") or ("Alternating",)
        return [Cell(self.name, (("coin", c), ("mechanism", m)), coins[c].flips, seed) for c in coins for m in mechanisms]

    def run_cell(self, cell: Cell, options: Options) -> CellOutput:
        from mechanisms import resolve

        mechanism = resolve(cell.p["mechanism"], "toy")()
        sides = [mechanism.flip(i) for i in range(cell.repetitions)]
        history = History("toy", tuple(Operation(i, "coin", "flip", value={"side": s}) for i, s in enumerate(sides)))
        verdict = Alternates().check(history).verdict.value
        return CellOutput({"repetition": list(range(cell.repetitions)), "seed": [cell.seed] * cell.repetitions,
                           "side": sides, "verdict": [verdict] * cell.repetitions, "noise": [random.Random(cell.seed).random()] * cell.repetitions}, history)
