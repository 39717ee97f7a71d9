"""Revalidation mechanisms whose own code fails while validating (tests only): ``Killer`` SIGKILLs its process,
``Raiser`` raises.  Neither may ever become a result: the cell stops with one line naming the mechanism."""
import os
import signal


class Killer:
    name = "Killer"

    def validate(self, txn, store):
        os.kill(os.getpid(), signal.SIGKILL)


class Raiser:
    name = "Raiser"

    def validate(self, txn, store):
        raise RuntimeError("validation exploded")
