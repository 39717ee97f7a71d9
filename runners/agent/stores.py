"""The agent's stores: LangGraph's checkpoints, and a separate ledger database (SQLite file or PostgreSQL schema).

Serves issue 15's agent family.  The **ledger** holds what must outlive any
process and what the checkers read afterwards: the business ``objects`` the
decision reads (with a version each), the live ``aliases`` of the semantic
resources, the ``effects`` that fired (one row per firing), the ``trace``
(node runs and consumptions of the approval) and the ``events`` of semantic
resolution (resolve, spawn).  The guard's effect ledger
(``driftlab_guard_effects``) lives in the same database when the stack has
the consume-once layer.  Checkpoints live where LangGraph's saver puts them:
``checkpoints.sqlite`` beside ``ledger.sqlite``, or two PostgreSQL schemas
(:func:`fresh` makes them, named by ``runners.backends``).

Every connection is opened by the process that uses it (a forked child never
inherits one).
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

DDL = [
    "CREATE TABLE IF NOT EXISTS objects (name TEXT PRIMARY KEY, data TEXT NOT NULL, version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS aliases (identity TEXT PRIMARY KEY, live INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS effects (run TEXT, task TEXT, effect TEXT, payload TEXT, op TEXT, pid INTEGER, at {real})",
    "CREATE TABLE IF NOT EXISTS trace (run TEXT, step INTEGER, node TEXT, kind TEXT, resume TEXT, op TEXT, pid INTEGER, at {real})",
    "CREATE TABLE IF NOT EXISTS events (run TEXT, kind TEXT, workflow TEXT, identity TEXT, version INTEGER, child TEXT, "
    "op TEXT, at {real})",
]


@dataclass(frozen=True)
class Stores:
    """Where one execution's stores are: ``kind`` sqlite (``location`` a folder) or postgres (a DSN + schema)."""

    kind: str
    location: str
    namespace: str = ""  # postgres: the checkpoints' schema
    ledger_namespace: str = ""  # postgres: the ledger's schema
    #: False: the ledger's commits survive a killed process but not a lost machine (SQLite WAL with
    #: synchronous=NORMAL; PostgreSQL synchronous_commit=off) -- what agent_matrix needs, as its faults are
    #: SIGKILLs; the checkpoints keep LangGraph's own settings.  agent_overhead keeps the defaults.
    durable_ledger: bool = True

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "location": self.location, "namespace": self.namespace,
                "ledger_namespace": self.ledger_namespace}

    # ---- connections
    def ledger(self):
        """A ledger connection in autocommit mode (sqlite3 with isolation_level=None, or psycopg autocommit)."""
        if self.kind == "sqlite":
            conn = sqlite3.connect(os.path.join(self.location, "ledger.sqlite"), isolation_level=None, timeout=30,
                                   check_same_thread=False)
            conn.execute("PRAGMA journal_mode = WAL")
            if not self.durable_ledger:
                conn.execute("PRAGMA synchronous = NORMAL")
            return conn
        import psycopg
        relaxed = "" if self.durable_ledger else " -c synchronous_commit=off"
        return psycopg.connect(self.location, autocommit=True,
                               options=f"-c search_path={self.ledger_namespace}{relaxed}")

    def checkpoint_conn(self):
        if self.kind == "sqlite":
            return sqlite3.connect(os.path.join(self.location, "checkpoints.sqlite"), check_same_thread=False, timeout=30)
        import psycopg
        from psycopg.rows import dict_row
        return psycopg.connect(self.location, autocommit=True, prepare_threshold=0, row_factory=dict_row,
                               options=f"-c search_path={self.namespace}")


class Ledger:
    """SQL over a ledger connection with ``?`` placeholders on both backends."""

    def __init__(self, stores: Stores):
        self.stores = stores
        self.conn = stores.ledger()
        self.mark = "?" if stores.kind == "sqlite" else "%s"

    def sql(self, text: str, args: tuple = ()):
        return self.conn.execute(text.replace("?", self.mark), args)

    def close(self):
        self.conn.close()

    def setup(self, state: dict[str, dict], resources: dict[str, tuple[int, ...]]) -> None:
        real = "REAL" if self.stores.kind == "sqlite" else "DOUBLE PRECISION"
        self.sql("BEGIN")
        for ddl in DDL:
            self.sql(ddl.format(real=real))
        for name, data in state.items():
            self.sql("INSERT INTO objects (name, data, version) VALUES (?, ?, 1)", (name, json.dumps(data)))
        for ident in resources:
            self.sql("INSERT INTO aliases (identity, live) VALUES (?, 1)", (ident,))
        self.sql("COMMIT")

    # ---- business state
    def objects(self) -> tuple[dict[str, dict], dict[str, int]]:
        rows = self.sql("SELECT name, data, version FROM objects").fetchall()
        return {r[0]: json.loads(r[1]) for r in rows}, {r[0]: int(r[2]) for r in rows}

    def change(self, field: str, value: Any) -> None:
        """A second actor writes ``object.field`` (one transaction; the object's version moves)."""
        obj, _, fld = field.partition(".")
        data = json.loads(self.sql("SELECT data FROM objects WHERE name = ?", (obj,)).fetchone()[0])
        data[fld] = value
        self.sql("UPDATE objects SET data = ?, version = version + 1 WHERE name = ?", (json.dumps(data), obj))

    # ---- semantic resources
    def live(self, identity: str) -> int:
        return int(self.sql("SELECT live FROM aliases WHERE identity = ?", (identity,)).fetchone()[0])

    def deploy(self, identity: str, version: int) -> None:
        self.sql("UPDATE aliases SET live = ? WHERE identity = ?", (int(version), identity))

    # ---- what nodes record
    def effect(self, run: str, task: str, key: str, payload: str, op: str, conn=None) -> None:
        (conn or self.conn).execute(
            "INSERT INTO effects (run, task, effect, payload, op, pid, at) VALUES (?, ?, ?, ?, ?, ?, ?)".replace(
                "?", self.mark), (run, task, key, payload, op, os.getpid(), time.time()))

    def trace(self, run: str, step: int, node: str, kind: str, resume: Any, op: str) -> None:
        self.sql("INSERT INTO trace (run, step, node, kind, resume, op, pid, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                 (run, step, node, kind, None if resume is None else json.dumps(resume), op, os.getpid(), time.time()))

    def event(self, run: str, kind: str, workflow: str, identity: str | None, version: int | None,
              child: str | None, op: str) -> None:
        self.sql("INSERT INTO events (run, kind, workflow, identity, version, child, op, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                 (run, kind, workflow, identity, version, child, op, time.time()))

    def rows(self, table: str) -> list[dict]:
        columns, statement = _ROWS[table]
        return [dict(zip(columns, r)) for r in self.sql(statement).fetchall()]


#: table -> (its columns, the statement that reads them in time order); fixed text, nothing composed
_ROWS = {
    "effects": (("run", "task", "effect", "payload", "op", "pid", "at"),
                "SELECT run, task, effect, payload, op, pid, at FROM effects ORDER BY at"),
    "trace": (("run", "step", "node", "kind", "resume", "op", "pid", "at"),
              "SELECT run, step, node, kind, resume, op, pid, at FROM trace ORDER BY at"),
    "events": (("run", "kind", "workflow", "identity", "version", "child", "op", "at"),
               "SELECT run, kind, workflow, identity, version, child, op, at FROM events ORDER BY at"),
}


@contextmanager
def fresh(kind: str, scratch=None, durable_ledger: bool = True):
    """New, empty stores for one execution, removed afterwards (a folder, or two PostgreSQL schemas)."""
    from runners import backends

    if kind == "sqlite":
        with backends.sqlite_folder(scratch, "agent_") as folder:
            yield Stores("sqlite", folder, durable_ledger=durable_ledger)
        return
    dsn = backends.postgres_dsn()
    made = []
    try:
        made.append(backends.create_schema(dsn, "driftlab_agent_"))
        made.append(backends.create_schema(dsn, "driftlab_agentledger_"))
        yield Stores("postgres", dsn, made[0], made[1], durable_ledger)
    finally:
        for name in made:
            backends.drop_schema(dsn, name)
