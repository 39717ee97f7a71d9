"""NoCheck: release every intent as it was decided (the ATR paper's lower baseline).

It evaluates nothing and binds nothing, so every change whose oracle is
REFRESH, REPLAN or BLOCK becomes an invalid effect (the paper: 60% of its executions).
"""
from mechanisms.revalidation.base import Mechanism
from vocabulary.revalidation import Outcome, Validation


class NoCheck(Mechanism):
    name = "NoCheck"

    def validate(self, txn, store):
        return Validation(Outcome.KEEP)
