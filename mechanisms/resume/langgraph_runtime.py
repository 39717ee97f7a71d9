"""Real LangGraph behind the durable-runtime interface: stock (``langgraph``) and guarded (``langgraph+guard``).

Serves "Resume Means Resume" (arXiv 2608.03836), which measured LangGraph
1.2.9: this adapter puts the *installed* release under the same harness as the
lab's reference runtimes, so its conformance profile, fault matrix and
concurrent-resume saturation are measured, not quoted.

What LangGraph does is left to LangGraph:

- the graph is :func:`mechanisms.resume.langgraph_graphs.build_graph` of the cell's
  ``GraphSpec`` (one LangGraph node per node; ``interrupt`` inside the
  interrupt node); node bodies are the interface's ``run_node`` (effects in
  the family's ledger, a separate store);
- checkpoints: LangGraph's own ``SqliteSaver`` (``<location>/<ns>lg.sqlite``,
  ``synchronous=NORMAL`` as the lab's own stores) or ``PostgresSaver``
  (schema ``<ns>``), sync or async (``saver_mode``);
- ``start`` = ``invoke(input)``; ``resume`` = ``invoke(Command(resume=v))``
  on the thread head, or with ``checkpoint_id`` in the config (the addressed
  form); ``recover`` = ``invoke(None)`` in a fresh process; ``fork`` = a new
  thread seeded by ``update_state`` with the checkpoint's values ``as_node``
  the node before it, then ``invoke(None)`` so that the interrupt node parks
  on the new thread (it calls ``interrupt`` before doing anything);
- every durability mode of the release (``durability``: LangGraph's default
  ``async``, ``sync``, ``exit``) and the three kinds of state
  (``state_kind``) are class attributes: :data:`VARIANTS` lists the
  registered combinations.

Named points: ``before_node``/``after_effect`` (in ``run_node``),
``after_node_before_checkpoint`` (the body returned; LangGraph has not
written the step's checkpoint), ``during_checkpoint_write`` (inside the
saver's ``put``, before it writes, once the node's writes are stored: with the
sync savers the adapter waits for them, as LangGraph stores them from another
thread), ``parked`` (the invoke that parked
returned) and ``after_resume_consumed`` (the node after the interrupt is
about to start: with ``durability="sync"`` the interrupt node's checkpoint is
durable there; with ``async``/``exit`` it may not be — that is LangGraph's
semantics, measured as such).

``langgraph+guard[any-saver]`` is the guard as a user of any other saver adopts
it: LangGraph's stock saver wrapped by ``driftlab_guard.guard`` with the claims
in a store of their own (a second SQLite file beside the checkpoints; on
PostgreSQL another connection, so another transaction), the same schema and
effect ledger.

``langgraph+guard`` is the same adapter on the guarded savers
(the ``driftlab_guard`` package in ``guard/``, with schema validation) and its
idempotent effect ledger (``driftlab_guard.OnceLedger``, in the
family's effect store so the ledger row and the effect commit in one
transaction), with ``durability="sync"`` (the guard's recommended mode: an
invalid checkpoint stops the run before the next step).
"""
from __future__ import annotations

import asyncio
import sqlite3
import time
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from driftlab_guard import InvalidState, OnceLedger, PostgresClaims, ResumeRefused, SqliteClaims, guard, guarded
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from mechanisms.resume.langgraph_graphs import STATE_KINDS, build_graph, initial_input
from mechanisms.resume.base import DurableRuntime, Hooks
from vocabulary.resume import (AFTER_CHECKPOINT_WRITE, AFTER_NODE_BEFORE_CHECKPOINT, AFTER_RESUME_CONSUMED, DONE, DURING_CHECKPOINT_WRITE,
                               FAILED, PARKED, PARKED_POINT, REFUSED, Backend, Checkpoint, GraphSpec, Status)

#: as the lab's own stores (mechanisms/resume/store.py): WAL with synchronous=NORMAL survives a SIGKILL of the
#: process (only a power loss can drop the newest commits), and LangGraph's savers set WAL themselves
SQLITE_SYNCHRONOUS = "PRAGMA synchronous = NORMAL"

_POINTED: dict[type, type] = {}


def _pointed(base: type) -> type:
    """``base`` with the ``during_checkpoint_write`` point inside ``put`` / ``aput`` (before the write)."""
    if base not in _POINTED:
        def put(self, config, checkpoint, metadata, new_versions):
            self.runtime_point(config, metadata)
            saved = base.put(self, config, checkpoint, metadata, new_versions)
            self.runtime_point(config, metadata, AFTER_CHECKPOINT_WRITE)
            return saved

        async def aput(self, config, checkpoint, metadata, new_versions):
            self.runtime_point(config, metadata)
            saved = await base.aput(self, config, checkpoint, metadata, new_versions)
            self.runtime_point(config, metadata, AFTER_CHECKPOINT_WRITE)
            return saved

        _POINTED[base] = type("Pointed" + base.__name__, (base,), {"put": put, "aput": aput})
    return _POINTED[base]


class LangGraphRuntime(DurableRuntime):
    """Stock LangGraph (module docstring)."""

    name = "langgraph"
    state_kind: ClassVar[str] = "typeddict"
    saver_mode: ClassVar[str] = "sync"  # sync | async
    durability: ClassVar[str] = "async"  # LangGraph's default
    guarded: ClassVar[bool] = False
    any_saver: ClassVar[bool] = False  # the guard as a wrapper of the stock saver, claims in a store of their own
    #: what the lab sets on LangGraph's SQLite connection: synchronous=NORMAL, for speed (a SIGKILL loses nothing);
    #: the ``[stock-durability]`` variants set nothing, so the power-loss cells measure LangGraph's own default
    sqlite_pragmas: ClassVar[tuple[str, ...]] = (SQLITE_SYNCHRONOUS,)

    def __init__(self, backend: Backend, graph: GraphSpec, hooks: Hooks | None = None):
        super().__init__(backend, graph, hooks)
        self._aloop = asyncio.new_event_loop() if self.saver_mode == "async" else None
        self._conn = None
        self.saver = self._open_saver()
        self.app = build_graph(graph, self._body, self.state_kind, payload=self.interrupt_payload,
                               before=self._before, after=self._after).compile(checkpointer=self.saver)
        self.effects = OnceLedger(self.ledger.sql.conn) if self.guarded else None

    # ------------------------------------------------------------------ the saver
    def _saver_class(self) -> type:
        stock = {("sqlite", "sync"): SqliteSaver, ("sqlite", "async"): AsyncSqliteSaver,
                 ("postgres", "sync"): PostgresSaver, ("postgres", "async"): AsyncPostgresSaver}[
            (self.backend.kind, self.saver_mode)]
        return _pointed(guarded(stock) if self.guarded and not self.any_saver else stock)

    def _open_saver(self):
        cls = self._saver_class()
        kwargs = {"schema": STATE_KINDS[self.state_kind]} if self.guarded and not self.any_saver else {}
        ns = self.backend.namespace.lower()
        if self.backend.kind == "sqlite":
            path = str(Path(self.backend.location) / f"{ns}lg.sqlite")
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            if self._aloop is None:
                self._conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
                for pragma in self.sqlite_pragmas:
                    self._conn.execute(pragma)
                saver = cls(self._conn, **kwargs)
            else:
                import aiosqlite

                self._conn = self._run(aiosqlite.connect(path, timeout=30))
                for pragma in self.sqlite_pragmas:
                    self._run(self._conn.execute(pragma))
                saver = self._run(self._construct(cls, self._conn, kwargs))
        else:
            import psycopg
            from psycopg.rows import dict_row

            opts = dict(autocommit=True, prepare_threshold=0, row_factory=dict_row, options=f"-c search_path={ns}")
            if self._aloop is None:
                self._conn = psycopg.connect(self.backend.location, **opts)
            else:
                self._conn = self._run(psycopg.AsyncConnection.connect(self.backend.location, **opts))
            saver = cls(self._conn, **kwargs) if self._aloop is None else self._run(
                self._construct(cls, self._conn, kwargs))
        saver.runtime_point = self._checkpoint_point
        if self.any_saver:
            return guard(saver, self._claims(ns), schema=STATE_KINDS[self.state_kind])
        return saver

    def _claims(self, ns: str):
        """The claim store of ``[any-saver]``: not the saver's database connection (module docstring)."""
        if self.backend.kind == "sqlite":
            return SqliteClaims(str(Path(self.backend.location) / f"{ns}claims.sqlite"))
        return PostgresClaims(self.backend.location, schema=ns)

    @staticmethod
    async def _construct(cls, conn, kwargs):
        return cls(conn, **kwargs)  # an async saver binds the running loop when it is built

    def _run(self, coro):
        return self._aloop.run_until_complete(coro)

    def setup(self) -> None:
        super().setup()
        if self.backend.kind == "postgres":
            import psycopg
            from psycopg import sql

            with psycopg.connect(self.backend.location, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.backend.namespace.lower())))
        result = self.saver.setup()
        if asyncio.iscoroutine(result):
            self._run(result)
        if self.effects is not None:
            self.effects.setup()

    def close(self) -> None:
        try:
            if self._aloop is not None:
                self._run(self._conn.close())
                self._aloop.close()
            elif self._conn is not None:
                self._conn.close()
        except Exception:  # noqa: BLE001 - closing after the server went away
            pass
        super().close()

    # ------------------------------------------------------------------ node bodies and points
    def _body(self, run_id: str, step: int, state: dict, resume: Any) -> dict:
        return self.run_node(run_id, step, state, resume)

    def _before(self, _name: str, run_id: str, step: int) -> None:
        if step > 0 and self.graph.nodes[step - 1].interrupt:
            self.point(AFTER_RESUME_CONSUMED, run_id, step - 1)

    def _after(self, _name: str, run_id: str, step: int) -> None:
        self.point(AFTER_NODE_BEFORE_CHECKPOINT, run_id, step)

    def _checkpoint_point(self, config, metadata, which: str = DURING_CHECKPOINT_WRITE) -> None:
        step = metadata.get("step", -1)  # LangGraph's step s >= 1 is written after node s - 1 of a linear graph
        if which == AFTER_CHECKPOINT_WRITE:  # the saver's put returned (the power-loss cells' point)
            if metadata.get("source") == "loop" and 1 <= step <= len(self.graph.nodes):
                self.point(AFTER_CHECKPOINT_WRITE, str(config["configurable"]["thread_id"]), step - 1)
            return
        if metadata.get("source") == "loop" and 1 <= step <= len(self.graph.nodes):
            run_id = str(config["configurable"]["thread_id"])
            # only where the harness will stop (its hooks name the point); "exit" stores no writes before it,
            # but driftlab_guard runs a claimed resume (and the recovery that continues it) durably, step by step
            stops_here = tuple(getattr(self.hooks, "crash", None) or ()) == (DURING_CHECKPOINT_WRITE,
                                                                             self.graph.nodes[step - 1].name)
            if stops_here and self._aloop is None and (self.durability != "exit" or self.guarded):
                self._writes_stored(config)
            self.point(DURING_CHECKPOINT_WRITE, run_id, step - 1)

    def _writes_stored(self, config, timeout_s: float = 2.0) -> None:
        """Wait until the node's writes are stored on the checkpoint this one follows.

        LangGraph saves a task's writes and the next checkpoint from two
        threads; the point "during the checkpoint write" is the moment the
        node's writes are durable and its checkpoint is not (before them it is
        ``after_node_before_checkpoint``), so a kill there is one state, not a race.
        """
        parent = {"configurable": {k: config["configurable"][k] for k in ("thread_id", "checkpoint_ns", "checkpoint_id")
                                   if k in config["configurable"]}}
        if not parent["configurable"].get("checkpoint_id"):
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            tup = self.saver.get_tuple(parent)
            if tup is None or any(ch == "log" for _t, ch, _v in tup.pending_writes or ()):
                return
            time.sleep(0.001)

    def fire_effect(self, run_id: str, task: str, key: str, payload: str) -> bool:
        if self.effects is None:
            return super().fire_effect(run_id, task, key, payload)
        idem = f"{run_id}/{task}/{key}"
        fired, _ = self.effects.once(run_id, task, key, lambda _conn: self.ledger.fire(
            run_id, task, key, payload, op=self.hooks.op, idem=idem), transactional=True)
        return fired

    # ------------------------------------------------------------------ calls
    def _config(self, run_id: str, checkpoint_id: str | None = None) -> dict:
        conf = {"thread_id": run_id}
        if checkpoint_id:
            conf["checkpoint_id"] = checkpoint_id
        return {"configurable": conf}

    def _invoke(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> Status:
        config = self._config(run_id, checkpoint_id)
        try:
            if self._aloop is None:
                self.app.invoke(value, config, durability=self.durability)
            else:
                self._run(self.app.ainvoke(value, config, durability=self.durability))
        except ResumeRefused as exc:
            return Status(run_id, REFUSED, exc.checkpoint_id, reason=exc.reason)
        except InvalidState as exc:
            return self._failed(run_id, f"nothing persisted: {exc}")
        except Exception as exc:  # noqa: BLE001 - a node or LangGraph failed: the call's outcome is "failed"
            return self._failed(run_id, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        status = self.state(run_id)
        if status.state == PARKED:
            self.point(PARKED_POINT, run_id, self.graph.interrupt_step)
        return status

    def _failed(self, run_id: str, reason: str) -> Status:
        try:
            head = self.state(run_id)
            return Status(run_id, FAILED, head.checkpoint_id, head.node, None, head.values, reason)
        except Exception:  # noqa: BLE001 - e.g. pydantic state that no longer loads
            return Status(run_id, FAILED, reason=reason)

    def start(self, run_id: str, input: str) -> Status:
        if self._snapshot(self._config(run_id)).values:
            return Status(run_id, REFUSED, reason=f"run {run_id!r} exists")
        return self._invoke(run_id, initial_input(self.state_kind, self.graph.initial_state(input)))

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> Status:
        return self._invoke(run_id, Command(resume=value), checkpoint_id)

    def recover(self, run_id: str) -> Status:
        head = self.state(run_id)
        if head.state == DONE:
            return head
        return self._invoke(run_id, None)

    def fork(self, run_id: str, checkpoint_id: str, new_run_id: str) -> Status:
        src = self._snapshot(self._config(run_id, checkpoint_id))
        if not src.values or src.config["configurable"]["thread_id"] != run_id:
            return Status(new_run_id, REFUSED, reason=f"no checkpoint {checkpoint_id!r} in run {run_id!r}")
        if self._snapshot(self._config(new_run_id)).values:
            return Status(new_run_id, REFUSED, reason=f"run {new_run_id!r} exists")
        step = self._step(src)
        as_node = self.graph.names[step - 1] if step > 0 else "__start__"
        self._call(self.app.update_state, self.app.aupdate_state, self._config(new_run_id), dict(src.values),
                   as_node=as_node)
        if step < len(self.graph.nodes) and self.graph.nodes[step].interrupt:
            return self._invoke(new_run_id, None)  # the interrupt node parks at once (it does nothing before)
        return self.state(new_run_id)

    # ------------------------------------------------------------------ reading
    def _call(self, sync, asyn, *args, **kwargs):
        return sync(*args, **kwargs) if self._aloop is None else self._run(asyn(*args, **kwargs))

    def _snapshot(self, config):
        return self._call(self.app.get_state, self.app.aget_state, config)

    def _step(self, snap) -> int:
        """Nodes done at this checkpoint: the index of the node its superstep runs (len(nodes) when none).

        ``snap.tasks`` lists that superstep's tasks, finished or not (``snap.next``
        leaves out a task whose writes are already stored, e.g. after a crash
        during the checkpoint write: the checkpoint is still before that node).
        """
        names = [t.name for t in snap.tasks if t.name in self.graph.names] or list(snap.next)
        return self.graph.names.index(names[0]) if names and names[0] in self.graph.names else len(self.graph.nodes)

    def _checkpoint(self, snap, run_id: str) -> Checkpoint:
        step = self._step(snap)
        parked = bool(snap.interrupts) and step < len(self.graph.nodes) and self.graph.nodes[step].interrupt
        parent = (snap.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        created = datetime.fromisoformat(snap.created_at).timestamp() if snap.created_at else 0.0
        return Checkpoint(snap.config["configurable"]["checkpoint_id"], run_id, step,
                          self.graph.names[step] if step < len(self.graph.nodes) else None,
                          dict(snap.values), parent, created, parked)

    def checkpoints(self, run_id: str) -> list[Checkpoint]:
        """Every checkpoint of the thread but LangGraph's empty input checkpoint, oldest first."""
        config = self._config(run_id)
        if self._aloop is None:
            snaps = list(self.app.get_state_history(config))
        else:
            async def collect():
                return [s async for s in self.app.aget_state_history(config)]
            snaps = self._run(collect())
        return [self._checkpoint(s, run_id) for s in reversed(snaps) if s.values and s.metadata.get("step", 0) >= 0]

    def state(self, run_id: str) -> Status:
        snap = self._snapshot(self._config(run_id))
        if not snap.values:
            return Status(run_id, REFUSED, reason=f"no run {run_id!r}")
        cp = self._checkpoint(snap, run_id)
        state = DONE if cp.step >= len(self.graph.nodes) else PARKED
        return Status(run_id, state, cp.id, cp.next, self.interrupt_payload(run_id) if cp.parked else None,
                      dict(cp.values))


class LangGraphGuardRuntime(LangGraphRuntime):
    """LangGraph on the guarded savers, with schema validation and the idempotent effect ledger."""

    name = "langgraph+guard"
    guarded = True
    durability = "sync"
    #: the adoption, as the guard's README shows it (resume_guards counts its lines)
    adoption = ("from driftlab_guard import GuardedSqliteSaver\n"
                "saver = GuardedSqliteSaver(conn, schema=State)  # instead of SqliteSaver(conn)\n")
    #: the guard's refusal (a second consumer of one interrupt); ``_invoke`` already returns it as a refused
    #: Status, and declaring it keeps it a refusal wherever else it escapes
    refusals = (ResumeRefused,)


class LangGraphGuardAnySaverRuntime(LangGraphGuardRuntime):
    """The guard wrapping LangGraph's stock saver, claims in a store of their own (``driftlab_guard.guard``)."""

    name = "langgraph+guard[any-saver]"
    any_saver = True
    connections_per_racer = 3  # the saver's, the ledger's and the claim store's own (k = 16 peaked at 53)
    adoption = ("from driftlab_guard import SqliteClaims, guard\n"
                "saver = guard(saver, SqliteClaims('claims.db'), schema=State)  # wraps the saver you have\n")


def _variant(base: type, suffix: str, **attrs) -> type:
    cls = type(base.__name__ + "".join(p.title() for p in suffix.replace("-", "_").split("_")), (base,),
                {"name": f"{base.name}[{suffix}]", "__module__": __name__, **attrs})
    globals()[cls.__name__] = cls
    return cls


#: registered variants: name -> class (every durability mode, the async savers, the three kinds of state)
VARIANTS: dict[str, type] = {}
for _base in (LangGraphRuntime, LangGraphGuardRuntime):
    for _suffix, _attrs in (("async-saver", {"saver_mode": "async"}),
                            ("durability-sync", {"durability": "sync"}),
                            ("durability-async", {"durability": "async"}),
                            ("durability-exit", {"durability": "exit"}),
                            ("dataclass", {"state_kind": "dataclass"}),
                            ("pydantic", {"state_kind": "pydantic"}),
                            ("stock-durability", {"sqlite_pragmas": ()})):
        _cls = _variant(_base, _suffix, **_attrs)
        VARIANTS[_cls.name] = _cls
