"""driftlab_guard: consume-once resumes, premise revalidation and semantic pinning for LangGraph.

Three layers, each usable alone (``guard/README.md`` shows each in a few lines):

1. **consume-once and exactly-once** (:mod:`driftlab_guard.consume_once`): guarded
   savers that claim each parked interrupt once, an idempotent effect ledger
   (:mod:`driftlab_guard.effects`), optional schema validation (:mod:`driftlab_guard.schema`);
2. **premise revalidation at resume** (:mod:`driftlab_guard.revalidation`): a parked
   action's premises re-checked on resume -> KEEP / REFRESH / REPLAN / BLOCK;
3. **semantic pinning** (:mod:`driftlab_guard.pinning`): aliased resources pinned in
   a manifest stored in the checkpoint, inherited by subgraphs, contracts checked
   at first binding and at fan-in.

The PostgreSQL savers (the ``driftlab_guard[postgres]`` extra) are imported on first use.
"""
from __future__ import annotations

from typing import Any

from driftlab_guard.claims import ClaimStore, GuardedSaver, PostgresClaims, RedisClaims, SqliteClaims, guard
from driftlab_guard.effects import OnceLedger, current_task, fire_once, idempotency_key
from driftlab_guard.errors import (ContractViolation, InvalidState, PinConflict, PinningError, PinsNotInherited,
                               ResumeRefused, StaleDecision)
from driftlab_guard.pinning import Binding, Contract, Pins, Resolved, Resources
from driftlab_guard.revalidation import (BLOCK, KEEP, REFRESH, REPLAN, DictSource, Outcome, Premise, Revalidator, Source,
                                     Verdict)
from driftlab_guard.schema import StateSchema
from driftlab_guard.sqlite import GuardedAsyncSqliteSaver, GuardedSqliteSaver

__version__ = "0.1.0"

__all__ = [
    # layer 1
    "GuardedSqliteSaver", "GuardedAsyncSqliteSaver", "GuardedPostgresSaver", "GuardedAsyncPostgresSaver", "guarded",
    "guard", "GuardedSaver", "ClaimStore", "SqliteClaims", "PostgresClaims", "RedisClaims",
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
        from driftlab_guard import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module 'driftlab_guard' has no attribute {name!r}")


def guarded(saver_class: type) -> type:
    """The guarded class for one of LangGraph's four stock savers (``SqliteSaver`` -> ``GuardedSqliteSaver``...)."""
    name = "Guarded" + saver_class.__name__
    if name in _POSTGRES:
        found: type = __getattr__(name)
        return found
    if name in ("GuardedSqliteSaver", "GuardedAsyncSqliteSaver"):
        local: type = globals()[name]
        return local
    raise TypeError(f"{saver_class.__name__}: driftlab_guard guards SqliteSaver, AsyncSqliteSaver, PostgresSaver and "
                    f"AsyncPostgresSaver")
