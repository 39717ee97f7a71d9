"""The race experiment's databases: a refund target and a policy in two tables, SQLite or PostgreSQL.

Serves the ATR paper's races result (§5, "Races and failure modes"): the
commit binds the checked state with a version token, in one transaction,
and the database — not Python — decides whether it lands.

Schema (both backends; on PostgreSQL inside a schema of its own,
``driftlab_races_<pid>_<random>``, created by :meth:`RaceStore.create` and
dropped by :meth:`RaceStore.drop`)::

    driftlab_races_target(id, amount, refunds, version)
    driftlab_races_policy(id, refund_limit, refunds_enabled, version)

:meth:`RaceStore.commit` under each binding (``faults/races.py``):

- ``target_cas``: ``UPDATE target SET refunds = refunds + 1, version =
  version + 1 WHERE id = ? AND version = <token>``; rowcount 1 commits,
  rowcount 0 rolls back.
- ``policy_token``: in the same transaction, first the policy row's version
  is read and compared with the agent's policy token; a mismatch rolls back.
  On PostgreSQL (READ COMMITTED) the read is ``SELECT ... FOR SHARE``: it
  waits for an uncommitted policy update and then returns the committed
  version, and it holds the row until the commit, so no policy change can
  land between the check and the effect.  On SQLite the transaction starts
  with ``BEGIN IMMEDIATE``: it takes the database's single write lock
  before the check, with the same effect.
- ``unchecked``: the target update without ``AND version = ?`` (the broken
  control).

Every connection belongs to one actor; an actor's transactions are explicit
(``BEGIN`` … ``COMMIT``), everything else runs in autocommit.  SQLite runs
in WAL mode with ``synchronous = NORMAL`` (a temporary file: durability
across power loss is not what is measured).
"""
from __future__ import annotations

import os
import secrets
import sqlite3
import tempfile
from pathlib import Path
from typing import Any, Mapping

import psutil

TARGET, POLICY = "driftlab_races_target", "driftlab_races_policy"
TIMEOUT_S = 10  # busy timeout (SQLite) / lock timeout (PostgreSQL): a hang becomes an error
DEFAULT_DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres connect_timeout=3"
POLICY_FIELDS = ("refund_limit", "refunds_enabled")


def postgres_dsn() -> str:
    return os.environ.get("DRIFTLAB_POSTGRES_DSN", DEFAULT_DSN)


class RaceStore:
    """The SQL both backends share (written with ``?`` placeholders)."""

    backend: str
    begin_write = "BEGIN"  # how a write transaction starts
    policy_lock = ""  # suffix of the policy token check's SELECT

    def sql(self, text: str) -> str:
        return text

    def connect(self) -> Any:
        raise NotImplementedError

    def create(self) -> None:
        conn = self.connect()
        try:
            for table in (f"CREATE TABLE {TARGET} (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL, "
                          "refunds INTEGER NOT NULL, version INTEGER NOT NULL)",
                          f"CREATE TABLE {POLICY} (id INTEGER PRIMARY KEY, refund_limit INTEGER NOT NULL, "
                          "refunds_enabled INTEGER NOT NULL, version INTEGER NOT NULL)"):
                conn.execute(table)
        finally:
            conn.close()

    def new_case(self, conn: Any, case: int, amount: int, refund_limit: int, refunds_enabled: int) -> None:
        """Fresh rows (version 0) for one execution, in one transaction."""
        conn.execute(self.begin_write)
        conn.execute(self.sql(f"INSERT INTO {TARGET} VALUES (?, ?, 0, 0)"), (case, amount))
        conn.execute(self.sql(f"INSERT INTO {POLICY} VALUES (?, ?, ?, 0)"), (case, refund_limit, refunds_enabled))
        conn.execute("COMMIT")

    def read_target(self, conn: Any, case: int) -> dict:
        amount, refunds, version = conn.execute(
            self.sql(f"SELECT amount, refunds, version FROM {TARGET} WHERE id = ?"), (case,)).fetchone()
        return {"amount": amount, "refunds": refunds, "version": version}

    def read_policy(self, conn: Any, case: int) -> dict:
        limit, enabled, version = conn.execute(
            self.sql(f"SELECT refund_limit, refunds_enabled, version FROM {POLICY} WHERE id = ?"), (case,)).fetchone()
        return {"refund_limit": limit, "refunds_enabled": enabled, "version": version}

    def begin(self, conn: Any) -> None:
        conn.execute(self.begin_write)

    def end(self, conn: Any) -> None:
        conn.execute("COMMIT")

    def set_policy(self, conn: Any, case: int, changes: Mapping[str, int]) -> int:
        """The policy admin's update (bumps the policy version); returns the rowcount."""
        unknown = set(changes) - set(POLICY_FIELDS)
        if unknown or not changes:
            raise ValueError(f"set_policy: unknown policy fields {sorted(unknown)}")
        assignments = ", ".join(f"{name} = ?" for name in changes)  # names checked against POLICY_FIELDS
        return conn.execute(self.sql(f"UPDATE {POLICY} SET {assignments}, version = version + 1 WHERE id = ?"),
                            (*changes.values(), case)).rowcount

    def commit(self, conn: Any, binding: str, case: int, target_token: int, policy_token: int | None) -> bool:
        """The effect under ``binding``, as one transaction; True if it committed."""
        conn.execute(self.begin_write)
        try:
            if binding == "policy_token":
                (version,) = conn.execute(
                    self.sql(f"SELECT version FROM {POLICY} WHERE id = ?{self.policy_lock}"), (case,)).fetchone()
                if version != policy_token:
                    conn.execute("ROLLBACK")
                    return False
            if binding == "unchecked":
                rows = conn.execute(self.sql(
                    f"UPDATE {TARGET} SET refunds = refunds + 1, version = version + 1 WHERE id = ?"), (case,)).rowcount
            elif binding in ("target_cas", "policy_token"):
                rows = conn.execute(self.sql(
                    f"UPDATE {TARGET} SET refunds = refunds + 1, version = version + 1 WHERE id = ? AND version = ?"),
                    (case, target_token)).rowcount
            else:
                raise ValueError(f"unknown binding {binding!r}")
            conn.execute("COMMIT" if rows == 1 else "ROLLBACK")
            return rows == 1
        except BaseException:
            _rollback(conn)
            raise

    def drop(self) -> None:
        raise NotImplementedError


def _rollback(conn: Any) -> None:
    try:
        conn.execute("ROLLBACK")
    except Exception:  # noqa: BLE001 - no transaction open (the failure was BEGIN itself)
        pass


class SqliteRaceStore(RaceStore):
    """One database file in a temporary folder; every actor opens its own connection to it."""

    backend = "sqlite"
    begin_write = "BEGIN IMMEDIATE"

    def __init__(self, path: str | None = None, scratch: Path | None = None) -> None:
        """A new database in a temporary folder (under ``scratch``), or (``path``) the one another process created."""
        self._dir = None if path else tempfile.TemporaryDirectory(prefix="driftlab_races_", dir=scratch)
        self.path = Path(path) if path else Path(self._dir.name) / "races.sqlite"
        self.location = str(self.path)

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=TIMEOUT_S, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def drop(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()


class PostgresRaceStore(RaceStore):
    """A schema of its own on the server at ``dsn``, created and dropped by the experiment."""

    backend = "postgres"
    policy_lock = " FOR SHARE"

    def __init__(self, dsn: str | None = None, schema: str | None = None) -> None:
        """A new schema, or (``schema``) the one another process created."""
        self.dsn = dsn or postgres_dsn()
        self.schema = schema or f"driftlab_races_{os.getpid()}_{secrets.token_hex(4)}"
        if not self.schema.replace("_", "").isalnum():
            raise ValueError(f"bad schema name {self.schema!r}")
        self.location = self.schema

    def sql(self, text: str) -> str:
        return text.replace("?", "%s")

    def connect(self):
        import psycopg

        return psycopg.connect(self.dsn, autocommit=True,
                               options=f"-c search_path={self.schema} -c lock_timeout={TIMEOUT_S * 1000}")

    def create(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for (orphan,) in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'driftlab\\_races\\_%'"):
                pid = orphan.split("_")[2]
                if pid.isdigit() and not psutil.pid_exists(int(pid)):  # left by a killed run
                    conn.execute(f"DROP SCHEMA IF EXISTS {orphan} CASCADE")
            conn.execute(f"CREATE SCHEMA {self.schema}")
        super().create()

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")


def attach(backend: str, location: str, dsn: str | None = None) -> RaceStore:
    """The store another process created (``location``: its SQLite file or its PostgreSQL schema)."""
    return SqliteRaceStore(location) if backend == "sqlite" else PostgresRaceStore(dsn, location)


def open_store(backend: str, dsn: str | None = None, scratch: Path | None = None) -> RaceStore:
    """A new, empty store (tables created) for one cell; call ``drop()`` when done."""
    if backend == "sqlite":
        store: RaceStore = SqliteRaceStore(scratch=scratch)
    elif backend == "postgres":
        store = PostgresRaceStore(dsn)
    else:
        raise ValueError(f"unknown backend {backend!r} (sqlite or postgres)")
    try:
        store.create()
    except BaseException:
        store.drop()
        raise
    return store
