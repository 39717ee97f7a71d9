"""NoCheck: release every intent as it was decided (the ATR paper's lower baseline).

It evaluates nothing and binds nothing, so every change whose oracle is
REFRESH, REPLAN or BLOCK becomes an invalid effect (paper: 126,000 of 210,000).
"""
from mechanisms.base import Mechanism
from vocabulary import Outcome, Validation


class NoCheck(Mechanism):
    name = "NoCheck"

    def validate(self, txn, store):
        return Validation(Outcome.KEEP)
