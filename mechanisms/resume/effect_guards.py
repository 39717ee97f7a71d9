"""Stock LangGraph with an effect-ledger guard from the registry, adopted as its README says (issue 26 §4).

Serves ``resume_guards``: the guards a LangGraph user can install for "my
approval fired the payment twice", judged beside driftlab's guard and REMIT in
the same fault and race cells.  Both guards here protect **effects** only: a
node's side effect is routed through the guard's ledger, and a node that runs
again (a recovery after a SIGKILL, a second resumer) gets the recorded result
instead of a second call.  They claim nothing about consume-once, prefix
consistency, forks, checkpoint validity or recovery determinism, so
``resume_guards`` judges them on EO (and liveness) and shows the rest as not
covered, never as violated (``covers``).

- ``langgraph+resume-guard``: resume-guard 1.0.0 (``GuardedEffects.run_effect``
  over its ``EffectLedger``, a SQLite file in WAL with ``synchronous=FULL``,
  keyed by run, checkpoint namespace, node and effect key).  A second caller
  that finds another's intent waits up to 5 s for it to land, then raises
  ``EffectAlreadyInFlight`` (its README: crash recovery is the reconciler's
  verdict, not a takeover): a loud failure of the call.
- ``langgraph+agent-ledger``: agent-ledger 0.2.1 (``EffectLedger.run(ToolCall,
  handler)`` on its ``PostgresStore``, the store its README names for
  production; the in-memory store does not cross processes).  Its async API is
  driven with ``asyncio.run`` inside the node; the idempotency key is its own
  (workflow id = the run, tool = the node's task, args = the effect key).

The world is the lab's effect ledger, as for every runtime: the guard's
handler fires the lab's effect, so "fired" is counted where every other row's
is.  LangGraph itself is stock (its default ``durability="async"``).
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

from mechanisms.resume.base import DurableRuntime
from mechanisms.resume.langgraph_runtime import LangGraphRuntime
from mechanisms.resume.store import GUARD_SCHEMA

#: what an effect-only guard claims: the properties it is judged on (the rest are shown as not covered)
EFFECTS_ONLY = ("EO", "liveness")


class LangGraphResumeGuardRuntime(LangGraphRuntime):
    """Stock LangGraph, each effect through resume-guard's ``GuardedEffects`` (module docstring)."""

    name = "langgraph+resume-guard"
    backends = ("sqlite",)  # resume-guard's ledger is a SQLite file
    covers: ClassVar[tuple[str, ...]] = EFFECTS_ONLY
    #: the adoption, as resume-guard's README shows it (lines a user adds to a LangGraph node)
    adoption = ('from resume_guard import EffectLedger, GuardedEffects\n'
                'guard = GuardedEffects(EffectLedger("effects.db"))\n'
                'result, how = guard.run_effect(run_id, ns, node, effect_key, kind, lambda eid: call(eid))\n')
    _guard: Any = None

    def _effects(self) -> Any:
        if self._guard is None:
            from resume_guard import EffectLedger, GuardedEffects

            path = Path(self.backend.location) / f"{self.backend.namespace.lower()}resume_guard.sqlite"
            self._guard = GuardedEffects(EffectLedger(str(path)))
        return self._guard

    def fire_effect(self, run_id: str, task: str, key: str, payload: str) -> bool:
        fired: list[bool] = []

        def call(effect_id: str) -> str:
            fired.append(DurableRuntime.fire_effect(self, run_id, task, key, payload))
            return effect_id

        self._effects().run_effect(run_id, "", task, key, "lab-effect", call)
        return bool(fired and fired[0])


class LangGraphAgentLedgerRuntime(LangGraphRuntime):
    """Stock LangGraph, each effect through agent-ledger's ``EffectLedger.run`` on PostgreSQL (module docstring)."""

    name = "langgraph+agent-ledger"
    backends = ("postgres",)  # agent-ledger's durable store is PostgreSQL
    covers: ClassVar[tuple[str, ...]] = EFFECTS_ONLY
    adoption = ('from agent_ledger import EffectLedger, EffectLedgerOptions, ToolCall\n'
                'from agent_ledger.stores.postgres import PostgresStore\n'
                'ledger = EffectLedger(EffectLedgerOptions(store=PostgresStore(pool=pool)))\n'
                'await ledger.run(ToolCall(workflow_id=run_id, tool=name, args=args), handler=call)\n')

    def _schema(self) -> str:
        """A schema of agent-ledger's own (its ``effects`` table), dropped with the cell's other schemas."""
        return self.backend.namespace.lower() + GUARD_SCHEMA

    def setup(self) -> None:
        super().setup()
        import psycopg
        from agent_ledger.stores.postgres import SCHEMA_SQL
        from psycopg import sql

        with psycopg.connect(self.backend.location, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self._schema())))
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self._schema())))
            conn.execute(SCHEMA_SQL)

    def fire_effect(self, run_id: str, task: str, key: str, payload: str) -> bool:
        fired: list[bool] = []

        async def go() -> None:
            from agent_ledger import EffectLedger, EffectLedgerOptions, ToolCall
            from agent_ledger.stores.postgres import PostgresStore
            from psycopg import sql
            from psycopg.rows import dict_row
            from psycopg_pool import AsyncConnectionPool

            async def handler(_effect: Any) -> dict[str, str]:
                fired.append(DurableRuntime.fire_effect(self, run_id, task, key, payload))
                return {"effect": key}

            async def in_schema(conn: Any) -> None:  # the schema as an identifier, never pasted into SQL text
                await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self._schema())))
                await conn.commit()

            pool = AsyncConnectionPool(conninfo=self.backend.location, min_size=1, max_size=1, open=False,
                                       kwargs={"row_factory": dict_row}, configure=in_schema)
            await pool.open()
            try:
                ledger = EffectLedger(EffectLedgerOptions(store=PostgresStore(pool=pool)))
                await ledger.run(ToolCall(workflow_id=run_id, tool=task, args={"effect": key}), handler=handler)
            finally:
                await pool.close()

        asyncio.run(go())
        return bool(fired and fired[0])
