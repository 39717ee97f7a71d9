"""Stock LangGraph at a pinned release, inside its own environment (``langgraph@1.2.9``, ``langgraph@1.2.24``).

Serves "Resume Means Resume" (arXiv 2608.03836), which measured LangGraph
1.2.9: with one environment per release (``data/envs/langgraph-<release>/``),
the paper's release and today's run side by side under the same harness, and
the paper's findings are reproduced on 1.2.9 itself.

The same adapter as the lab's in-process ``langgraph`` row
(``mechanisms/resume/langgraph_runtime.py``), stock only, rewritten against
:mod:`.protocol` so that nothing of the lab is imported in the env:

- one LangGraph node per graph node, edges in order, ``interrupt()`` first in
  the interrupt node; node bodies are the protocol's ``run_node`` (effects in
  the lab's ledger, a separate store);
- checkpoints: LangGraph's ``SqliteSaver`` (``<location>/<ns>lg.sqlite``,
  ``synchronous=NORMAL``) or ``PostgresSaver`` (schema ``<ns>``), LangGraph's
  default durability (``async``) unless ``options.durability`` says otherwise;
  state declared as a ``TypedDict`` (``options.state = "pydantic"``: a model);
- ``start`` = ``invoke(input)``; ``resume`` = ``invoke(Command(resume=v))``
  on the thread head, or with ``checkpoint_id`` in the config; ``recover`` =
  ``invoke(None)`` in a fresh process; ``fork`` = a new thread seeded by
  ``update_state(values, as_node=<node before>)`` then ``invoke(None)`` so the
  interrupt node parks on it.

Named points: ``before_node``/``after_effect`` (``run_node``),
``after_node_before_checkpoint`` (the body returned), ``during_checkpoint_write``
(inside the saver's ``put``, once the node's writes are stored), ``parked``
(the invoke that parked returned) and ``after_resume_consumed`` (the node after
the interrupt is about to start).

``options.remit = true`` (row ``langgraph+remit@1.2.9``): the saver is
``remit.wrap``-ped as REMIT's README configures it for concurrent resumers
(``cross_process_gate=True``, a strict schema validator), on the release
REMIT was tested with; the adapter's own reads pass ``remit_inspect``.
"""
from __future__ import annotations

import operator
import sqlite3
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Optional, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from pydantic import BaseModel, Field

from .protocol import (Answer, AFTER_NODE_BEFORE_CHECKPOINT, AFTER_RESUME_CONSUMED, DONE, DURING_CHECKPOINT_WRITE, FAILED,
                       PARKED, PARKED_POINT, REFUSED, Adapter, current)

FIELDS = ("input", "approval", "steps", "log")


class LabState(TypedDict):
    input: str
    approval: Optional[str]
    steps: int
    log: list[str]


class LabStateModel(BaseModel):
    input: str = ""
    approval: Optional[str] = None
    steps: int = 0
    log: list[str] = Field(default_factory=list)


class LabStateParallel(TypedDict):
    """The same four fields for a graph with parallel siblings: ``log`` and ``steps`` reduced from each node's delta."""

    input: str
    approval: Optional[str]
    steps: Annotated[int, operator.add]
    log: Annotated[list[str], operator.add]


STATES = {"typeddict": LabState, "pydantic": LabStateModel, "parallel": LabStateParallel}


def as_dict(state: Any) -> dict:
    if isinstance(state, dict):
        return {k: state[k] for k in FIELDS if k in state}
    return {k: getattr(state, k) for k in FIELDS}


def _pointed(base: type) -> type:
    """``base`` with the ``during_checkpoint_write`` point inside ``put`` (before the write)."""

    def put(self, config, checkpoint, metadata, new_versions):
        self.runtime_point(config, metadata)
        return base.put(self, config, checkpoint, metadata, new_versions)

    return type("Pointed" + base.__name__, (base,), {"put": put})




def _node_body(step: int, state, config):
    """Node ``step``'s body, run by this process's adapter.  Module-level, so that the node function LangGraph
    inspects at every compile (for subgraphs: every value it reaches, through ``dis``) reaches only this function
    and an int, not the adapter and all it holds (12 of a call's 40 ms)."""
    return current().node_body(step, state, config)


class LangGraphAdapter(Adapter):
    """Stock LangGraph (module docstring)."""

    name = "langgraph"
    #: LangGraph's answers (issue 24 §1): a pydantic state that fails validation (``ValidationError`` from
    #: ``invoke``/``get_state``), ``invoke(None)`` on a thread with no checkpoint (``EmptyInputError``), an update it
    #: rejects (``InvalidUpdateError``), REMIT's refusals (its README);
    #: and REMIT's lazy claims table: racers whose first claims meet on a fresh PostgreSQL schema race its
    #: ``CREATE TABLE IF NOT EXISTS remit_claims``, and ``langgraph_shim._remit_claims_ddl`` absorbs SQLSTATE 42P07
    #: and 23505 but not 42710 (the table's row type created by another racer), which escapes ``invoke``
    ANSWERS = (Answer(FAILED, r"\w*ValidationError: ", "LangGraph: a pydantic state schema is validated on load"),
               Answer(FAILED, r"EmptyInputError: Received no input for ",
                      "LangGraph: invoke(None) on a thread with no checkpoint (langgraph.errors.EmptyInputError): a "
                      "start killed before its first checkpoint was stored, which async durability leaves to another "
                      "thread"),
               Answer(REFUSED, r"InvalidUpdateError: ", "LangGraph: update_state rejects an unknown channel"),
               Answer(FAILED, r"InvalidUpdateError: ", "LangGraph: a node's update to an unknown channel"),
               Answer(REFUSED, r"RemitConsumeConflict: ", "REMIT: a second consumption is refused"),
               Answer(FAILED, r"Remit\w*Error: ", "REMIT: a checkpoint-validity violation is refused"),
               Answer(FAILED, r'DuplicateObject: type "remit_claims" already exists',
                      "REMIT 0.1.2: its lazy claims table's DDL raced by another racer (SQLSTATE 42710 not absorbed)"))
    WARM = {"postgres": ("psycopg", "langgraph.checkpoint.postgres")}

    @classmethod
    def warm(cls, kind: str, options: dict) -> None:
        super().warm(kind, options)
        if options.get("remit"):
            import pydantic  # noqa: F401 - imported by _wrap on every call
            import remit  # noqa: F401

    def __init__(self, backend, graph, hooks=None, options=None):
        super().__init__(backend, graph, hooks, options)
        self.durability = self.options.get("durability", "async")
        self.state_kind = self.graph.hints.get("state") or self.options.get("state", "typeddict")
        self.saver = self._open_saver()
        self.saver.runtime_point = self._checkpoint_point
        self.app = self._graph().compile(checkpointer=self.saver)

    # ---- the saver and the graph
    def _open_saver(self):
        if self.backend["kind"] == "sqlite":
            path = str(Path(self.backend["location"]) / f"{self.ns}lg.sqlite")
            self._conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
            self._conn.execute("PRAGMA synchronous = NORMAL")
            return self._wrap(_pointed(SqliteSaver))
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        self._conn = psycopg.connect(self.backend["location"], autocommit=True, prepare_threshold=0,
                                     row_factory=dict_row, options=f"-c search_path={self.ns}")
        return self._wrap(_pointed(PostgresSaver))

    def _wrap(self, cls):
        """The stock saver, or (``options.remit``) REMIT's wrap of it, gate on and a strict schema validator."""
        if not self.options.get("remit"):
            return cls(self._conn)
        import remit
        from pydantic import TypeAdapter

        adapters = {k: TypeAdapter(t) for k, t in LabState.__annotations__.items()}

        def validate(checkpoint: dict) -> None:
            for channel, value in (checkpoint.get("channel_values") or {}).items():
                if channel in adapters:
                    adapters[channel].validate_python(value, strict=True)

        return remit.saver_class(cls)(self._conn, remit_validator=validate, remit_cross_process_gate=True)

    def _graph(self) -> StateGraph:
        """One node per graph node, edges in order; the graph's ``parallel`` siblings fan out and in."""
        siblings = list(self.graph.hints.get("parallel", ()))
        g = StateGraph(STATES["parallel" if siblings else self.state_kind])
        for step, node in enumerate(self.graph.nodes):
            g.add_node(node["name"], self._node(step))
        levels: list[list[str]] = []
        for name in self.graph.names:
            if name in siblings and levels and levels[-1][0] in siblings:
                levels[-1].append(name)
            else:
                levels.append([name])
        levels = [[START], *levels, [END]]
        for before, after in zip(levels, levels[1:]):
            for a in before:
                for b in after:
                    g.add_edge(a, b)
        return g

    def _node(self, step: int):
        def run(state, config):
            return _node_body(step, state, config)

        run.__name__ = self.graph.nodes[step]["name"]
        return run

    def node_body(self, step: int, state, config):
        node = self.graph.nodes[step]
        run_id = str(config["configurable"]["thread_id"])
        value = interrupt(self.interrupt_payload(run_id)) if node["interrupt"] else None
        if step > 0 and self.graph.nodes[step - 1]["interrupt"]:
            self.point(AFTER_RESUME_CONSUMED, run_id, step - 1)
        old = as_dict(state)
        new = self.run_node(run_id, step, old, value)
        self.point(AFTER_NODE_BEFORE_CHECKPOINT, run_id, step)
        if self.graph.hints.get("parallel"):  # reduced channels: the node's delta
            delta = {"log": new["log"][len(old.get("log", [])):], "steps": 1}
            return {**delta, "approval": new["approval"]} if node["interrupt"] else delta
        return new

    def setup(self) -> None:
        if self.backend["kind"] == "postgres":
            import psycopg
            from psycopg import sql

            with psycopg.connect(self.backend["location"], autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.ns)))
        self.saver.setup()

    def close(self) -> None:
        try:
            self._conn.close()
        except Exception:  # noqa: BLE001 - closing after the server went away
            pass
        super().close()

    # ---- points
    def _checkpoint_point(self, config, metadata) -> None:
        step = metadata.get("step", -1)  # LangGraph's step s >= 1 is written after node s - 1 of a linear graph
        if metadata.get("source") == "loop" and 1 <= step <= len(self.graph.nodes):
            run_id = str(config["configurable"]["thread_id"])
            if self.hooks.crash == (DURING_CHECKPOINT_WRITE, self.graph.names[step - 1]) and self.durability != "exit":
                self._writes_stored(config)
            self.point(DURING_CHECKPOINT_WRITE, run_id, step - 1)

    def _writes_stored(self, config, timeout_s: float = 2.0) -> None:
        """Wait until the node's writes are stored (LangGraph stores them from another thread)."""
        conf = config["configurable"]
        if not conf.get("checkpoint_id"):
            return
        parent = {"configurable": {k: conf[k] for k in ("thread_id", "checkpoint_ns", "checkpoint_id") if k in conf}}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            tup = self.saver.get_tuple(parent)
            if tup is None or any(ch == "log" for _t, ch, _v in tup.pending_writes or ()):
                return
            time.sleep(0.001)

    # ---- calls
    def _config(self, run_id: str, checkpoint_id: str | None = None, read: bool = False) -> dict:
        conf = {"thread_id": run_id}
        if checkpoint_id:
            conf["checkpoint_id"] = checkpoint_id
        if read and self.options.get("remit"):
            conf["remit_inspect"] = True  # REMIT: an inspection read takes no consumption claim
        return {"configurable": conf}

    def _invoke(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> dict:
        try:
            self.app.invoke(value, self._config(run_id, checkpoint_id), durability=self.durability)
        except Exception as exc:  # noqa: BLE001 - a node or LangGraph raised: the call's outcome is "failed"
            if type(exc).__name__ == "RemitConsumeConflict":  # REMIT's gate refused before any node ran
                return self.status(run_id, REFUSED, reason=f"RemitConsumeConflict: {str(exc).splitlines()[0]}")
            text = str(exc).splitlines()[0] if str(exc) else ""
            return self._failed(run_id, f"{type(exc).__name__}: {text}")
        status = self.state(run_id)
        if status["state"] == PARKED:
            self.point(PARKED_POINT, run_id, self.graph.interrupt_step)
        return status

    def _failed(self, run_id: str, reason: str) -> dict:
        try:
            head = self.state(run_id)
            return self.status(run_id, FAILED, head["checkpoint"], head["node"], head["values"], reason)
        except Exception:  # noqa: BLE001 - e.g. a pydantic state that no longer loads
            return self.status(run_id, FAILED, reason=reason)

    def start(self, run_id: str, input: str) -> dict:
        if self.app.get_state(self._config(run_id, read=True)).values:
            return self.status(run_id, REFUSED, reason=f"run {run_id!r} exists")
        return self._invoke(run_id, self.graph.initial_state(input))

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> dict:
        return self._invoke(run_id, Command(resume=value), checkpoint_id)

    def recover(self, run_id: str) -> dict:
        head = self.state(run_id)
        if head["state"] == DONE:
            return head
        return self._invoke(run_id, None)

    def replay(self, run_id: str, checkpoint_id: str) -> dict:
        """LangGraph's own replay fork: ``invoke(None)`` from a past checkpoint id of the same thread."""
        return self._invoke(run_id, None, checkpoint_id)

    def update(self, run_id: str, values: dict) -> dict:
        """``update_state(values)`` on the thread head (as LangGraph picks the node), running nothing."""
        try:
            self.app.update_state(self._config(run_id), dict(values))
        except Exception as exc:  # noqa: BLE001 - LangGraph refused the update: the call's answer is "refused"
            text = str(exc).splitlines()[0] if str(exc) else ""
            head = self.state(run_id)
            return self.status(run_id, REFUSED, head["checkpoint"], head["node"], head["values"],
                               f"{type(exc).__name__}: {text}")
        return self.state(run_id)

    def fork(self, run_id: str, checkpoint_id: str, new_run_id: str) -> dict:
        src = self.app.get_state(self._config(run_id, checkpoint_id, read=True))
        if not src.values or src.config["configurable"]["thread_id"] != run_id:
            return self.status(new_run_id, REFUSED, reason=f"no checkpoint {checkpoint_id!r} in run {run_id!r}")
        if self.app.get_state(self._config(new_run_id, read=True)).values:
            return self.status(new_run_id, REFUSED, reason=f"run {new_run_id!r} exists")
        step = self._step(src)
        as_node = self.graph.names[step - 1] if step > 0 else START
        self.app.update_state(self._config(new_run_id), as_dict(src.values), as_node=as_node)
        if step < len(self.graph.nodes) and self.graph.nodes[step]["interrupt"]:
            return self._invoke(new_run_id, None)  # the interrupt node parks at once
        return self.state(new_run_id)

    # ---- reading
    def _step(self, snap) -> int:
        names = [t.name for t in snap.tasks if t.name in self.graph.names] or list(snap.next)
        return self.graph.names.index(names[0]) if names and names[0] in self.graph.names else len(self.graph.nodes)

    def _checkpoint(self, snap, run_id: str) -> dict:
        step = self._step(snap)
        n = len(self.graph.nodes)
        parked = bool(snap.interrupts) and step < n and self.graph.nodes[step]["interrupt"]
        parent = (snap.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        created = datetime.fromisoformat(snap.created_at).timestamp() if snap.created_at else 0.0
        return self.checkpoint(snap.config["configurable"]["checkpoint_id"], run_id, step,
                               self.graph.names[step] if step < n else None, dict(snap.values), parent, created,
                               parked)

    def checkpoints(self, run_id: str) -> list[dict]:
        try:
            snaps = list(self.app.get_state_history(self._config(run_id)))
        except Exception:  # noqa: BLE001 - e.g. a pydantic state that no longer validates: read what the saver holds
            return self._stored(run_id)
        return [self._checkpoint(s, run_id) for s in reversed(snaps) if s.values and s.metadata.get("step", 0) >= 0]

    def _stored(self, run_id: str) -> list[dict]:
        """The saver's own rows, when LangGraph cannot build its state from them (linear graphs: after LangGraph
        step s, s nodes are done): the persisted values exactly as stored, for the checkers to judge."""
        out, n = [], len(self.graph.nodes)
        for t in reversed(list(self.saver.list(self._config(run_id)))):
            step = t.metadata.get("step", -1)
            values = {k: v for k, v in t.checkpoint["channel_values"].items()
                      if not k.startswith("__") and not k.startswith("branch:")}
            if step < 0 or not values:
                continue
            parked = any(w[1] == "__interrupt__" for w in t.pending_writes or ())
            created = datetime.fromisoformat(t.checkpoint["ts"]).timestamp()
            parent = (t.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            out.append(self.checkpoint(t.config["configurable"]["checkpoint_id"], run_id, min(step, n),
                                       self.graph.names[step] if step < n else None, values, parent, created, parked))
        return out

    def state(self, run_id: str) -> dict:
        snap = self.app.get_state(self._config(run_id, read=True))
        if not snap.values:
            return self.status(run_id, REFUSED, reason=f"no run {run_id!r}")
        cp = self._checkpoint(snap, run_id)
        return self.status(run_id, DONE if cp["step"] >= len(self.graph.nodes) else PARKED, cp["checkpoint"],
                           cp["next"], cp["values"])
