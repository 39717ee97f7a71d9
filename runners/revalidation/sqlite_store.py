"""A SQLite target store: the :class:`vocabulary.revalidation.Store` protocol over real transactions.

The durable cells of the ATR paper (§4 "Durable evaluation", §5 "Durable
workflow cells") persist business state in SQLite, and separate processes
read it, change it and commit to it.  This store is that business database:
the same API as :class:`runners.revalidation.stores.MemoryStore` (``read``, ``value``,
``version``, ``seq``, ``changes_since``, ``commit``, ``write``), so every
mechanism runs on it unchanged.

Schema (one file; values are JSON text)::

    fields(ref PRIMARY KEY, value, version)   -- "order.amount", its value and version
    objects(name PRIMARY KEY, version)        -- "order", bumped with every field of it
    log(seq INTEGER PRIMARY KEY, ref)         -- the change log; seq is its position

``commit(tokens, effect)`` is one ``BEGIN IMMEDIATE`` transaction: it takes
the database's write lock, compares every token with the current version,
and either applies the effect (new values, bumped versions, log entries) and
commits, or rolls back and returns False having changed nothing.  Because the
write lock is taken before the comparison, no other connection, in this
process or another, can write between check and apply.

Trade-offs: WAL journal (readers never block the writer) and
``synchronous=NORMAL``, which survives the death of any process (what the
durable cells model) but not a power cut.  A connection must not cross
``fork()``: open the store in the process that uses it.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Mapping

from vocabulary.revalidation import Ref

BUSY_TIMEOUT_MS = 10_000

SCHEMA = """
CREATE TABLE fields (ref TEXT PRIMARY KEY, value TEXT NOT NULL, version INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE objects (name TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE log (seq INTEGER PRIMARY KEY, ref TEXT NOT NULL);
"""


def connect(path: str | Path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, with a busy timeout."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


class SqliteStore:
    __slots__ = ("path", "conn")

    def __init__(self, path: str | Path):
        """Open an existing store (see :meth:`create`)."""
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"{self.path}: no SQLite store (create it with SqliteStore.create)")
        self.conn = connect(self.path)

    @classmethod
    def create(cls, path: str | Path, state: Mapping[Ref, Any]) -> "SqliteStore":
        """A new store file holding ``state`` (e.g. ``workload.initial_state()``), every version 0."""
        if Path(path).exists():
            raise FileExistsError(f"{path}: already exists")
        store = cls.__new__(cls)
        store.path, store.conn = Path(path), connect(path)
        try:
            store.conn.executescript("BEGIN IMMEDIATE;" + SCHEMA)
            store.conn.executemany("INSERT INTO fields VALUES (?, ?, 0)",
                                   [(ref, json.dumps(value)) for ref, value in state.items()])
            store.conn.executemany("INSERT INTO objects VALUES (?, 0)",
                                   [(obj,) for obj in dict.fromkeys(ref.partition(".")[0] for ref in state)])
            store.conn.execute("COMMIT")
        except BaseException:
            store.close()
            raise
        return store

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "SqliteStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ reads
    def read(self, ref: Ref) -> tuple[Any, int]:
        row = self.conn.execute("SELECT value, version FROM fields WHERE ref = ?", (ref,)).fetchone()
        if row is None:
            raise KeyError(ref)
        return json.loads(row[0]), row[1]

    def value(self, ref: Ref) -> Any:
        return self.read(ref)[0]

    def version(self, key: str) -> int:
        """Version of a field (``"order.amount"``) or of an object (``"order"``)."""
        if "." in key:
            return self.read(key)[1]
        row = self.conn.execute("SELECT version FROM objects WHERE name = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(key)
        return row[0]

    @property
    def seq(self) -> int:
        return self.conn.execute("SELECT coalesce(max(seq), 0) FROM log").fetchone()[0]

    def changes_since(self, seq: int) -> tuple[list[Ref], int]:
        rows = self.conn.execute("SELECT seq, ref FROM log WHERE seq > ? ORDER BY seq", (seq,)).fetchall()
        return [ref for _, ref in rows], (rows[-1][0] if rows else seq)

    # ------------------------------------------------------------ writes
    def write(self, changes: Mapping[Ref, Any]) -> None:
        """A second actor's write: new values, bumped versions, logged, in one transaction."""
        if not self.commit((), changes):  # no tokens: cannot be refused
            raise AssertionError("a write without tokens was refused")

    def commit(self, tokens: Iterable[tuple[str, int]], effect: Mapping[Ref, Any]) -> bool:
        """Apply ``effect`` only if every ``(key, version)`` token is still current; one transaction."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for key, version in tokens:
                if self.version(key) != version:
                    conn.execute("ROLLBACK")
                    return False
            for ref, value in effect.items():
                if conn.execute("UPDATE fields SET value = ?, version = version + 1 WHERE ref = ?",
                                (json.dumps(value), ref)).rowcount != 1:
                    raise KeyError(ref)
                conn.execute("UPDATE objects SET version = version + 1 WHERE name = ?", (ref.partition(".")[0],))
                conn.execute("INSERT INTO log (ref) VALUES (?)", (ref,))
            conn.execute("COMMIT")
            return True
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
