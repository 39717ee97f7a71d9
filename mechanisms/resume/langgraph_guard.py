"""The consume-once guard for LangGraph: checkpoint savers that claim each parked interrupt once.

Serves "Resume Means Resume" (arXiv 2608.03836), consume-once (CO) and the
concurrent-resume experiment: the paper measured LangGraph 1.2.9 recording a
second resume value and never consulting it, and k concurrent resumers all
being served (saturation 1.0 in 36 of 40 cells).  Its authors planned a guard;
this module is that guard, as drop-in subclasses of LangGraph's own savers:

=============================  ===========================================
``GuardedSqliteSaver``         ``langgraph.checkpoint.sqlite.SqliteSaver``
``GuardedAsyncSqliteSaver``    ``...sqlite.aio.AsyncSqliteSaver``
``GuardedPostgresSaver``       ``langgraph.checkpoint.postgres.PostgresSaver``
``GuardedAsyncPostgresSaver``  ``...postgres.aio.AsyncPostgresSaver``
=============================  ===========================================

Each stores checkpoints exactly as the stock saver does (it passes LangGraph's
conformance kit at the same level) and adds one table in the same SQLite file
or PostgreSQL schema, ``driftlab_guard_claims``, keyed by (thread, namespace,
interrupt id).

**The claim.**  When a graph is invoked with ``Command(resume=value)``, the
saver's first load of that invocation (``get_tuple`` / ``aget_tuple``, which
LangGraph calls before it schedules any node) claims every interrupt recorded
on the loaded checkpoint in one transaction (``INSERT ... ON CONFLICT DO
NOTHING``; all or none).  Of k concurrent or repeated resumers exactly one
inserts the rows and proceeds; every other one gets :class:`ResumeRefused`
from ``invoke`` before any node runs.  A resume of a checkpoint that has no
interrupt recorded (the thread head after the run ended: LangGraph would
record the value and never consult it) is refused too, and so is a resume
addressed by ``checkpoint_id`` to a parked checkpoint whose interrupt was
already consumed (LangGraph would re-run the nodes after it with the old value).

**Recovery.**  The claim row keeps the resume value (serialized by the saver's
serde) before any node runs: it is the write-ahead record of the consumption.
If the resumer dies before LangGraph's own RESUME write is durable (always so
with ``durability="exit"``), a recovery (``invoke(None, config)``) of that
checkpoint is handed the claimed value, so it continues with the value that
was consumed instead of parking again (liveness; recovery determinism).

**How the saver knows it is a resume.**  LangGraph never tells a saver why a
checkpoint is loaded.  The loop that loads it holds the invocation's input, and
it is on the call stack of the load; the guard reads it from there
(:func:`calling_loop`).  That is the one coupling to LangGraph's internals
(``langgraph.pregel._loop.PregelLoop``); it is pinned by a test
(``tests/test_langgraph_guard.py``) that fails if a release moves the load.
What it trades away: one claim transaction per resume (measured by
``benchmarks/resume/bench_langgraph_guard.py``) and nothing on ordinary steps.

Optional schema validation (:mod:`mechanisms.resume.langgraph_schema`): pass
``schema=State`` (or call :meth:`validate_with`) and every checkpoint and
pending write is checked before it is persisted.  Effects inside nodes are the
third part of the guard (:mod:`mechanisms.resume.langgraph_effects`).
"""
from __future__ import annotations

import os
import socket
import sys
import time
import uuid
import weakref
from contextlib import nullcontext
from typing import Any, Iterable, Sequence

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres import _internal as _pg_internal
from langgraph.checkpoint.postgres import _ainternal as _pg_ainternal
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.pregel._loop import PregelLoop
from langgraph.types import Command
from psycopg.rows import tuple_row

from mechanisms.resume.langgraph_schema import StateSchema, as_schema

# LangGraph's reserved channel / task names (langgraph._internal._constants; stable since 0.2).
INTERRUPT_CHANNEL = "__interrupt__"
RESUME_CHANNEL = "__resume__"
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"


SQLITE_CLAIMS_DDL = """
CREATE TABLE IF NOT EXISTS driftlab_guard_claims (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    interrupt_id TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    claimant TEXT NOT NULL,
    value_type TEXT,
    value BLOB,
    claimed_at REAL NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, interrupt_id)
)"""

POSTGRES_CLAIMS_DDL = """
CREATE TABLE IF NOT EXISTS driftlab_guard_claims (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    interrupt_id TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    claimant TEXT NOT NULL,
    value_type TEXT,
    value BYTEA,
    claimed_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, interrupt_id)
)"""


class ResumeRefused(RuntimeError):
    """A resume was refused before any node ran: its interrupt is consumed, or nothing is parked there."""

    def __init__(self, thread_id: str, checkpoint_id: str, reason: str, *,
                 interrupt_ids: Sequence[str] = (), claimant: str | None = None):
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.interrupt_ids = tuple(interrupt_ids)
        self.claimant = claimant
        self.reason = reason
        super().__init__(f"resume refused (thread {thread_id}, checkpoint {checkpoint_id}): {reason}")


def calling_loop(depth: int = 8) -> PregelLoop | None:
    """The outer LangGraph loop whose load called the saver (None for get_state, history, subgraphs...)."""
    frame = sys._getframe(2)
    for _ in range(depth):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if isinstance(owner, PregelLoop):
            return None if owner.is_nested else owner
        frame = frame.f_back
    return None


def recorded_interrupts(tup: CheckpointTuple) -> list[str]:
    """Ids of the interrupts recorded on a checkpoint (its INTERRUPT pending writes), in order."""
    ids: list[str] = []
    for _task, channel, value in tup.pending_writes or ():
        if channel != INTERRUPT_CHANNEL:
            continue
        for item in value if isinstance(value, (list, tuple)) else (value,):
            iid = getattr(item, "id", None)
            if iid is not None and iid not in ids:
                ids.append(str(iid))
    return ids


def has_resume_write(tup: CheckpointTuple) -> bool:
    return any(channel == RESUME_CHANNEL for _t, channel, _v in tup.pending_writes or ())


def default_claimant() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class _ConsumeOnce:
    """What the four guarded savers share: deciding, per load, to claim, refuse, replay or pass."""

    guard_schema: StateSchema | None = None
    guard_claimant: str = ""

    def _guard_init(self, schema: Any, claimant: str | None) -> None:
        self.guard_schema = as_schema(schema)
        self.guard_claimant = claimant or default_claimant()
        self._guard_seen: "weakref.WeakSet[PregelLoop]" = weakref.WeakSet()
        self.claims_made = 0
        self.claims_refused = 0

    def validate_with(self, schema: Any) -> "_ConsumeOnce":
        """Check every checkpoint and pending write against ``schema`` before it is persisted."""
        self.guard_schema = as_schema(schema)
        return self

    # ---- the decision (pure but for the loop it reads)
    def _guard_plan(self, tup: CheckpointTuple | None, loop: PregelLoop | None):
        """None (pass), ("claim", ids, value), ("refuse", reason, ids) or ("replay", ids)."""
        if loop is None or loop in self._guard_seen:
            return None
        self._guard_seen.add(loop)
        command = loop.input
        if tup is None:  # no checkpoint: LangGraph would run the graph from an empty state with the value
            if isinstance(command, Command) and command.resume is not None:
                return ("refuse", "the thread has no checkpoint: nothing is parked", [])
            return None
        ids = recorded_interrupts(tup)
        if isinstance(command, Command) and command.resume is not None:
            value = command.resume
            if isinstance(value, dict) and value and all(k in ids for k in value):
                ids = list(value)  # a resume map names the interrupts it answers
            if not ids:
                return ("refuse", "no interrupt is parked at this checkpoint (LangGraph would record the "
                                  "resume value and never consult it)", ids)
            return ("claim", ids, value)
        if command is None and ids and not has_resume_write(tup):
            return ("replay", ids)
        return None

    def _guard_conflict(self, tup: CheckpointTuple, ids: list[str], holder: tuple[str, str] | None):
        self.claims_refused += 1
        conf = tup.config["configurable"]
        who = f" by {holder[0]} at checkpoint {holder[1]}" if holder else ""
        raise ResumeRefused(str(conf["thread_id"]), str(conf.get("checkpoint_id")),
                            f"interrupt {', '.join(ids)} was already consumed{who}",
                            interrupt_ids=ids, claimant=holder[0] if holder else None)

    def _guard_refuse(self, tup: CheckpointTuple | None, reason: str, ids: list[str], config: dict):
        self.claims_refused += 1
        conf = (tup.config if tup is not None else config)["configurable"]
        raise ResumeRefused(str(conf["thread_id"]), str(conf.get("checkpoint_id")), reason, interrupt_ids=ids)

    def _guard_rows(self, tup: CheckpointTuple, ids: list[str], value: Any) -> list[tuple]:
        conf = tup.config["configurable"]
        vtype, blob = self.serde.dumps_typed(value)
        now = time.time()
        return [(str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")), iid, str(conf["checkpoint_id"]),
                 self.guard_claimant, vtype, blob, now) for iid in ids]

    def _guard_replayed(self, tup: CheckpointTuple, found: tuple[str, bytes] | None) -> CheckpointTuple:
        if found is None:
            return tup
        value = self.serde.loads_typed(found)
        return tup._replace(pending_writes=[*(tup.pending_writes or ()), (NULL_TASK_ID, RESUME_CHANNEL, value)])

    def _guard_check_checkpoint(self, checkpoint: dict, where: str) -> None:
        if self.guard_schema is not None:
            self.guard_schema.check(checkpoint.get("channel_values", {}), where)

    def _guard_check_writes(self, writes: Iterable[tuple[str, Any]], where: str) -> None:
        if self.guard_schema is not None:
            self.guard_schema.check(list(writes), where)


# ---------------------------------------------------------------------------------------------- SQLite
def _sqlite_claim(conn, rows: list[tuple]) -> tuple[str, str] | None:
    """Insert every claim row in one IMMEDIATE transaction; on any conflict roll back and name the holder."""
    cur = conn.cursor()
    try:
        if not conn.in_transaction:
            cur.execute("BEGIN IMMEDIATE")
        for row in rows:
            cur.execute("INSERT INTO driftlab_guard_claims (thread_id, checkpoint_ns, interrupt_id, checkpoint_id, "
                        "claimant, value_type, value, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                        "ON CONFLICT DO NOTHING", row)
            if cur.rowcount == 0:
                holder = cur.execute("SELECT claimant, checkpoint_id FROM driftlab_guard_claims WHERE thread_id = ? "
                                     "AND checkpoint_ns = ? AND interrupt_id = ?", row[:3]).fetchone()
                conn.rollback()
                return tuple(holder) if holder else ("?", "?")
        conn.commit()
        return None
    except BaseException:
        conn.rollback()
        raise
    finally:
        cur.close()


def _sqlite_claimed_value(conn, thread_id: str, ns: str, ids: list[str]) -> tuple[str, bytes] | None:
    marks = ", ".join("?" for _ in ids)
    row = conn.execute("SELECT value_type, value FROM driftlab_guard_claims WHERE thread_id = ? AND checkpoint_ns = ? "
                       f"AND interrupt_id IN ({marks}) ORDER BY claimed_at LIMIT 1", (thread_id, ns, *ids)).fetchone()
    if conn.in_transaction:
        conn.commit()
    return (row[0], bytes(row[1])) if row else None


class GuardedSqliteSaver(_ConsumeOnce, SqliteSaver):
    """``SqliteSaver`` that claims each parked interrupt once (claims in the same SQLite file)."""

    def __init__(self, conn, *, serde=None, schema: Any = None, claimant: str | None = None):
        super().__init__(conn, serde=serde)
        self._guard_init(schema, claimant)

    def setup(self) -> None:
        if self.is_setup:
            return
        super().setup()
        self.conn.execute(SQLITE_CLAIMS_DDL)
        self.conn.commit()

    def get_tuple(self, config):
        tup = super().get_tuple(config)
        plan = self._guard_plan(tup, calling_loop())
        if plan is None:
            return tup
        if plan[0] == "refuse":
            self._guard_refuse(tup, plan[1], plan[2], config)
        conf = tup.config["configurable"]
        with self.lock:
            if plan[0] == "claim":
                holder = _sqlite_claim(self.conn, self._guard_rows(tup, plan[1], plan[2]))
                if holder is not None:
                    self._guard_conflict(tup, plan[1], holder)
                self.claims_made += 1
                return tup
            found = _sqlite_claimed_value(self.conn, str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")),
                                          plan[1])
        return self._guard_replayed(tup, found)

    def put(self, config, checkpoint, metadata, new_versions):
        self._guard_check_checkpoint(checkpoint, "checkpoint " + str(checkpoint.get("id")))
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config, writes, task_id, task_path: str = ""):
        self._guard_check_writes(writes, f"the writes of task {task_id}")
        return super().put_writes(config, writes, task_id, task_path)


async def _aiosqlite_claim(conn, rows: list[tuple]) -> tuple[str, str] | None:
    await conn.execute("BEGIN IMMEDIATE")
    try:
        for row in rows:
            cur = await conn.execute(
                "INSERT INTO driftlab_guard_claims (thread_id, checkpoint_ns, interrupt_id, checkpoint_id, claimant, "
                "value_type, value, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", row)
            if cur.rowcount == 0:
                async with conn.execute("SELECT claimant, checkpoint_id FROM driftlab_guard_claims WHERE thread_id = ? "
                                        "AND checkpoint_ns = ? AND interrupt_id = ?", row[:3]) as sel:
                    holder = await sel.fetchone()
                await conn.rollback()
                return tuple(holder) if holder else ("?", "?")
        await conn.commit()
        return None
    except BaseException:
        await conn.rollback()
        raise


class GuardedAsyncSqliteSaver(_ConsumeOnce, AsyncSqliteSaver):
    """``AsyncSqliteSaver`` that claims each parked interrupt once (claims in the same SQLite file)."""

    def __init__(self, conn, *, serde=None, schema: Any = None, claimant: str | None = None):
        super().__init__(conn, serde=serde)
        self._guard_init(schema, claimant)

    async def setup(self) -> None:
        if self.is_setup:
            return
        await super().setup()
        async with self.lock:
            await self.conn.execute(SQLITE_CLAIMS_DDL)
            await self.conn.commit()

    async def aget_tuple(self, config):
        loop = calling_loop()
        tup = await super().aget_tuple(config)
        plan = self._guard_plan(tup, loop)
        if plan is None:
            return tup
        if plan[0] == "refuse":
            self._guard_refuse(tup, plan[1], plan[2], config)
        conf = tup.config["configurable"]
        async with self.lock:
            if plan[0] == "claim":
                holder = await _aiosqlite_claim(self.conn, self._guard_rows(tup, plan[1], plan[2]))
                if holder is not None:
                    self._guard_conflict(tup, plan[1], holder)
                self.claims_made += 1
                return tup
            marks = ", ".join("?" for _ in plan[1])
            async with self.conn.execute(
                    "SELECT value_type, value FROM driftlab_guard_claims WHERE thread_id = ? AND checkpoint_ns = ? "
                    f"AND interrupt_id IN ({marks}) ORDER BY claimed_at LIMIT 1",
                    (str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")), *plan[1])) as cur:
                row = await cur.fetchone()
        return self._guard_replayed(tup, (row[0], bytes(row[1])) if row else None)

    async def aput(self, config, checkpoint, metadata, new_versions):
        self._guard_check_checkpoint(checkpoint, "checkpoint " + str(checkpoint.get("id")))
        return await super().aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id, task_path: str = ""):
        self._guard_check_writes(writes, f"the writes of task {task_id}")
        return await super().aput_writes(config, writes, task_id, task_path)


# ---------------------------------------------------------------------------------------------- PostgreSQL
_PG_INSERT = ("INSERT INTO driftlab_guard_claims (thread_id, checkpoint_ns, interrupt_id, checkpoint_id, claimant, "
              "value_type, value, claimed_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING "
              "RETURNING interrupt_id")
_PG_HOLDER = ("SELECT claimant, checkpoint_id FROM driftlab_guard_claims WHERE thread_id = %s AND checkpoint_ns = %s "
              "AND interrupt_id = %s")
_PG_VALUE = ("SELECT value_type, value FROM driftlab_guard_claims WHERE thread_id = %s AND checkpoint_ns = %s "
             "AND interrupt_id = ANY(%s) ORDER BY claimed_at LIMIT 1")


class _Conflict(Exception):
    def __init__(self, holder):
        self.holder = holder


def _no_pipeline(saver) -> None:
    if saver.pipe is not None:
        raise ValueError("the consume-once guard needs a PostgreSQL saver without a pipeline")


class GuardedPostgresSaver(_ConsumeOnce, PostgresSaver):
    """``PostgresSaver`` that claims each parked interrupt once (claims in the same database and schema)."""

    def __init__(self, conn, pipe=None, serde=None, *, schema: Any = None, claimant: str | None = None):
        super().__init__(conn, pipe, serde)
        _no_pipeline(self)
        self._guard_init(schema, claimant)

    def setup(self) -> None:
        super().setup()
        with self._cursor() as cur:
            cur.execute(POSTGRES_CLAIMS_DDL)

    def get_tuple(self, config):
        tup = super().get_tuple(config)
        plan = self._guard_plan(tup, calling_loop())
        if plan is None:
            return tup
        if plan[0] == "refuse":
            self._guard_refuse(tup, plan[1], plan[2], config)
        conf = tup.config["configurable"]
        with self.lock, _pg_internal.get_connection(self.conn) as conn:
            if plan[0] == "claim":
                rows = self._guard_rows(tup, plan[1], plan[2])
                try:
                    # one interrupt: one autocommit statement (atomic by itself); several: one transaction
                    with (conn.transaction() if len(rows) > 1 else nullcontext()), \
                            conn.cursor(row_factory=tuple_row) as cur:
                        for row in rows:
                            if cur.execute(_PG_INSERT, row).fetchone() is None:
                                raise _Conflict(cur.execute(_PG_HOLDER, row[:3]).fetchone())
                except _Conflict as c:
                    self._guard_conflict(tup, plan[1], tuple(c.holder) if c.holder else None)
                self.claims_made += 1
                return tup
            with conn.cursor(row_factory=tuple_row) as cur:
                row = cur.execute(_PG_VALUE, (str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")),
                                              list(plan[1]))).fetchone()
        return self._guard_replayed(tup, (row[0], bytes(row[1])) if row else None)

    def put(self, config, checkpoint, metadata, new_versions):
        self._guard_check_checkpoint(checkpoint, "checkpoint " + str(checkpoint.get("id")))
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config, writes, task_id, task_path: str = ""):
        self._guard_check_writes(writes, f"the writes of task {task_id}")
        return super().put_writes(config, writes, task_id, task_path)


class GuardedAsyncPostgresSaver(_ConsumeOnce, AsyncPostgresSaver):
    """``AsyncPostgresSaver`` that claims each parked interrupt once (claims in the same database and schema)."""

    def __init__(self, conn, pipe=None, serde=None, *, schema: Any = None, claimant: str | None = None):
        super().__init__(conn, pipe, serde)
        _no_pipeline(self)
        self._guard_init(schema, claimant)

    async def setup(self) -> None:
        await super().setup()
        async with self._cursor() as cur:
            await cur.execute(POSTGRES_CLAIMS_DDL)

    async def aget_tuple(self, config):
        loop = calling_loop()
        tup = await super().aget_tuple(config)
        plan = self._guard_plan(tup, loop)
        if plan is None:
            return tup
        if plan[0] == "refuse":
            self._guard_refuse(tup, plan[1], plan[2], config)
        conf = tup.config["configurable"]
        async with self.lock, _pg_ainternal.get_connection(self.conn) as conn:
            if plan[0] == "claim":
                rows = self._guard_rows(tup, plan[1], plan[2])
                try:
                    async with (conn.transaction() if len(rows) > 1 else nullcontext()), \
                            conn.cursor(row_factory=tuple_row) as cur:
                        for row in rows:
                            if await (await cur.execute(_PG_INSERT, row)).fetchone() is None:
                                raise _Conflict(await (await cur.execute(_PG_HOLDER, row[:3])).fetchone())
                except _Conflict as c:
                    self._guard_conflict(tup, plan[1], tuple(c.holder) if c.holder else None)
                self.claims_made += 1
                return tup
            async with conn.cursor(row_factory=tuple_row) as cur:
                row = await (await cur.execute(_PG_VALUE, (str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")),
                                                           list(plan[1])))).fetchone()
        return self._guard_replayed(tup, (row[0], bytes(row[1])) if row else None)

    async def aput(self, config, checkpoint, metadata, new_versions):
        self._guard_check_checkpoint(checkpoint, "checkpoint " + str(checkpoint.get("id")))
        return await super().aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id, task_path: str = ""):
        self._guard_check_writes(writes, f"the writes of task {task_id}")
        return await super().aput_writes(config, writes, task_id, task_path)


GUARDED = {SqliteSaver: GuardedSqliteSaver, AsyncSqliteSaver: GuardedAsyncSqliteSaver,
           PostgresSaver: GuardedPostgresSaver, AsyncPostgresSaver: GuardedAsyncPostgresSaver}
