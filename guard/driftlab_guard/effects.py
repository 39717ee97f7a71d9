"""Layer 1, exactly-once effects: node code fires each effect once, even when the node re-runs after a crash.

Serves "Resume Means Resume" (arXiv 2608.03836), effect exactly-once (EO): the
paper found LangGraph 1.2.9 re-executing durably recorded work after a real
SIGKILL.  LangGraph re-runs a whole node whose checkpoint was not written (and
the interrupted node from its start on every resume), so an effect inside a
node fires again unless something remembers it.  :class:`OnceLedger` is that
memory: a table ``driftlab_guard_effects`` keyed by (thread, task, effect key)
in SQLite or PostgreSQL (the saver's database, or any other).

Two ways to fire, by what the effect is:

- ``transactional=True``: the effect is a write to the ledger's own database
  (an order row, an outbox message).  ``action(conn)`` runs inside the same
  transaction as the ledger row: exactly once, across crashes and racers.
- otherwise (an external call): the row is an *intent* first; ``action(key)``
  gets the idempotency key ``thread/task/effect`` to pass to the outside
  system, then the row is marked done.  A crash between the call and the mark
  repeats the call with the same key once (the outside system deduplicates);
  a completed effect never repeats.

Inside a node, :func:`fire_once` reads the thread and the task (step and
node, :func:`current_task`) from LangGraph's config, so the node re-run after
a crash has the same key whatever the durability mode.
"""
from __future__ import annotations

import json
import sqlite3
import time
from typing import Any, Callable


_DDL = {
    "sqlite": """CREATE TABLE IF NOT EXISTS driftlab_guard_effects (
        thread_id TEXT NOT NULL, task_id TEXT NOT NULL, effect_key TEXT NOT NULL, state TEXT NOT NULL,
        result TEXT, at REAL NOT NULL, PRIMARY KEY (thread_id, task_id, effect_key))""",
    "postgres": """CREATE TABLE IF NOT EXISTS driftlab_guard_effects (
        thread_id TEXT NOT NULL, task_id TEXT NOT NULL, effect_key TEXT NOT NULL, state TEXT NOT NULL,
        result TEXT, at DOUBLE PRECISION NOT NULL, PRIMARY KEY (thread_id, task_id, effect_key))""",
}


def idempotency_key(thread_id: str, task_id: str, key: str) -> str:
    return f"{thread_id}/{task_id}/{key}"


class OnceLedger:
    """An idempotent effect ledger over a sqlite3 connection (autocommit) or a psycopg connection (autocommit)."""

    def __init__(self, conn: Any):
        self.conn = conn
        self.kind = "sqlite" if isinstance(conn, sqlite3.Connection) else "postgres"
        if self.kind == "sqlite" and conn.isolation_level is not None:
            raise ValueError("OnceLedger needs a sqlite3 connection opened with isolation_level=None")
        self.mark = "?" if self.kind == "sqlite" else "%s"

    @classmethod
    def sqlite(cls, path: str) -> "OnceLedger":
        conn = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        return cls(conn)

    def setup(self) -> "OnceLedger":
        self.conn.execute(_DDL[self.kind])
        return self

    def _sql(self, text: str) -> str:
        return text.replace("?", self.mark)

    def _begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE" if self.kind == "sqlite" else "BEGIN")

    def once(self, thread_id: str, task_id: str, key: str, action: Callable[[Any], Any] | None = None, *,
             transactional: bool = False) -> tuple[bool, Any]:
        """Fire ``action`` unless this (thread, task, key) already fired; (fired now, its result)."""
        args = (str(thread_id), str(task_id), str(key))
        self._begin()
        try:
            inserted = self.conn.execute(self._sql(
                "INSERT INTO driftlab_guard_effects (thread_id, task_id, effect_key, state, at) VALUES (?, ?, ?, 'intent', ?) "
                "ON CONFLICT DO NOTHING"), (*args, time.time())).rowcount == 1
            if not inserted:
                state, result = self.conn.execute(self._sql(
                    "SELECT state, result FROM driftlab_guard_effects WHERE thread_id = ? AND task_id = ? AND effect_key = ?"),
                    args).fetchone()
                if state == "done" or transactional:
                    self.conn.execute("COMMIT")
                    return False, json.loads(result) if result else None
            if transactional:
                result = action(self.conn) if action else None
                self._done(args, result)
                self.conn.execute("COMMIT")
                return True, result
            self.conn.execute("COMMIT")  # the intent is durable before the outside call
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        result = action(idempotency_key(*args)) if action else None
        self._done(args, result)
        return True, result

    def _done(self, args: tuple[str, str, str], result: Any) -> None:
        self.conn.execute(self._sql("UPDATE driftlab_guard_effects SET state = 'done', result = ? WHERE thread_id = ? "
                                    "AND task_id = ? AND effect_key = ?"), (json.dumps(result), *args))

    def fired(self, thread_id: str | None = None) -> list[tuple[str, str, str, str]]:
        rows = (self.conn.execute(self._sql("SELECT thread_id, task_id, effect_key, state FROM driftlab_guard_effects "
                                            "WHERE thread_id = ? ORDER BY at"), (thread_id,)) if thread_id else
                self.conn.execute("SELECT thread_id, task_id, effect_key, state FROM driftlab_guard_effects ORDER BY at"))
        return [tuple(r) for r in rows.fetchall()]


def current_task() -> tuple[str, str]:
    """(thread id, task) of the LangGraph node that is running: task = ``"<step>:<node>"`` (+ namespace).

    LangGraph's own task id is derived from the id of the checkpoint the step
    starts from, and a checkpoint id is new each time it is created: a step
    re-run after a crash whose checkpoint was not yet durable (durability
    "async" or "exit") gets a new task id.  The step number and node name do
    not change, so they key the effect.  A time-travel branch on the same
    thread shares these keys (fork to a new thread to fire anew).
    """
    from langgraph.config import get_config

    config = get_config()
    meta, conf = config.get("metadata", {}), config["configurable"]
    # a node's own namespace is "<node>:<task id>" below its parents'; keep the parents' node names only
    parents = [seg.split(":")[0] for seg in (conf.get("checkpoint_ns", "") or "").split("|")[:-1]]
    task = f"{meta['langgraph_step']}:{meta['langgraph_node']}" + (f"@{'/'.join(parents)}" if parents else "")
    return str(conf["thread_id"]), task


def fire_once(ledger: OnceLedger, key: str, action: Callable[[Any], Any] | None = None, *,
              transactional: bool = False) -> tuple[bool, Any]:
    """Inside a LangGraph node: fire effect ``key`` of this task once (see :meth:`OnceLedger.once`)."""
    thread_id, task_id = current_task()
    return ledger.once(thread_id, task_id, key, action, transactional=transactional)
