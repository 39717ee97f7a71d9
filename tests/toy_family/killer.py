"""A revalidation mechanism whose process dies (SIGKILL) while validating: the durable step it runs in
never answers, so its execution must be recorded indeterminate and judged unknown (tests only)."""
import os
import signal


class Killer:
    name = "Killer"

    def validate(self, txn, store):
        os.kill(os.getpid(), signal.SIGKILL)
