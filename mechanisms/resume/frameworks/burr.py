"""Apache Burr at a pinned release (``apache-burr@0.43``), stock and LLM-free, inside its own environment.

Serves issue 29 (frameworks, round 2, under the harness of "Resume Means
Resume", arXiv 2608.03836).  Imported as ``driftlab_frameworks.burr``: ``import
burr`` here is the framework (the folder is never on ``sys.path``).  What the
framework does is left to it, through its documented API (``burr.core``:
``ApplicationBuilder``, the class-based ``Action`` with ``run``/``update``/
``reads``/``writes``/``inputs``, ``default`` transitions; ``burr.core.persistence``:
``SQLitePersister``; ``ApplicationBuilder.initialize_from(persister,
resume_at_next_action=True, ...)``, ``with_state_persister``, ``with_identifiers``;
``Application.run(halt_before=..., halt_after=..., inputs=...)``), as Burr's own
human-in-the-loop example serves a request (``burr/examples/email-assistant/
server.py``: build from the persister, ``run(halt_before=[the human's actions],
halt_after=[the final one], inputs=...)``):

- one Burr ``Action`` per graph node, named after it, linked by ``default``
  transitions in graph order; its ``run`` is the protocol's ``run_node`` on the
  lab's keys of Burr's ``State``, its ``update`` writes the new values back;
  the interrupt node's action declares the input ``approval`` (the human's
  value, passed as ``inputs={"approval": value}``);
- persistence: Burr's own ``SQLitePersister`` on ``<location>/<ns>burr.sqlite``,
  table ``burr_state``, as the application's state persister *and* its
  initializer: after every action Burr's ``PersisterHook`` inserts one row
  ``(partition_key, app_id, sequence_id, position, status, state)``, primary
  key ``(partition_key, app_id, sequence_id, position)``.  The one change: the
  adapter creates the table itself before Burr's ``initialize()`` (whose
  ``CREATE TABLE IF NOT EXISTS`` then keeps it), with Burr's columns and key,
  except that ``created_at`` defaults to milliseconds instead of
  ``CURRENT_TIMESTAMP``'s whole seconds, so that the lab can order a row
  against a call's start (Burr reads ``created_at`` only to pick the newest
  row across applications, which this adapter never asks for).  A subclass
  adds only the ``during_checkpoint_write`` point, inside the INSERT's
  transaction before its commit;
- ``start`` = build with ``initialize_from`` (nothing persisted: Burr starts
  from the default entrypoint with the default state, the run's initial
  state) and ``run(halt_before=[<interrupt>], halt_after=[<last>])``: Burr runs
  ``prepare`` and halts before the decision;
- ``resume`` = build with ``initialize_from(resume_at_next_action=True)`` in a
  fresh process (Burr loads the application's row of the highest sequence id
  and continues at the action after its position) and
  ``run(halt_before=[<interrupt>], halt_after=[<last>], inputs={"approval":
  value})``: Burr runs whatever its next action is, with the value as that
  first step's input; a resume of an application the persister holds no row
  of is refused by the adapter (the contract's "no persisted state": Burr
  would start a new application from the default state); a resume of a
  finished application runs nothing (Burr has no next action) and answers
  its state;
- ``recover`` (a new process after a SIGKILL, as a user would) = the same
  build; nothing to run when the next action is the interrupt (it waits for
  its human: only ``resume`` with the value continues it) or when there is no
  next action; else ``run(...)`` from Burr's next action.

Burr's own protection is the primary key: two processes that loaded the same
row both run the next action and both insert the row of the same sequence id
and position; the second insert fails (``sqlite3.IntegrityError: UNIQUE
constraint failed``, raised by Burr's ``PersisterHook`` after the action ran,
out of ``Application.run``): a declared failure of the framework.

The store is read (``checkpoints``, ``state``) from Burr's table as Burr wrote
it: one checkpoint per row of the application, ordered by sequence id,
``step`` = the index of the row's position + 1 (a ``failed`` row: the index,
Burr restarts at that action), ``next`` = the action after it (``parked`` when
that is the interrupt), the id ``burr_state/<sequence_id>/<position>``.  No
fork, replay, update or resume by id (the env's ``not_applicable``).

Named points: ``before_node``/``after_effect`` (``run_node``),
``after_node_before_checkpoint`` (the action's ``run`` returned; Burr has not
yet run ``update`` nor its ``PersisterHook``), ``during_checkpoint_write`` (the
row inserted, not committed), ``parked`` (the call that halted before the
interrupt returns) and ``after_resume_consumed`` (the interrupt's row is
committed; the next action's ``run`` has begun, before ``run_node``).
"""
from __future__ import annotations

import json
import logging
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from burr.core import Action, ApplicationBuilder, State, default
from burr.core.persistence import SQLitePersister

from .protocol import (Answer, AFTER_NODE_BEFORE_CHECKPOINT, AFTER_RESUME_CONSUMED, DURING_CHECKPOINT_WRITE,
                       FAILED, REFUSED, Adapter)

#: Burr warns on stderr ("undefined behavior -- you should fix!") when a run of a finished application computes no
#: action: the lab's second resume of a finished run does that on purpose, and its answer is recorded as the cell's
#: outcome; the warning would only reach the user's terminal
logging.getLogger("burr.core.application").setLevel(logging.ERROR)

FIELDS = ("input", "approval", "steps", "log")
TABLE = "burr_state"  # the statements below name it literally (no SQL text is formatted)
INPUT = "approval"
#: Burr's DDL (SQLitePersister.create_table_if_not_exists) with created_at in milliseconds (module docstring)
DDL = ("CREATE TABLE IF NOT EXISTS burr_state (partition_key TEXT DEFAULT '', app_id TEXT NOT NULL, "
       "sequence_id INTEGER NOT NULL, position TEXT NOT NULL, status TEXT NOT NULL, state TEXT NOT NULL, "
       "created_at TIMESTAMP DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')), "
       "PRIMARY KEY (partition_key, app_id, sequence_id, position))")


class _Commit:
    """Burr's connection, with the ``during_checkpoint_write`` point before the commit of a row after a node."""

    def __init__(self, conn: sqlite3.Connection, rt: "BurrAdapter"):
        self._conn, self._rt = conn, rt

    def __getattr__(self, name):
        return getattr(self._conn, name)

    def commit(self):
        rt = self._rt
        if rt.unsaved is not None:
            step, rt.unsaved = rt.unsaved, None
            rt.point(DURING_CHECKPOINT_WRITE, rt.run_id, step)  # the row inserted, not committed
        return self._conn.commit()


class PointedPersister(SQLitePersister):
    """Burr's SQLite persister; its connection adds only the ``during_checkpoint_write`` point."""

    def __init__(self, db_path: str, rt: "BurrAdapter"):
        super().__init__(db_path, TABLE)
        self.connection = _Commit(self.connection, rt)


class NodeAction(Action):
    """One node of the lab's graph as a Burr action (the documented class-based form)."""

    def __init__(self, rt: "BurrAdapter", step: int):
        super().__init__()
        self.rt, self.step = rt, step

    @property
    def reads(self) -> list[str]:
        return list(FIELDS)

    @property
    def writes(self) -> list[str]:
        return list(FIELDS)

    @property
    def inputs(self) -> list[str]:
        return [INPUT] if self.rt.graph.nodes[self.step]["interrupt"] else []

    def run(self, state: State, **run_kwargs) -> dict:
        rt, step = self.rt, self.step
        if step > 0 and rt.graph.nodes[step - 1]["interrupt"]:
            rt.point(AFTER_RESUME_CONSUMED, rt.run_id, step - 1)
        values = {k: state[k] for k in FIELDS if k in state}
        new = rt.run_node(rt.run_id, step, values, resume=run_kwargs.get(INPUT))
        rt.point(AFTER_NODE_BEFORE_CHECKPOINT, rt.run_id, step)
        rt.unsaved = step
        return new

    def update(self, result: dict, state: State) -> State:
        return state.update(**result)


class BurrAdapter(Adapter):
    """Apache Burr behind the durable-runtime interface (module docstring)."""

    name = "burr"
    #: Burr's answers (issue 24 §1): the persister's primary key refuses a second row of one sequence id and
    #: position (SQLitePersister.create_table_if_not_exists; raised by PersisterHook.post_run_step out of run)
    ANSWERS = (Answer(FAILED, r"IntegrityError: UNIQUE constraint failed: burr_state\.",
                      "Burr: SQLitePersister's PRIMARY KEY (partition_key, app_id, sequence_id, position)"),
               Answer(REFUSED, r"Burr resumes an application at its next action only",
                      "Burr: initialize_from(resume_at_next_action=True) loads the newest row"))

    def __init__(self, backend, graph, hooks=None, options=None):
        super().__init__(backend, graph, hooks, options)
        self.db = Path(backend["location"]) / f"{self.ns}burr.sqlite"
        self.run_id, self.unsaved = "", None
        self.interrupt = self.graph.names[self.graph.interrupt_step]
        self._persister: PointedPersister | None = None

    # ------------------------------------------------------------------ Burr
    def persister(self) -> PointedPersister:
        if self._persister is None:
            p = PointedPersister(str(self.db), self)
            p.initialize()
            self._persister = p
        return self._persister

    def setup(self) -> None:
        conn = sqlite3.connect(str(self.db))
        try:
            conn.execute(DDL)
            conn.commit()
        finally:
            conn.close()
        self.persister()

    def app(self, run_id: str, initial: dict | None = None):
        """The application as every call builds it: Burr's initialize_from on its persister."""
        p = self.persister()
        actions = {name: NodeAction(self, step) for step, name in enumerate(self.graph.names)}
        transitions = [(a, b, default) for a, b in zip(self.graph.names, self.graph.names[1:])]
        return (ApplicationBuilder()
                .with_actions(**actions)
                .with_transitions(*transitions)
                .with_identifiers(app_id=run_id)
                .initialize_from(p, resume_at_next_action=True, default_state=initial or {},
                                 default_entrypoint=self.graph.names[0])
                .with_state_persister(p)
                .build())

    def _run(self, app, inputs: dict | None = None) -> None:
        app.run(halt_before=[self.interrupt], halt_after=[self.graph.names[-1]], inputs=inputs)

    # ------------------------------------------------------------------ calls
    def start(self, run_id: str, input: str) -> dict:
        if self._rows(run_id):
            return self.status(run_id, REFUSED, reason=f"run {run_id!r} exists")
        self.run_id = run_id
        self._run(self.app(run_id, self.graph.initial_state(input)))
        return self.answer(run_id)

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> dict:
        if checkpoint_id is not None:  # declared n/a (resume_by_id)
            return self.status(run_id, REFUSED, reason="Burr resumes an application at its next action only")
        if not self._rows(run_id):
            return self.status(run_id, REFUSED, reason=f"no persisted state of application {run_id!r}")
        self.run_id = run_id
        self._run(self.app(run_id), inputs={INPUT: str(value)})
        return self.answer(run_id)

    def recover(self, run_id: str) -> dict:
        if not self._rows(run_id):
            return self.status(run_id, REFUSED, reason=f"no persisted state of application {run_id!r}")
        self.run_id = run_id
        app = self.app(run_id)
        nxt = app.get_next_action()
        if nxt is not None and nxt.name != self.interrupt:
            self._run(app)
        return self.answer(run_id)

    # ------------------------------------------------------------------ reading
    def _rows(self, run_id: str) -> list:
        if not self.db.exists():
            return []
        conn = sqlite3.connect(str(self.db), timeout=30)
        try:
            return conn.execute("SELECT sequence_id, position, status, state, created_at FROM burr_state "
                                "WHERE partition_key = '' AND app_id = ? ORDER BY sequence_id, rowid",
                                (run_id,)).fetchall()
        except sqlite3.OperationalError as exc:  # the table is not there yet
            if "no such table" not in str(exc):
                raise
            return []
        finally:
            conn.close()

    def checkpoints(self, run_id: str) -> list[dict]:
        out, parent, n = [], None, len(self.graph.names)
        for seq, position, status, state_json, created in self._rows(run_id):
            if position not in self.graph.names:
                continue
            index = self.graph.names.index(position)
            step = index + 1 if status == "completed" else index
            nxt = self.graph.names[step] if step < n else None
            raw = json.loads(state_json)
            values = {k: raw[k] for k in FIELDS if k in raw}
            at = datetime.fromisoformat(str(created)).replace(tzinfo=timezone.utc).timestamp()
            cid = f"{TABLE}/{seq}/{position}"
            out.append(self.checkpoint(cid, run_id, step, nxt, values, parent, at, nxt == self.interrupt))
            parent = cid
        return out

    def state(self, run_id: str) -> dict:
        return self.head_state(run_id, "persisted state")

    def close(self) -> None:
        if self._persister is not None:
            try:
                self._persister.connection.close()
            except Exception:  # noqa: BLE001 - closing after the process's work is done
                pass
        super().close()
