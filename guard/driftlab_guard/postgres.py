"""Layer 1 on PostgreSQL (the ``driftlab_guard[postgres]`` extra): the guarded ``PostgresSaver``s.

Drop-in subclasses of LangGraph's own savers; the claims live in the same
database and schema.  Imported only when used (``driftlab_guard.GuardedPostgresSaver``
loads this module on first access).  Pipeline mode is not supported: the claim
reads the result of its insert before it goes on.
"""
from __future__ import annotations

from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.postgres.base import UPSERT_CHECKPOINT_WRITES_SQL

from driftlab_guard.consume_once import (CLAIMS_DDL, PG_THREAD_CLAIMS, AsyncGuard, Dialect, Procedure, Row, SyncGuard,
                                         adrive, drive)

POSTGRES = Dialect(begin="BEGIN", write=UPSERT_CHECKPOINT_WRITES_SQL, mark="%s", thread_claims=PG_THREAD_CLAIMS)
POSTGRES_CLAIMS_DDL = CLAIMS_DDL.format(blob="BYTEA", real="DOUBLE PRECISION", suffix="")


def _row(row: Any) -> Row | None:
    return None if row is None else tuple(row.values()) if isinstance(row, dict) else tuple(row)


def _first(cur: Any) -> Row | None:
    return None if cur.description is None else _row(cur.fetchone())


async def _afirst(cur: Any) -> Row | None:
    return None if cur.description is None else _row(await cur.fetchone())


def _no_pipeline(saver: Any) -> None:
    if saver.pipe is not None:
        raise ValueError("the consume-once guard needs a PostgreSQL saver without a pipeline")


class GuardedPostgresSaver(SyncGuard, PostgresSaver):
    """``PostgresSaver`` that claims each parked interrupt once (claims in the same database and schema)."""

    dialect = POSTGRES

    def __init__(self, conn: Any, pipe: Any = None, serde: SerializerProtocol | None = None, *, schema: Any = None,
                 claimant: str | None = None, resume_schema: Any = None) -> None:
        super().__init__(conn, pipe, serde)
        _no_pipeline(self)
        self._guard_init(schema, claimant, resume_schema)

    def setup(self) -> None:
        super().setup()
        with self._cursor() as cur:
            cur.execute(POSTGRES_CLAIMS_DDL)

    def _run(self, proc: Procedure) -> Any:
        with self._cursor() as cur:
            return drive(proc, lambda sql, params: _first(cur.execute(sql, params)), POSTGRES.rollback)


class GuardedAsyncPostgresSaver(AsyncGuard, AsyncPostgresSaver):
    """``AsyncPostgresSaver`` that claims each parked interrupt once (claims in the same database and schema)."""

    dialect = POSTGRES

    def __init__(self, conn: Any, pipe: Any = None, serde: SerializerProtocol | None = None, *, schema: Any = None,
                 claimant: str | None = None, resume_schema: Any = None) -> None:
        super().__init__(conn, pipe, serde)
        _no_pipeline(self)
        self._guard_init(schema, claimant, resume_schema)

    async def setup(self) -> None:
        await super().setup()
        async with self._cursor() as cur:
            await cur.execute(POSTGRES_CLAIMS_DDL)

    async def _arun(self, proc: Procedure) -> Any:
        async with self._cursor() as cur:
            async def execute(sql: str, params: Any) -> Any:
                return await _afirst(await cur.execute(sql, params))
            return await adrive(proc, execute, POSTGRES.rollback)
