"""The race experiment's databases: a refund target and a policy in two tables, SQLite or PostgreSQL.

Serves the ATR paper's races result (§5, "Races and failure modes"): the
commit binds the checked state with a version token, in one transaction,
and the database — not Python — decides whether it lands.

Schema (both backends; on PostgreSQL inside a schema of its own, named by
:func:`schema_name` ``driftlab_races_<host>_<pid>_<random>``, created by
:meth:`RaceStore.create` and dropped by :meth:`RaceStore.drop`)::

    driftlab_races_target(id, amount, refunds, version)
    driftlab_races_policy(id, refund_limit, refunds_enabled, version)

Every identifier in a PostgreSQL statement is composed with
``psycopg.sql.Identifier`` (quoted by the driver), never pasted into the
text; on SQLite the two constant table names are double-quoted.

:meth:`RaceStore.commit` under each binding (``faults/revalidation/races.py``):

- ``target_cas``: ``UPDATE target SET refunds = refunds + 1, version =
  version + 1 WHERE id = ? AND version = <token>``; rowcount 1 commits,
  rowcount 0 rolls back (a refusal by the compare-and-set).
- ``policy_token``: in the same transaction, first the policy row's version
  is read and compared with the agent's policy token; a mismatch rolls back.
  On PostgreSQL (READ COMMITTED) the read is ``SELECT ... FOR SHARE``: it
  waits for an uncommitted policy update and then returns the committed
  version, and it holds the row until the commit, so no policy change can
  land between the check and the effect.  On SQLite the write transaction
  starts with ``BEGIN IMMEDIATE``: it takes the database's single write lock
  before the check, with the same effect.
- ``unchecked``: the target update without ``AND version = ?`` (the broken
  control).

**A commit inside an open transaction** (the race pair: each worker opened a
deferred ``BEGIN`` and read its token inside it, then both attempt the
guarded update at one instant).  PostgreSQL: the second ``UPDATE`` waits on
the row lock; when the first commits it re-reads the row, finds version 1,
matches no row, and the compare-and-set refuses it.  SQLite takes its single
writer lock at the first write, and a transaction that has already read
cannot wait for it: its ``UPDATE`` fails at once with ``SQLITE_BUSY`` (the
other holds the lock) or ``SQLITE_BUSY_SNAPSHOT`` (the other has committed
since its read).  That is SQLite refusing a stale snapshot, not the token.
So on those two codes the commit rolls back and retries the guarded update
once, in a write transaction (``BEGIN IMMEDIATE``, which waits up to the
busy timeout for the other's commit) and **with the token it read** — never
a fresh one.  The retry's compare-and-set then decides (rowcount 0:
``rejected``); :attr:`CommitResult.retried` names the code that caused it.
A lock held past the busy timeout is an error, never a rejection.

Every connection belongs to one actor; an actor's transactions are explicit
(``BEGIN`` … ``COMMIT``), everything else runs in autocommit.  SQLite runs
in WAL mode with ``synchronous = NORMAL`` (a temporary file: durability
across power loss is not what is measured).

**Orphaned schemas** (a run killed before it dropped its schema):
:func:`drop_orphans` drops a schema only if its name parses as
``driftlab_races_<host>_<pid>_<random>``, ``<host>`` is this machine's
identity (:func:`runners.backends.host_id`) and no local process has that pid.  A schema of
another host sharing the server, of a live run, or of any other name is
left alone.
"""
from __future__ import annotations

import functools
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from runners import backends
from runners.backends import postgres_dsn

TARGET, POLICY = "driftlab_races_target", "driftlab_races_policy"
TIMEOUT_S = 10  # busy timeout (SQLite) / lock timeout (PostgreSQL): a hang becomes an error
POLICY_FIELDS = ("refund_limit", "refunds_enabled")
SCHEMA_PREFIX = "driftlab_races_"
SCHEMA_RE = backends.schema_pattern(SCHEMA_PREFIX)
#: SQLite's answers to a write by a transaction that cannot take the writer lock (see the module doc)
SQLITE_RETRY = ("SQLITE_BUSY", "SQLITE_BUSY_SNAPSHOT")


def schema_name(pid: int | None = None) -> str:
    """A new race schema name: ``driftlab_races_<host>_<pid>_<random>``."""
    return backends.schema_name(SCHEMA_PREFIX, pid)


def orphaned(name: str) -> bool:
    """True if ``name`` is a race schema of this host whose process is gone (safe to drop)."""
    return backends.orphaned(SCHEMA_PREFIX, name)


def drop_orphans(conn: Any) -> list[str]:
    """Drop this host's race schemas whose run is dead (see :func:`orphaned`); the names dropped."""
    return backends.drop_orphans(conn, SCHEMA_PREFIX)


@dataclass(frozen=True)
class CommitResult:
    """What a commit attempt came to: committed (the effect landed) or refused, and why."""

    committed: bool
    refused_by: str = ""  # "" | "target_cas" (rowcount 0) | "policy_token" (version mismatch)
    retried: str = ""  # the SQLite code that made the guarded update retry in a write transaction ("" if none)


# Statements with {target}/{policy} for the table names and ? placeholders; composed per backend.
CREATE_TARGET = ("CREATE TABLE {target} (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL, "
                 "refunds INTEGER NOT NULL, version INTEGER NOT NULL)")
CREATE_POLICY = ("CREATE TABLE {policy} (id INTEGER PRIMARY KEY, refund_limit INTEGER NOT NULL, "
                 "refunds_enabled INTEGER NOT NULL, version INTEGER NOT NULL)")
INSERT_TARGET = "INSERT INTO {target} VALUES (?, ?, 0, 0)"
INSERT_POLICY = "INSERT INTO {policy} VALUES (?, ?, ?, 0)"
SELECT_TARGET = "SELECT amount, refunds, version FROM {target} WHERE id = ?"
SELECT_POLICY = "SELECT refund_limit, refunds_enabled, version FROM {policy} WHERE id = ?"
POLICY_VERSION = "SELECT version FROM {policy} WHERE id = ?"
UPDATE_CAS = "UPDATE {target} SET refunds = refunds + 1, version = version + 1 WHERE id = ? AND version = ?"
UPDATE_UNCHECKED = "UPDATE {target} SET refunds = refunds + 1, version = version + 1 WHERE id = ?"
UPDATE_POLICY = "UPDATE {policy} SET {assignments}, version = version + 1 WHERE id = ?"


class RaceStore:
    """The SQL both backends share (templates composed by :meth:`q`)."""

    backend: str
    begin_write = "BEGIN"  # how a write transaction starts
    policy_lock = ""  # suffix of the policy token check's SELECT

    def q(self, template: str, **columns: str) -> Any:
        """The statement for this backend; ``columns`` fill ``{name}`` slots with column identifiers."""
        raise NotImplementedError

    def connect(self) -> Any:
        raise NotImplementedError

    def create(self) -> None:
        conn = self.connect()
        try:
            for table in (CREATE_TARGET, CREATE_POLICY):
                conn.execute(self.q(table))
        finally:
            conn.close()

    def new_case(self, conn: Any, case: int, amount: int, refund_limit: int, refunds_enabled: int) -> None:
        """Fresh rows (version 0) for one execution, in one transaction."""
        conn.execute(self.begin_write)
        conn.execute(self.q(INSERT_TARGET), (case, amount))
        conn.execute(self.q(INSERT_POLICY), (case, refund_limit, refunds_enabled))
        conn.execute("COMMIT")

    def read_target(self, conn: Any, case: int) -> dict:
        amount, refunds, version = conn.execute(self.q(SELECT_TARGET), (case,)).fetchone()
        return {"amount": amount, "refunds": refunds, "version": version}

    def read_policy(self, conn: Any, case: int) -> dict:
        limit, enabled, version = conn.execute(self.q(SELECT_POLICY), (case,)).fetchone()
        return {"refund_limit": limit, "refunds_enabled": enabled, "version": version}

    def begin(self, conn: Any) -> None:
        """A deferred transaction: on SQLite the writer lock is taken at its first write, not here."""
        conn.execute("BEGIN")

    def end(self, conn: Any) -> None:
        conn.execute("COMMIT")

    def set_policy(self, conn: Any, case: int, changes: Mapping[str, int]) -> int:
        """The policy admin's update (bumps the policy version); returns the rowcount."""
        unknown = set(changes) - set(POLICY_FIELDS)
        if unknown or not changes:
            raise ValueError(f"set_policy: unknown policy fields {sorted(unknown)}")
        names = {f"c{i}": name for i, name in enumerate(changes)}  # checked against POLICY_FIELDS, and quoted
        assignments = ", ".join(f"{{{slot}}} = ?" for slot in names)
        return conn.execute(self.q(UPDATE_POLICY.replace("{assignments}", assignments), **names),
                            (*changes.values(), case)).rowcount

    def _guarded(self, conn: Any, binding: str, case: int, target_token: int, policy_token: int | None) -> str:
        """The guarded update inside the open transaction: "" if it wrote the effect, else who refused."""
        if binding == "policy_token":
            (version,) = conn.execute(self.q(POLICY_VERSION + self.policy_lock), (case,)).fetchone()
            if version != policy_token:
                return "policy_token"
        if binding == "unchecked":
            rows = conn.execute(self.q(UPDATE_UNCHECKED), (case,)).rowcount
        elif binding in ("target_cas", "policy_token"):
            rows = conn.execute(self.q(UPDATE_CAS), (case, target_token)).rowcount
        else:
            raise ValueError(f"unknown binding {binding!r}")
        return "" if rows == 1 else "target_cas"

    def retry_code(self, exc: BaseException) -> str:
        """The code of an error after which the guarded update is retried in a write transaction ("" if none)."""
        return ""

    def commit(self, conn: Any, binding: str, case: int, target_token: int, policy_token: int | None,
               in_transaction: bool = False) -> CommitResult:
        """The effect under ``binding``, as one transaction (or in the one already open); COMMIT or ROLLBACK.

        ``in_transaction``: the actor opened a deferred transaction and read
        its tokens in it (the race pair).  See the module doc for SQLite's
        retry, which keeps the tokens.
        """
        if not in_transaction:
            conn.execute(self.begin_write)
        retried = ""
        try:
            try:
                refused = self._guarded(conn, binding, case, target_token, policy_token)
            except Exception as exc:  # noqa: BLE001 - only SQLite's busy codes inside an open transaction retry
                retried = self.retry_code(exc) if in_transaction else ""
                if not retried:
                    raise
                conn.execute("ROLLBACK")
                conn.execute(self.begin_write)  # waits (busy timeout) for the other writer's commit
                refused = self._guarded(conn, binding, case, target_token, policy_token)
            conn.execute("ROLLBACK" if refused else "COMMIT")
            return CommitResult(not refused, refused, retried)
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
        self._dir = None if path else backends.sqlite_folder(scratch, "driftlab_races_")
        self.path = Path(path) if path else Path(self._dir.name) / "races.sqlite"
        self.location = str(self.path)

    @functools.cache  # noqa: B019 - a handful of templates per store
    def q(self, template: str, **columns: str) -> str:
        names = {"target": TARGET, "policy": POLICY, **columns}
        return template.format(**{k: '"' + v.replace('"', '""') + '"' for k, v in names.items()})

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=TIMEOUT_S, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def retry_code(self, exc: BaseException) -> str:
        code = getattr(exc, "sqlite_errorname", "")
        return code if code in SQLITE_RETRY else ""

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
        self.schema = schema or schema_name()
        if not SCHEMA_RE.match(self.schema):
            raise ValueError(f"bad schema name {self.schema!r} (expected driftlab_races_<host>_<pid>_<random>)")
        self.location = self.schema

    @functools.cache  # noqa: B019 - a handful of templates per store
    def q(self, template: str, **columns: str) -> Any:
        from psycopg import sql

        names = {"target": TARGET, "policy": POLICY, **columns}
        return sql.SQL(template.replace("?", "%s")).format(**{k: sql.Identifier(v) for k, v in names.items()})

    def connect(self):
        import psycopg

        # the schema name matched SCHEMA_RE ([0-9a-z_] only), so it needs no escaping in the options string
        return psycopg.connect(self.dsn, autocommit=True,
                               options=f"-c search_path={self.schema} -c lock_timeout={TIMEOUT_S * 1000}")

    def create(self) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            drop_orphans(conn)
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
        super().create()

    def drop(self) -> None:
        backends.drop_schema(self.dsn, self.schema)


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
