"""VersionAbort: optimistic concurrency on every object read (ATR paper baseline).

It rereads the version of every object the agent read; any change is a
version conflict and ends in REPLAN, whether or not it matters to the
decision.  The object versions are also bound to the commit, as classic OCC
does, so a change between check and commit is caught too.  It never
releases an invalid effect and replans every safe change (the paper: all of them).
"""
from mechanisms.revalidation.base import Mechanism
from vocabulary.revalidation import Outcome, Validation


class VersionAbort(Mechanism):
    name = "VersionAbort"

    def validate(self, txn, store):
        for obj, version in txn.object_versions.items():
            if store.version(obj) != version:
                return Validation(Outcome.REPLAN)
        return Validation(Outcome.KEEP, tokens=tuple(txn.object_versions.items()))
