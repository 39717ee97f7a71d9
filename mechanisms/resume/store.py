"""SQL stores of the resume family: a thin connection wrapper, the effect ledger, the lab runtimes' checkpoint tables.

Serves "Resume Means Resume" (arXiv 2608.03836): effects must outlive the
process that fired them, so they are rows in a store of their own, never in
the runtime's memory or its checkpoint store.  Both backends are real
databases: SQLite (a file, WAL mode, every write transaction ``BEGIN
IMMEDIATE`` so two processes serialise on its single writer lock) and
PostgreSQL (psycopg 3, autocommit outside explicit transactions, tables in a
schema of their own).

:class:`Sql` hides only the two differences the family needs: the parameter
style (``?`` is rewritten to ``%s``) and how a write transaction starts.  A
process that is SIGKILLed inside a transaction leaves nothing of it behind:
SQLite rolls back an uncommitted WAL frame set (its lock dies with the
process), PostgreSQL aborts the transaction of the broken connection.

**The effect ledger** (:class:`EffectLedger`, its own SQLite file
``<namespace>ledger.sqlite`` or the PostgreSQL schema ``<namespace>_ledger``):

- ``effects(seq, run_id, task, key, payload, idem, pid, op, at)`` — one row
  per firing.  ``idem`` is NULL for a plain (at-least-once) firing and the
  idempotency key ``run/task/key`` for an idempotent one; a UNIQUE index on
  it makes the second firing of the same key a no-op (NULLs never collide);
- ``trace(seq, run_id, step, node, kind, value, pid, op, at)`` — a node began
  running (``node``), the interrupt consumed a value (``consume``), or a node
  was replayed from memoized results (``memo``);
- ``counters(name, n)`` — an atomic counter (a faulted runtime's coin).

Tables are created by :meth:`setup` (once, before processes start: concurrent
``CREATE TABLE IF NOT EXISTS`` on PostgreSQL can collide).
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from psycopg import sql as pgsql

from vocabulary.resume import Backend, Checkpoint, Effect, TraceRow

BUSY_TIMEOUT_S = 30
#: written in SQLite's dialect in the DDL; :meth:`Sql.q` turns it into PostgreSQL's
SERIAL_KEY = "INTEGER PRIMARY KEY AUTOINCREMENT"


class Sql:
    """One connection to SQLite (a file path) or PostgreSQL (a DSN, tables in ``schema``)."""

    def __init__(self, kind: str, target: str, schema: str | None = None):
        self.kind = kind
        self.schema = schema
        if kind == "sqlite":
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(target, isolation_level=None, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
            self.conn.execute("PRAGMA busy_timeout = 30000")  # BUSY_TIMEOUT_S, in ms
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = OFF")  # a SIGKILL loses nothing the OS holds; power loss is not measured
        else:
            self.conn = _pg_connection(target)
            self.restore()
        self._in_tx = False

    def restore(self) -> None:
        """PostgreSQL: both stores' schemas on the search path (their table names differ; one connection serves both)."""
        if self.kind == "postgres" and self.schema:
            base = self.schema.removesuffix("_ledger")
            self.conn.execute(pgsql.SQL("SET search_path TO {}, {}").format(pgsql.Identifier(base),
                                                                              pgsql.Identifier(base + "_ledger")))

    def q(self, sql: str) -> str:
        """The statement in this connection's dialect: SQLite's text as written; PostgreSQL's placeholders and keys."""
        if self.kind == "sqlite":
            return sql
        return sql.replace("?", "%s").replace(SERIAL_KEY, "BIGSERIAL PRIMARY KEY")

    def execute(self, sql: str, params: tuple | list = ()):
        return self.conn.execute(self.q(sql), tuple(params))

    def all(self, sql: str, params: tuple | list = ()) -> list[tuple]:
        return list(self.execute(sql, params).fetchall())

    def one(self, sql: str, params: tuple | list = ()) -> tuple | None:
        return self.execute(sql, params).fetchone()

    @contextmanager
    def transaction(self) -> Iterator["Sql"]:
        """A write transaction: committed on exit, rolled back on an exception."""
        self.execute("BEGIN IMMEDIATE" if self.kind == "sqlite" else "BEGIN")
        self._in_tx = True
        try:
            yield self
        except BaseException:
            self._in_tx = False
            self.execute("ROLLBACK")
            raise
        self._in_tx = False
        self.execute("COMMIT")

    def create_schema(self) -> None:
        """PostgreSQL: create this store's schema and put it alone on the search path (call :meth:`restore` after)."""
        if self.kind == "postgres" and self.schema:
            self.conn.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pgsql.Identifier(self.schema)))
            self.conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(self.schema)))

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - closing a connection whose server went away
            pass


_PG: dict[tuple[int, str], Any] = {}
CONNECT_RETRY_S = 60


def _pg_connection(dsn: str):
    """One PostgreSQL connection per process and DSN, shared by the checkpoint store and the ledger.

    k racers on two parallel cells would otherwise hold 4k connections; a
    server that is full ("too many clients") is retried for up to a minute."""
    import psycopg

    key = (os.getpid(), dsn)
    conn = _PG.get(key)
    if conn is not None and not conn.closed:
        return conn
    deadline = time.monotonic() + CONNECT_RETRY_S
    while True:
        try:
            conn = psycopg.connect(dsn, autocommit=True)
            break
        except psycopg.OperationalError as exc:
            if "too many clients" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    _PG[key] = conn
    return conn


def _check_namespace(namespace: str) -> str:
    if not namespace.replace("_", "").isalnum() or not namespace[:1].isalpha():
        raise ValueError(f"backend namespace {namespace!r}: letters, digits and _ only, starting with a letter")
    return namespace.lower()


def checkpoint_sql(backend: Backend) -> Sql:
    """A connection to the runtime's own store (checkpoints, resume writes, claims)."""
    ns = _check_namespace(backend.namespace)
    if backend.kind == "sqlite":
        return Sql("sqlite", str(Path(backend.location) / f"{ns}checkpoints.sqlite"))
    return Sql("postgres", backend.location, ns)


def ledger_sql(backend: Backend) -> Sql:
    """A connection to the effect ledger: a separate SQLite file, or a separate PostgreSQL schema."""
    ns = _check_namespace(backend.namespace)
    if backend.kind == "sqlite":
        return Sql("sqlite", str(Path(backend.ledger_location or backend.location) / f"{ns}ledger.sqlite"))
    return Sql("postgres", backend.location, ns + "_ledger")


#: the suffix of the schema a third-party guard keeps its own tables in (``resume_guards``), dropped with the cell
GUARD_SCHEMA = "_guard"


def drop_backend(backend: Backend) -> None:
    """Remove both stores of a backend (files, or the two PostgreSQL schemas)."""
    ns = _check_namespace(backend.namespace)
    if backend.kind == "sqlite":
        for stem in ("checkpoints", "ledger"):
            for suffix in ("", "-wal", "-shm"):
                Path(backend.location, f"{ns}{stem}.sqlite{suffix}").unlink(missing_ok=True)
        return
    sql = Sql("postgres", backend.location)
    try:
        for schema in (ns, ns + "_ledger", ns + GUARD_SCHEMA):
            sql.conn.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema)))
    finally:
        sql.close()


class EffectLedger:
    """The effect ledger and trace (module docstring): what happened in the world, durably."""

    def __init__(self, backend: Backend):
        self.sql = ledger_sql(backend)
        self.pid = os.getpid()

    def setup(self) -> None:
        s = self.sql
        s.create_schema()
        s.execute("CREATE TABLE IF NOT EXISTS effects (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, task TEXT NOT NULL, "
                  "key TEXT NOT NULL, payload TEXT, idem TEXT, pid BIGINT, op TEXT, at DOUBLE PRECISION)")
        s.execute("CREATE UNIQUE INDEX IF NOT EXISTS effects_idem ON effects (idem)")
        s.execute("CREATE TABLE IF NOT EXISTS trace (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, step INTEGER, "
                  "node TEXT, kind TEXT, value TEXT, pid BIGINT, op TEXT, at DOUBLE PRECISION)")
        s.execute("CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, n BIGINT NOT NULL)")
        s.restore()

    def fire(self, run_id: str, task: str, key: str, payload: str, op: str = "", idem: str | None = None) -> bool:
        """Append one firing; with ``idem``, a key already in the ledger fires nothing (returns False)."""
        cur = self.sql.execute(
            "INSERT INTO effects (run_id, task, key, payload, idem, pid, op, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (idem) DO NOTHING", (run_id, task, key, payload, idem, os.getpid(), op, time.time()))
        return cur.rowcount == 1

    def fired(self, idem: str) -> bool:
        return self.sql.one("SELECT 1 FROM effects WHERE idem = ?", (idem,)) is not None

    def trace(self, run_id: str, step: int, node: str, kind: str, value: Any = None, op: str = "") -> None:
        self.sql.execute("INSERT INTO trace (run_id, step, node, kind, value, pid, op, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (run_id, step, node, kind, json.dumps(value), os.getpid(), op, time.time()))

    def bump(self, name: str) -> int:
        """Add one to a counter, atomically across processes; the new value."""
        row = self.sql.one("INSERT INTO counters (name, n) VALUES (?, 1) ON CONFLICT (name) DO UPDATE "
                           "SET n = counters.n + 1 RETURNING n", (name,))
        return int(row[0])

    def effects(self, run_id: str | None = None) -> list[Effect]:
        rows = (self.sql.all("SELECT seq, run_id, task, key, payload, pid, at, op FROM effects WHERE run_id = ? "
                             "ORDER BY seq", (run_id,)) if run_id else
                self.sql.all("SELECT seq, run_id, task, key, payload, pid, at, op FROM effects ORDER BY seq"))
        return [Effect(int(r[0]), r[1], r[2], r[3], r[4], int(r[5]), float(r[6]), r[7] or "") for r in rows]

    def traces(self, run_id: str | None = None) -> list[TraceRow]:
        rows = (self.sql.all("SELECT seq, run_id, step, node, kind, value, pid, at, op FROM trace WHERE run_id = ? "
                             "ORDER BY seq", (run_id,)) if run_id else
                self.sql.all("SELECT seq, run_id, step, node, kind, value, pid, at, op FROM trace ORDER BY seq"))
        return [TraceRow(int(r[0]), r[1], int(r[2]), r[3], r[4], json.loads(r[5]) if r[5] else None, int(r[6]),
                         float(r[7]), r[8] or "") for r in rows]

    def close(self) -> None:
        self.sql.close()


class CheckpointTables:
    """The lab runtimes' own store: checkpoints, recorded resume writes, consume-once claims, effect intents."""

    def __init__(self, backend: Backend):
        self.sql = checkpoint_sql(backend)

    def setup(self) -> None:
        s = self.sql
        s.create_schema()
        s.execute("CREATE TABLE IF NOT EXISTS checkpoints (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, "
                  "run_id TEXT NOT NULL, step INTEGER NOT NULL, next TEXT, state TEXT NOT NULL, parent_id TEXT, "
                  "created DOUBLE PRECISION, parked INTEGER NOT NULL DEFAULT 0, origin TEXT)")
        s.execute("CREATE INDEX IF NOT EXISTS checkpoints_run ON checkpoints (run_id, seq)")
        s.execute("CREATE TABLE IF NOT EXISTS writes (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, checkpoint_id TEXT, "
                  "value TEXT, pid BIGINT, at DOUBLE PRECISION)")
        s.execute("CREATE TABLE IF NOT EXISTS claims (run_id TEXT NOT NULL, step INTEGER NOT NULL, value TEXT, "
                  "pid BIGINT, at DOUBLE PRECISION, PRIMARY KEY (run_id, step))")
        s.execute("CREATE TABLE IF NOT EXISTS intents (idem TEXT PRIMARY KEY, run_id TEXT, task TEXT, key TEXT, "
                  "state TEXT, at DOUBLE PRECISION)")
        s.execute("CREATE TABLE IF NOT EXISTS outcomes (origin TEXT PRIMARY KEY, value TEXT)")
        s.restore()

    # ---- checkpoints
    def insert(self, cp: Checkpoint, origin: str | None = None) -> None:
        self.sql.execute("INSERT INTO checkpoints (id, run_id, step, next, state, parent_id, created, parked, origin) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (cp.id, cp.run_id, cp.step, cp.next, json.dumps(dict(cp.values)), cp.parent_id, cp.created,
                          int(cp.parked), origin))

    @staticmethod
    def _row(r: tuple) -> Checkpoint:
        return Checkpoint(r[0], r[1], int(r[2]), r[3], json.loads(r[4]), r[5], float(r[6] or 0), bool(r[7]))

    def head(self, run_id: str) -> Checkpoint | None:
        r = self.sql.one("SELECT id, run_id, step, next, state, parent_id, created, parked FROM checkpoints "
                         "WHERE run_id = ? ORDER BY seq DESC LIMIT 1", (run_id,))
        return self._row(r) if r else None

    def get(self, checkpoint_id: str) -> Checkpoint | None:
        r = self.sql.one("SELECT id, run_id, step, next, state, parent_id, created, parked FROM checkpoints "
                         "WHERE id = ?", (checkpoint_id,))
        return self._row(r) if r else None

    def origin(self, run_id: str) -> str | None:
        """The checkpoint a forked run was copied from (None for a run that was started)."""
        r = self.sql.one("SELECT origin FROM checkpoints WHERE run_id = ? ORDER BY seq LIMIT 1", (run_id,))
        return r[0] if r else None

    def list(self, run_id: str) -> list[Checkpoint]:
        return [self._row(r) for r in self.sql.all(
            "SELECT id, run_id, step, next, state, parent_id, created, parked FROM checkpoints "
            "WHERE run_id = ? ORDER BY seq", (run_id,))]

    def runs(self) -> list[str]:
        return [r[0] for r in self.sql.all("SELECT run_id FROM checkpoints GROUP BY run_id ORDER BY MIN(seq)")]

    # ---- resume writes and claims
    def record_write(self, run_id: str, checkpoint_id: str | None, value: Any) -> None:
        self.sql.execute("INSERT INTO writes (run_id, checkpoint_id, value, pid, at) VALUES (?, ?, ?, ?, ?)",
                         (run_id, checkpoint_id, json.dumps(value), os.getpid(), time.time()))

    def claim(self, run_id: str, step: int, value: Any) -> bool:
        """Claim the interrupt at ``step`` of ``run_id`` for this resumer: True for exactly one claimant."""
        cur = self.sql.execute("INSERT INTO claims (run_id, step, value, pid, at) VALUES (?, ?, ?, ?, ?) "
                               "ON CONFLICT (run_id, step) DO NOTHING",
                               (run_id, step, json.dumps(value), os.getpid(), time.time()))
        return cur.rowcount == 1

    def claimed(self, run_id: str, step: int) -> tuple[bool, Any]:
        r = self.sql.one("SELECT value FROM claims WHERE run_id = ? AND step = ?", (run_id, step))
        return (True, json.loads(r[0])) if r else (False, None)

    def intend(self, idem: str, run_id: str, task: str, key: str) -> None:
        self.sql.execute("INSERT INTO intents (idem, run_id, task, key, state, at) VALUES (?, ?, ?, ?, 'intent', ?) "
                         "ON CONFLICT (idem) DO NOTHING", (idem, run_id, task, key, time.time()))

    def settle(self, idem: str) -> None:
        self.sql.execute("UPDATE intents SET state = 'fired' WHERE idem = ?", (idem,))

    def first_outcome(self, origin: str, value: Any) -> Any:
        """The resume value first recorded at checkpoint ``origin`` (recording ``value`` if none was)."""
        self.sql.execute("INSERT INTO outcomes (origin, value) VALUES (?, ?) ON CONFLICT (origin) DO NOTHING",
                         (origin, json.dumps(value)))
        return json.loads(self.sql.one("SELECT value FROM outcomes WHERE origin = ?", (origin,))[0])

    def close(self) -> None:
        self.sql.close()
