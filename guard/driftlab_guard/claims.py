"""Layer 1 for any checkpoint saver: the claim kept in a store of the user's choosing (SQLite, PostgreSQL, Redis).

Serves "Resume Means Resume" (arXiv 2608.03836), consume-once (CO), for the
savers the four guarded subclasses do not cover (the in-memory saver of tests,
Redis, MongoDB and the others on the registry).  :func:`guard` wraps any
``BaseCheckpointSaver``, sync and async: every call goes to the wrapped saver
unchanged, except the load of a ``Command(resume=...)``, which first claims the
parked interrupt in a **claim store** (the same decision as the subclasses,
:class:`~driftlab_guard.consume_once.ConsumeOnce`).

What differs from the subclasses, and why it is still consume-once: the claim
and LangGraph's own resume write cannot share a transaction when they live in
different stores.  The claim commits first and keeps the value; LangGraph then
writes its resume write through the wrapped saver.  A crash between the two
leaves a claim without a write, and the recovery (``invoke(None, config)``)
finds the claim and is handed the claimed value (the ``replay`` path), so the
value is consumed once whatever the crash point.  Where the saver and the
claim share a database, use the subclasses (``GuardedSqliteSaver`` ...): they
keep both in one transaction and save a commit.

Claim stores:

- :class:`SqliteClaims` (a file of its own; WAL, ``synchronous=FULL``);
- :class:`PostgresClaims` (an autocommit psycopg connection; one transaction
  per claim);
- :class:`RedisClaims` (``redis-py``; each claim row is set only if absent by a
  Lua script, so one of k racers gets it; a claim of several interrupts is made
  row by row and undone on a conflict, so a racer may see the first row of a
  claim that is then undone and be refused: both then retry or give up, neither
  runs twice).  A Redis without persistence (``appendonly no``, ``save ""``)
  forgets every claim when it restarts: consume-once then holds only while it
  is up.  Say so to your operators, or turn on AOF with ``appendfsync always``.
"""
from __future__ import annotations

import sqlite3
import threading
from typing import Any, Callable, Protocol

from langgraph.checkpoint.base import BaseCheckpointSaver

from driftlab_guard.consume_once import (CLAIMS_DDL, PG_THREAD_CLAIMS, AsyncGuard, Dialect, Procedure, SyncGuard,
                                         drive)

SQLITE = Dialect(begin="BEGIN IMMEDIATE", write="")
POSTGRES = Dialect(begin="BEGIN", write="", mark="%s", thread_claims=PG_THREAD_CLAIMS)


class ClaimStore(Protocol):
    """Where claims live: runs one claim procedure (``consume_once.claim`` and its siblings) to its end."""

    dialect: Dialect

    def run(self, proc: Procedure) -> Any: ...

    def setup(self) -> None: ...


class SqliteClaims:
    """Claims in a SQLite file of their own (not the saver's)."""

    dialect = SQLITE

    def __init__(self, path: str):
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")  # a claim that returned survives a power loss
        self.lock = threading.Lock()
        self.ready = False

    def run(self, proc: Procedure) -> Any:
        with self.lock:
            if not self.ready:  # the table on first use, not at construction (the database may not exist yet)
                self.setup()
            return drive(proc, lambda sql, params: self.conn.execute(sql, params or ()).fetchone(), "ROLLBACK")


    def setup(self) -> None:
        self.conn.execute(CLAIMS_DDL.format(blob="BLOB", real="REAL", suffix=" WITHOUT ROWID"))
        self.ready = True


class PostgresClaims:
    """Claims in a PostgreSQL database (an autocommit psycopg connection, or a DSN), in ``schema`` if given (set as
    the connection's search path; the name is composed as an identifier, never pasted into SQL text)."""

    dialect = POSTGRES

    def __init__(self, conn: Any, schema: str | None = None):
        from psycopg import sql

        if isinstance(conn, str):
            import psycopg

            conn = psycopg.connect(conn, autocommit=True)
        if not conn.autocommit:
            raise ValueError("PostgresClaims needs an autocommit connection (each claim opens its own transaction)")
        if schema is not None:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        self.conn = conn
        self.lock = threading.Lock()
        self.ready = False

    def run(self, proc: Procedure) -> Any:
        def execute(sql: str, params: Any) -> Any:
            cur = self.conn.execute(sql, params)
            return None if cur.description is None else cur.fetchone()

        with self.lock:
            if not self.ready:  # on first use: the schema may be created after the store is made
                self.setup()
            return drive(proc, execute, "ROLLBACK")

    def setup(self) -> None:
        """The claims table.  Two first uses at once may both try to create it: the loser's error is no error."""
        import psycopg

        try:
            self.conn.execute(CLAIMS_DDL.format(blob="BYTEA", real="DOUBLE PRECISION", suffix=""))
        except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
            pass  # CREATE TABLE IF NOT EXISTS is not atomic across sessions in PostgreSQL: the other one made it
        self.ready = True


# Redis: the claim procedure's requests, by statement, and the keys they touch.
REDIS = Dialect(begin="BEGIN", write="", insert="INSERT", holder="HOLDER", value="VALUE", latest="LATEST",
                thread_claims="CLAIMS", commit="COMMIT", rollback="ROLLBACK")
_SET_IF_ABSENT = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'checkpoint_id', ARGV[1], 'claimant', ARGV[2], 'value_type', ARGV[3], 'value', ARGV[4],
           'claimed_at', ARGV[5], 'interrupt_id', ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[6])
return 1
"""
_UNDO_IF_MINE = """
if redis.call('HGET', KEYS[1], 'claimant') == ARGV[1] then
  redis.call('DEL', KEYS[1]); redis.call('ZREM', KEYS[2], ARGV[2]); return 1
end
return 0
"""


class RedisClaims:
    """Claims in Redis (plain Redis: no module needed).  Keys start with ``prefix``."""

    dialect = REDIS

    def __init__(self, client: Any, prefix: str = "driftlab_guard"):
        self.r = client
        self.prefix = prefix
        self.set_if_absent: Callable[..., Any] = client.register_script(_SET_IF_ABSENT)
        self.undo_if_mine: Callable[..., Any] = client.register_script(_UNDO_IF_MINE)
        self.lock = threading.Lock()

    def _key(self, thread: str, ns: str, iid: str) -> str:
        return f"{self.prefix}:claim:{thread}:{ns}:{iid}"

    def setup(self) -> None:
        """Nothing to create: a claim is a hash, an interrupt's claims a sorted set."""

    def _index(self, thread: str, ns: str) -> str:
        return f"{self.prefix}:claims:{thread}:{ns}"

    def run(self, proc: Procedure) -> Any:
        made: list[tuple[str, str, str, str]] = []  # (thread, ns, iid, claimant) inserted by this procedure

        def execute(op: str, params: Any) -> Any:
            if op == "INSERT":
                thread, ns, iid, cp, claimant, vtype, blob, at = params
                ok = self.set_if_absent(keys=[self._key(thread, ns, iid), self._index(thread, ns)],
                                        args=[cp, claimant, vtype, blob, repr(at), iid])
                if ok:
                    made.append((thread, ns, iid, claimant))
                    return (iid,)
                return None
            if op == "HOLDER":
                got = self.r.hmget(self._key(*params), "claimant", "checkpoint_id")
                return None if got[0] is None else tuple(v.decode() for v in got)
            if op == "VALUE":
                got = self.r.hmget(self._key(*params), "value_type", "value")
                return None if got[0] is None else (got[0].decode(), bytes(got[1]))
            if op == "LATEST":
                last = self.r.zrevrange(self._index(*params), 0, 0)
                if not last:
                    return None
                iid = last[0].decode()
                got = self.r.hmget(self._key(params[0], params[1], iid), "claimant", "checkpoint_id")
                return None if got[0] is None else (got[0].decode(), got[1].decode(), iid)
            if op == "CLAIMS":  # every claim of the thread and namespace: its sorted set, each member's hash
                thread, ns = params
                found = []
                for member, at in self.r.zrange(self._index(thread, ns), 0, -1, withscores=True):
                    iid = member.decode()
                    got = self.r.hmget(self._key(thread, ns, iid), "claimant", "checkpoint_id")
                    if got[0] is not None:
                        found.append([got[0].decode(), got[1].decode(), iid, float(at)])
                return (found,)
            if op == "ROLLBACK":
                for thread, ns, iid, claimant in made:
                    self.undo_if_mine(keys=[self._key(thread, ns, iid), self._index(thread, ns)], args=[claimant, iid])
                made.clear()
            return None  # BEGIN, COMMIT

        with self.lock:
            return drive(proc, execute, "ROLLBACK")


class _Delegate(BaseCheckpointSaver[Any]):
    """Every saver method not decided by the guard goes to the wrapped saver unchanged."""

    saver: BaseCheckpointSaver[Any]

    def get_tuple(self, config: Any) -> Any:
        return self.saver.get_tuple(config)

    async def aget_tuple(self, config: Any) -> Any:
        return await self.saver.aget_tuple(config)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return self.saver.put(config, checkpoint, metadata, new_versions)

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return await self.saver.aput(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.saver.put_writes(config, writes, task_id, task_path)

    async def aput_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        await self.saver.aput_writes(config, writes, task_id, task_path)

    @property
    def config_specs(self) -> list[Any]:
        return list(self.saver.config_specs)

    def setup(self) -> Any:
        """The claim store's table, then the wrapped saver's own ``setup`` if it has one (a coroutine for an async
        saver)."""
        make = getattr(getattr(self, "claims", None), "setup", None)
        if callable(make):
            make()
        own = getattr(self.saver, "setup", None)
        return own() if callable(own) else None


def _forward(name: str) -> Callable[..., Any]:
    def call(self: _Delegate, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.saver, name)(*args, **kwargs)

    call.__name__ = name
    return call


for _name in ("list", "alist", "delete_thread", "adelete_thread", "delete_for_runs", "adelete_for_runs",
              "copy_thread", "acopy_thread", "prune", "aprune", "get_next_version", "get_delta_channel_history",
              "aget_delta_channel_history"):
    if hasattr(BaseCheckpointSaver, _name):  # the methods this langgraph-checkpoint release has
        setattr(_Delegate, _name, _forward(_name))


class GuardedSaver(SyncGuard, AsyncGuard, _Delegate):
    """Any ``BaseCheckpointSaver``, its resumes claimed once in ``claims`` (module docstring)."""

    stores_resume_write = False  # the claim store is not the saver's: LangGraph writes its resume write itself

    def __init__(self, saver: BaseCheckpointSaver[Any], claims: ClaimStore, *, schema: Any = None,
                 resume_schema: Any = None, claimant: str | None = None):
        BaseCheckpointSaver.__init__(self, serde=saver.serde)
        self.saver = saver
        self.claims = claims
        self.dialect = claims.dialect
        self._guard_init(schema, claimant, resume_schema)

    def _run(self, proc: Procedure) -> Any:
        return self.claims.run(proc)

    async def _arun(self, proc: Procedure) -> Any:
        return self.claims.run(proc)  # a claim is one short transaction: run in place, not in a thread


def guard(saver: BaseCheckpointSaver[Any], claims: ClaimStore, *, schema: Any = None, resume_schema: Any = None,
          claimant: str | None = None) -> GuardedSaver:
    """``saver`` with consume-once resumes, its claims in ``claims`` (:class:`SqliteClaims`, :class:`PostgresClaims`,
    :class:`RedisClaims`); ``schema`` and ``resume_schema`` as for the guarded subclasses."""
    return GuardedSaver(saver, claims, schema=schema, resume_schema=resume_schema, claimant=claimant)
