"""driftguard: consume-once resumes, premise revalidation and semantic pinning for LangGraph.

Three layers, each usable alone (``guard/README.md`` shows each in a few lines):

1. **consume-once and exactly-once** (:mod:`driftguard.consume_once`): guarded
   savers that claim each parked interrupt once, an idempotent effect ledger
   (:mod:`driftguard.effects`), optional schema validation (:mod:`driftguard.schema`);
2. **premise revalidation at resume** (:mod:`driftguard.revalidation`): a parked
   action's premises re-checked on resume -> KEEP / REFRESH / REPLAN / BLOCK;
3. **semantic pinning** (:mod:`driftguard.pinning`): aliased resources pinned in
   a manifest stored in the checkpoint, inherited by subgraphs, contracts checked
   at first binding and at fan-in.

The PostgreSQL savers (the ``driftguard[postgres]`` extra) are imported on first use.
"""
from __future__ import annotations

from typing import Any

from driftguard.effects import OnceLedger, current_task, fire_once, idempotency_key
from driftguard.errors import (ContractViolation, InvalidState, PinConflict, PinningError, PinsNotInherited,
                               ResumeRefused, StaleDecision)
from driftguard.pinning import Binding, Contract, Pins, Resolved, Resources
from driftguard.revalidation import (BLOCK, KEEP, REFRESH, REPLAN, DictSource, Outcome, Premise, Revalidator, Source,
                                     Verdict)
from driftguard.schema import StateSchema
from driftguard.sqlite import GuardedAsyncSqliteSaver, GuardedSqliteSaver

__version__ = "0.1.0"

__all__ = [
    # layer 1
    "GuardedSqliteSaver", "GuardedAsyncSqliteSaver", "GuardedPostgresSaver", "GuardedAsyncPostgresSaver", "guarded",
    "OnceLedger", "fire_once", "current_task", "idempotency_key", "StateSchema", "ResumeRefused", "InvalidState",
    # layer 2
    "Premise", "Revalidator", "Verdict", "Outcome", "KEEP", "REFRESH", "REPLAN", "BLOCK", "Source", "DictSource",
    "StaleDecision",
    # layer 3
    "Pins", "Resources", "Contract", "Binding", "Resolved", "PinningError", "ContractViolation", "PinConflict",
    "PinsNotInherited",
]

_POSTGRES = ("GuardedPostgresSaver", "GuardedAsyncPostgresSaver")


def __getattr__(name: str) -> Any:
    if name in _POSTGRES:
        from driftguard import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module 'driftguard' has no attribute {name!r}")


def guarded(saver_class: type) -> type:
    """The guarded class for one of LangGraph's four stock savers (``SqliteSaver`` -> ``GuardedSqliteSaver``...)."""
    name = "Guarded" + saver_class.__name__
    if name in _POSTGRES:
        return __getattr__(name)
    if name in ("GuardedSqliteSaver", "GuardedAsyncSqliteSaver"):
        return globals()[name]
    raise TypeError(f"{saver_class.__name__}: driftguard guards SqliteSaver, AsyncSqliteSaver, PostgresSaver and "
                    f"AsyncPostgresSaver")
