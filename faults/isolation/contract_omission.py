"""Contract omission: drop each declared contract with probability p (semantic isolation, weakest assumption).

SSI's compatibility guarantee is conditional on complete declarations
("SemIso enforces but does not infer them", paper §4; the review record's
weakest assumption).  The fault makes that condition fail at a known
rate: before an execution starts, each declared contract is independently
dropped from the registry the mechanism sees with probability p, drawn
from the execution's seeded RNG.  The checkers keep judging by the full
set (the oracle), so an execution in which SSI binds a combination a
dropped contract forbids is counted as an *incompatible combination
admitted*.

Like the other injectors: ``setup`` (the contracts), ``invoke`` (draw the
omissions), ``teardown``.
"""
from __future__ import annotations

import random
from typing import Sequence

from vocabulary.isolation import Contract


class ContractOmission:
    name = "contract_omission"

    def __init__(self, rate: float):
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"contract omission rate must be between 0 and 1, got {rate}")
        self.rate = rate
        self.contracts: tuple[Contract, ...] = ()

    def setup(self, contracts: Sequence[Contract]) -> tuple[Contract, ...]:
        self.contracts = tuple(contracts)
        return self.contracts

    def invoke(self, rng: random.Random) -> tuple[tuple[Contract, ...], tuple[Contract, ...]]:
        """(the contracts the mechanism sees, the dropped ones).  Draws once per contract, always."""
        draws = [rng.random() < self.rate for _ in self.contracts]
        kept = tuple(c for c, d in zip(self.contracts, draws) if not d)
        dropped = tuple(c for c, d in zip(self.contracts, draws) if d)
        return kept, dropped

    def teardown(self) -> None:
        self.contracts = ()
