"""driftlab_guard's consume-once layer on LangGraph: conformance kit, claims, refusals, recovery, schema, effects.

Real LangGraph, real SQLite files and a real PostgreSQL schema, real forked
processes and a real SIGKILL.  Each test names the planted bug it catches.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import pytest

pytest.importorskip("langgraph")

import aiosqlite  # noqa: E402
import psycopg  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from langgraph.checkpoint.conformance import checkpointer_test, validate  # noqa: E402
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402
from psycopg import sql  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from driftlab_guard import (GuardedAsyncPostgresSaver, GuardedAsyncSqliteSaver, GuardedPostgresSaver,  # noqa: E402
                        GuardedSqliteSaver, InvalidState, OnceLedger, ResumeRefused, SqliteClaims, StateSchema,
                        fire_once, guard)
from runners.processes import Barrier, fork_start, wait  # noqa: E402


# ---------------------------------------------------------------------------------------------- helpers
class Flow(TypedDict):
    x: int
    v: str


def flow_graph(trace: list[str], effect=None):
    """a -> b (interrupt) -> c; ``trace`` records every node start, ``effect(state)`` runs in c."""

    def a(s):
        trace.append("a")
        return {"x": s["x"] + 1}

    def b(s):
        trace.append("b")
        return {"v": interrupt("approve?")}

    def c(s):
        trace.append("c")
        if effect:
            effect(s)
        return {"x": s["x"] + 10}

    g = StateGraph(Flow)
    for fn in (a, b, c):
        g.add_node(fn.__name__, fn)
    g.add_edge(START, "a"), g.add_edge("a", "b"), g.add_edge("b", "c"), g.add_edge("c", END)
    return g


@pytest.fixture
def pg_schema(pg_dsn):
    from runners.backends import create_schema, drop_schema

    schema = create_schema(pg_dsn, "lgguard_")
    yield schema
    drop_schema(pg_dsn, schema)


def search_path(schema: str) -> sql.Composed:
    """``SET search_path`` to ``schema``, the name composed as an identifier."""
    return sql.SQL("SET search_path TO {}").format(sql.Identifier(schema))


def pg_conn(dsn: str, schema: str):
    conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    conn.execute(search_path(schema))
    return conn


def fresh(tmp_path: Path) -> Path:
    """A new directory under ``tmp_path``: one per call where a test runs a real saver and its planted variant side
    by side (each rerun of tests/planting.py gets a fresh ``tmp_path`` of its own)."""
    return Path(tempfile.mkdtemp(dir=tmp_path))


PLAN = "driftlab_guard.consume_once:ConsumeOnce._guard_plan"
planted_unparked_passes = pytest.mark.planted(PLAN, 'return Plan("unparked", inv, ids)', "return None")


def sqlite_saver(path, cls=GuardedSqliteSaver):
    return cls(sqlite3.connect(str(path), check_same_thread=False))


# ---------------------------------------------------------------------------------------------- conformance kit
class _SyncBridge:
    """Runs the kit's async calls on a sync saver's sync methods (the kit itself is async-only)."""

    @staticmethod
    def wrap(saver):
        base = type(saver)
        methods = {
            "aput": lambda self, *a, **k: asyncio.to_thread(self.put, *a, **k),
            "aput_writes": lambda self, *a, **k: asyncio.to_thread(self.put_writes, *a, **k),
            "aget_tuple": lambda self, *a, **k: asyncio.to_thread(self.get_tuple, *a, **k),
            "adelete_thread": lambda self, *a, **k: asyncio.to_thread(self.delete_thread, *a, **k),
            "alist": _alist,
        }
        if base.prune is not BaseCheckpointSaver.prune:
            methods["aprune"] = lambda self, *a, **k: asyncio.to_thread(self.prune, *a, **k)
        saver.__class__ = type("Bridged" + base.__name__, (base,), methods)
        return saver


async def _alist(self, config, *, filter=None, before=None, limit=None):
    for item in await asyncio.to_thread(lambda: list(self.list(config, filter=filter, before=before, limit=limit))):
        yield item


def _level(registered):
    report = asyncio.run(validate(registered))
    failures = {k: r.failures[:1] for k, r in report.results.items() if r.failures}
    detected = {k for k, r in report.results.items() if r.detected}
    return report.conformance_level(), detected, failures


def planted_overrides(guarded):
    """The guarded async saver ``guarded`` with each planted override bug: (name, subclass)."""
    class DropsReturn(guarded):  # aput must return the stored config
        async def aput(self, config, checkpoint, metadata, new_versions):
            await super().aput(config, checkpoint, metadata, new_versions)

    class SetupUnchained(guarded):  # setup must chain to the stock setup (its tables, its migrations)
        async def setup(self):
            async with self.lock if hasattr(self, "lock") else contextlib.nullcontext():
                pass

    return [("drops aput's return", DropsReturn), ("setup not chained", SetupUnchained)]


def test_conformance_kit_full_on_sqlite(tmp_path):
    """The guarded SQLite savers (async, and sync through a bridge) pass the kit at FULL, as the stock saver does.

    Planted bugs caught: an override that drops the stock method's return value (aput must return the stored
    config), or a setup that does not chain to the stock setup (each planted as a subclass of the guarded saver,
    which must then fall short of FULL).  Not caught: an aput_writes that drops task_path (the kit does not read
    it back: such a subclass passes at FULL).
    """
    def make(cls):
        async def factory():
            async with aiosqlite.connect(str(tmp_path / f"{uuid.uuid4().hex}.db")) as conn:
                saver = cls(conn)
                await saver.setup()
                yield saver
        return checkpointer_test(name=cls.__name__)(factory)

    def full(cls):
        level, caps, failures = _level(make(cls))
        assert (level, failures) == ("FULL", {}) and caps == stock_caps, cls.__name__

    stock_level, stock_caps, _ = _level(make(AsyncSqliteSaver))
    assert stock_level == "FULL"
    full(GuardedAsyncSqliteSaver)
    for bug, cls in planted_overrides(GuardedAsyncSqliteSaver):
        with pytest.raises(AssertionError):  # the planted override must not pass at FULL
            full(cls)

    @checkpointer_test(name="GuardedSqliteSaver(sync)")
    async def sync_factory():
        saver = _SyncBridge.wrap(sqlite_saver(tmp_path / f"sync{uuid.uuid4().hex}.db"))
        yield saver

    level, caps, failures = _level(sync_factory)
    assert (level, failures) == ("FULL", {}) and {"put", "put_writes", "get_tuple", "list", "delete_thread"} <= caps


@pytest.mark.postgres
def test_conformance_kit_full_on_postgres(pg_dsn, pg_schema):
    """The guarded PostgreSQL savers pass the kit at FULL (with prune), as the stock AsyncPostgresSaver does.

    Planted bugs caught: as on SQLite (the same planted subclasses), among them an AsyncPostgresSaver subclass whose
    setup does not chain to the stock migrations (the kit's first put fails on the missing tables; each planted
    subclass runs in a schema of its own, where no earlier saver made them).
    """
    from runners.backends import create_schema, drop_schema

    def make(cls, schema):
        async def factory():
            async with await psycopg.AsyncConnection.connect(
                    pg_dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
                await conn.execute(search_path(schema))
                saver = cls(conn)
                await saver.setup()
                yield saver
        return checkpointer_test(name=cls.__name__)(factory)

    def full(cls, schema):
        level, caps, failures = _level(make(cls, schema))
        assert (level, failures) == ("FULL", {}) and caps == stock_caps and "prune" in caps, cls.__name__

    stock_level, stock_caps, _ = _level(make(AsyncPostgresSaver, pg_schema))
    assert stock_level == "FULL"
    full(GuardedAsyncPostgresSaver, pg_schema)
    for bug, cls in planted_overrides(GuardedAsyncPostgresSaver):
        own = create_schema(pg_dsn, "lgguard_")
        try:
            with pytest.raises(AssertionError):  # the planted override must not pass at FULL
                full(cls, own)
        finally:
            drop_schema(pg_dsn, own)

    @checkpointer_test(name="GuardedPostgresSaver(sync)")
    async def sync_factory():
        with pg_conn(pg_dsn, pg_schema) as conn:
            saver = GuardedPostgresSaver(conn)
            saver.setup()
            yield _SyncBridge.wrap(saver)

    level, caps, failures = _level(sync_factory)
    assert (level, failures) == ("FULL", {}) and {"put", "put_writes", "get_tuple", "list", "delete_thread"} <= caps


# ---------------------------------------------------------------------------------------------- repeated resumes
def _repeated(saver):
    trace: list[str] = []
    app = flow_graph(trace).compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t"}}
    app.invoke({"x": 0, "v": ""}, cfg)
    parked = app.get_state(cfg).config["configurable"]["checkpoint_id"]
    trace.clear()
    assert app.invoke(Command(resume="first"), cfg) == {"x": 11, "v": "first"}
    assert trace == ["b", "c"]
    outcomes = []
    for config in (cfg, {"configurable": {"thread_id": "t", "checkpoint_id": parked}}):
        trace.clear()
        with pytest.raises(ResumeRefused) as refused:
            app.invoke(Command(resume="second"), config)
        outcomes.append((refused.value.checkpoint_id, trace[:]))
    return parked, outcomes, app.get_state(cfg).values


def test_stock_langgraph_records_a_second_resume_and_reruns_an_addressed_one(tmp_path):
    """What the guard fixes, measured on the installed release: the head resume is silently recorded (no error,
    nothing runs); the resume addressed to the parked checkpoint re-runs b and c with the FIRST value."""
    trace: list[str] = []
    app = flow_graph(trace).compile(checkpointer=SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False)))
    cfg = {"configurable": {"thread_id": "t"}}
    app.invoke({"x": 0, "v": ""}, cfg)
    parked = app.get_state(cfg).config["configurable"]["checkpoint_id"]
    app.invoke(Command(resume="first"), cfg)
    trace.clear()
    assert app.invoke(Command(resume="second"), cfg) == {"x": 11, "v": "first"} and trace == []
    assert app.invoke(Command(resume="third"), {"configurable": {"thread_id": "t", "checkpoint_id": parked}}) == \
        {"x": 11, "v": "first"}
    assert trace == ["b", "c"]


@planted_unparked_passes
def test_guard_refuses_repeated_resumes_before_any_node_runs_sqlite(tmp_path):
    """Head resume after the end and a resume addressed to the consumed checkpoint are both refused, no node runs.

    Planted bugs caught: a guard that only checks for conflicts and lets a resume of a checkpoint with no recorded
    interrupt pass (the head resume would return instead of raising).  Also meant to catch, not planted (the claim
    would move into put_writes, which calls super()): claiming in put_writes (LangGraph runs it in a background
    thread while the node already runs: the trace would not be empty).
    """
    tmp_path = fresh(tmp_path)
    parked, outcomes, values = _repeated(sqlite_saver(tmp_path / "g.db"))
    assert outcomes[0][1] == [] and outcomes[1] == (parked, [])
    assert values == {"x": 11, "v": "first"}


@pytest.mark.postgres
@planted_unparked_passes
def test_guard_refuses_repeated_resumes_before_any_node_runs_postgres(pg_dsn, pg_schema):
    """The same on PostgreSQL (same planted bugs)."""
    from runners.backends import create_schema, drop_schema

    schema = create_schema(pg_dsn, "lgguard_")  # a planted rerun gets the same pg_schema: each run its own
    try:
        with pg_conn(pg_dsn, schema) as conn:
            saver = GuardedPostgresSaver(conn)
            saver.setup()
            parked, outcomes, values = _repeated(saver)
    finally:
        drop_schema(pg_dsn, schema)
    assert outcomes[0][1] == [] and outcomes[1] == (parked, [])


def test_guard_async_saver_refuses_the_second_resume(tmp_path):
    """ainvoke through GuardedAsyncSqliteSaver: the claim is taken in aget_tuple (planted bug: an async saver that
    only overrides the sync get_tuple, so ainvoke is never guarded)."""
    async def go(cls, path):
        trace: list[str] = []
        async with aiosqlite.connect(str(path)) as conn:
            saver = cls(conn)
            await saver.setup()
            app = flow_graph(trace).compile(checkpointer=saver)
            cfg = {"configurable": {"thread_id": "t"}}
            await app.ainvoke({"x": 0, "v": ""}, cfg)
            await app.ainvoke(Command(resume="first"), cfg)
            trace.clear()
            try:
                await app.ainvoke(Command(resume="second"), cfg)
            except ResumeRefused:
                return "refused", trace
            return "served", trace

    assert asyncio.run(go(GuardedAsyncSqliteSaver, tmp_path / "a.db")) == ("refused", [])

    class SyncOnly(GuardedAsyncSqliteSaver):  # planted: the stock aget_tuple, the claim only in the sync get_tuple
        aget_tuple = AsyncSqliteSaver.aget_tuple

    with pytest.raises(AssertionError):
        assert asyncio.run(go(SyncOnly, tmp_path / "planted.db")) == ("refused", [])


# ---------------------------------------------------------------------------------------------- k concurrent resumers
def _racer(backend: str, where: str, barrier, thread: str, out: str) -> None:
    fired = []
    if backend == "sqlite":
        saver = sqlite_saver(where)
    else:
        dsn, schema = where.split("|")
        saver = GuardedPostgresSaver(pg_conn(dsn, schema))
    app = flow_graph([], effect=lambda s: fired.append(s["v"])).compile(checkpointer=saver)
    barrier.wait()
    try:
        app.invoke(Command(resume=f"v{os.getpid()}"), {"configurable": {"thread_id": thread}})
        result = "served"
    except ResumeRefused:
        result = "refused"
    with open(out, "a") as fh:
        fh.write(f"{result} {len(fired)}\n")


def _race(backend: str, where: str, saver, tmp_path, k: int = 4):
    thread = "race"
    app = flow_graph([]).compile(checkpointer=saver)
    app.invoke({"x": 0, "v": ""}, {"configurable": {"thread_id": thread}})
    out = str(tmp_path / "outcomes.txt")
    barrier = Barrier(k, timeout=60)
    pids = [fork_start(_racer, (backend, where, barrier, thread, out)) for _ in range(k)]
    assert [wait(p) for p in pids] == [0] * k
    lines = sorted(open(out).read().split("\n")[:-1])
    return lines, app.get_state({"configurable": {"thread_id": thread}}).values


@pytest.mark.planted("driftlab_guard.consume_once:claim", "if (yield d.insert, row) is None:", "if True:")
def test_k_concurrent_resumers_one_served_sqlite(tmp_path):
    """4 forked processes resume one parked interrupt at a barrier: exactly one is served and fires c's effect.

    Planted bug caught: a claim that reads its own insert as a conflict (all four refused, none served).  A claim
    that does not check the insert's answer (ON CONFLICT DO NOTHING, then proceed) lets racers through, but one that
    reaches LangGraph after the first racer's resume finds the thread unparked and is refused anyway: this race
    catches it only when two racers overlap, so it is not claimed here (test_in_memory_saver_second_resume_refused_
    and_value_consumed_once in test_guard_any_saver.py plants it where it is always caught).
    """
    path = tmp_path / "race.db"
    lines, values = _race("sqlite", str(path), sqlite_saver(path), tmp_path)
    assert lines == ["refused 0"] * 3 + ["served 1"]
    assert values["x"] == 11


@pytest.mark.postgres
def test_k_concurrent_resumers_one_served_postgres(pg_dsn, pg_schema, tmp_path):
    """The same on PostgreSQL (INSERT ... ON CONFLICT DO NOTHING RETURNING in a transaction)."""
    with pg_conn(pg_dsn, pg_schema) as conn:
        saver = GuardedPostgresSaver(conn)
        saver.setup()
        lines, _ = _race("postgres", f"{pg_dsn}|{pg_schema}", saver, tmp_path)
    assert lines == ["refused 0"] * 3 + ["served 1"]


# ---------------------------------------------------------------------------------------------- recovery after SIGKILL
def _resume_then_die(path: str) -> None:
    def die(state):
        os.kill(os.getpid(), signal.SIGKILL)
    app = flow_graph([], effect=die).compile(checkpointer=sqlite_saver(path))
    app.invoke(Command(resume="claimed"), {"configurable": {"thread_id": "t"}}, durability="exit")


def _claim_then_die(path: str, claims_path: str) -> None:
    class DiesAfterItsClaim(SqliteClaims):
        def run(self, proc):
            result = SqliteClaims.run(self, proc)
            os.kill(os.getpid(), signal.SIGKILL)  # the claim committed, nothing of the resume written by LangGraph
            return result
    saver = guard(SqliteSaver(sqlite3.connect(path, check_same_thread=False)), DiesAfterItsClaim(claims_path))
    flow_graph([]).compile(checkpointer=saver).invoke(Command(resume="claimed"), {"configurable": {"thread_id": "t"}})


@pytest.mark.planted(PLAN, 'return Plan("replay", inv, ids)', "return None")  # the recovery does not read it
@pytest.mark.planted("driftlab_guard.consume_once:ConsumeOnce._guard_procedure",  # the claim keeps no value
                     "vtype, blob = self.serde.dumps_typed(plan.value)",
                     "vtype, blob = self.serde.dumps_typed(None)")
def test_recovery_after_sigkill_replays_the_claimed_value(tmp_path):
    """durability="exit": the resumer is SIGKILLed in c.  The recovery (invoke(None)) continues with the claimed
    value instead of parking again; a new resume is refused.  On the guarded SqliteSaver the claim's transaction
    also stores LangGraph's resume write (and the claimed resume is made durable), so the recovery finds the value
    in the checkpoints; the value kept in the claim itself is what a recovery needs on the any-saver guard
    (``guard(saver, claims)``, claims in a file of their own), whose resumer is here SIGKILLed right after its claim
    commits, before LangGraph wrote anything of the resume.

    Planted bug caught: a claim that does not store the value (or a recovery that does not read it) leaves the
    interrupt claimed and the run parked forever (liveness): the any-saver recovery would end parked (or with
    another value), not with v="claimed".
    """
    tmp = fresh(tmp_path)
    path = str(tmp / "crash.db")
    app = flow_graph([]).compile(checkpointer=sqlite_saver(path))
    cfg = {"configurable": {"thread_id": "t"}}
    app.invoke({"x": 0, "v": ""}, cfg)
    pid = fork_start(_resume_then_die, (path,))
    assert wait(pid) == -signal.SIGKILL
    recovering = flow_graph([]).compile(checkpointer=sqlite_saver(path))
    with pytest.raises(ResumeRefused):
        recovering.invoke(Command(resume="late"), cfg)
    assert recovering.invoke(None, cfg) == {"x": 11, "v": "claimed"}

    any_path, claims_path = str(tmp / "any.db"), str(tmp / "claims.db")

    def any_saver_app():
        return flow_graph([]).compile(checkpointer=guard(SqliteSaver(sqlite3.connect(any_path, check_same_thread=False)),
                                                         SqliteClaims(claims_path)))
    any_saver_app().invoke({"x": 0, "v": ""}, cfg)
    assert wait(fork_start(_claim_then_die, (any_path, claims_path))) == -signal.SIGKILL
    recovering = any_saver_app()
    with pytest.raises(ResumeRefused):
        recovering.invoke(Command(resume="late"), cfg)
    assert recovering.invoke(None, cfg) == {"x": 11, "v": "claimed"}


# ---------------------------------------------------------------------------------------------- schema validation
class TD(TypedDict):
    steps: int


@dataclass
class DC:
    steps: int = 0


class PM(BaseModel):
    steps: int = 0


planted_lax = pytest.mark.planted("driftlab_guard.schema:StateSchema.problems", "strict=True", "strict=False")


@planted_lax
@pytest.mark.planted("driftlab_guard.consume_once:ConsumeOnce._guard_check_writes", "if self.guard_schema is not None:",
                     "if False:")  # the pending writes not validated
@pytest.mark.parametrize("schema", [TD, DC, PM], ids=["typeddict", "dataclass", "pydantic"])
def test_schema_invalid_state_is_never_persisted(schema, tmp_path):
    """A node returns steps="7" (a str where the schema says int).  Stock LangGraph persists it for all three
    kinds of state; the guarded saver refuses it before anything is written.

    Planted bug caught: validating in pydantic's lax mode ("7" coerces to 7 and passes); validating only the
    checkpoint and not the pending writes (the write of task n is persisted first).
    """
    tmp_path = fresh(tmp_path)

    def n(s):
        return {"steps": "7"}

    def build(saver):
        g = StateGraph(schema)
        g.add_node("n", n)
        g.add_edge(START, "n"), g.add_edge("n", END)
        return g.compile(checkpointer=saver)

    start = {"steps": 0} if schema is TD else schema(steps=0)
    cfg = {"configurable": {"thread_id": "t"}}

    def persisted(saver) -> list:
        rows = saver.conn.execute("SELECT type, value FROM writes WHERE channel = 'steps'").fetchall()
        head = saver.get_tuple(cfg)
        return [saver.serde.loads_typed((t, v)) for t, v in rows] + (
            [head.checkpoint["channel_values"].get("steps")] if head else [])

    stock = SqliteSaver(sqlite3.connect(str(tmp_path / "stock.db"), check_same_thread=False))
    build(stock).invoke(start, cfg, durability="sync")
    assert "7" in persisted(stock)  # stock LangGraph persists the schema-invalid value

    guarded = GuardedSqliteSaver(sqlite3.connect(str(tmp_path / "guard.db"), check_same_thread=False), schema=schema)
    with pytest.raises(InvalidState):
        build(guarded).invoke(start, cfg, durability="sync")
    assert "7" not in persisted(guarded)


@planted_lax
def test_state_schema_is_strict():
    """StateSchema refuses a coercible value (planted bug: lax validation) and ignores LangGraph's own channels."""
    schema = StateSchema(TD)
    assert schema.problems([("steps", "7")]) and not schema.problems([("steps", 7), ("branch:to:n", None)])


# ---------------------------------------------------------------------------------------------- effects
def _effect_then_die(path: str, ledger_path: str) -> None:
    ledger = OnceLedger.sqlite(ledger_path)

    def charge(state):
        fire_once(ledger, "charge", lambda key: None)
        os.kill(os.getpid(), signal.SIGKILL)  # after the effect, before c's checkpoint
    app = flow_graph([], effect=charge).compile(checkpointer=sqlite_saver(path))
    app.invoke(Command(resume="ok"), {"configurable": {"thread_id": "t"}}, durability="exit")


CURRENT_TASK = "driftlab_guard.effects:current_task"


@pytest.mark.planted(CURRENT_TASK, "task = f\"{meta['langgraph_step']}:{meta['langgraph_node']}\"", "task = str(conf.get('checkpoint_ns', ''))")  # by namespace
@pytest.mark.planted(CURRENT_TASK, "task = f\"{meta['langgraph_step']}:{meta['langgraph_node']}\"", "task = str(meta.get('langgraph_checkpoint_ns', ''))")  # by task id
@pytest.mark.planted(CURRENT_TASK, "task = f\"{meta['langgraph_step']}:{meta['langgraph_node']}\"", "task = str(__import__('os').getpid())")  # per process
@pytest.mark.planted("driftlab_guard.effects:OnceLedger.once", "args = (str(thread_id), str(task_id), str(key))",
                     "args = (str(thread_id), '', str(key))")  # by effect key only
def test_effect_fires_once_across_a_sigkill_and_rerun(tmp_path):
    """c fires "charge" through fire_once, then is SIGKILLed; with durability="exit" nothing of the resume is in
    the checkpoints, so the recovery re-runs b and c from new checkpoints (new LangGraph task ids); c's "charge"
    is found done in the ledger and does not fire again.

    Planted bugs caught: a ledger keyed by a per-process id (the recovery's process would fire again), by effect
    key only (two tasks with one key would collapse: checked below), by LangGraph's task id or the task's
    checkpoint namespace.  These last two are caught by the key's form only ("<step>:c"): the guard makes a claimed
    resume durable, so the recovery re-runs c from the same checkpoint, with the same task id and namespace, and
    such a key would not fire again here (it would where c's checkpoint is not durable).
    """
    tmp_path = fresh(tmp_path)
    path, ledger_path = str(tmp_path / "cp.db"), str(tmp_path / "effects.db")
    OnceLedger.sqlite(ledger_path).setup()
    flow_graph([]).compile(checkpointer=sqlite_saver(path)).invoke({"x": 0, "v": ""}, {"configurable": {"thread_id": "t"}})
    assert wait(fork_start(_effect_then_die, (path, ledger_path))) == -signal.SIGKILL
    ledger = OnceLedger.sqlite(ledger_path)
    fired = []

    def charge(state):
        fired.append(fire_once(ledger, "charge", lambda key: key)[0])
    app = flow_graph([], effect=charge).compile(checkpointer=sqlite_saver(path))
    assert app.invoke(None, {"configurable": {"thread_id": "t"}})["v"] == "ok"
    assert fired == [False] and [r[2:] for r in ledger.fired("t")] == [("charge", "done")]
    assert ledger.fired("t")[0][1].endswith(":c") and "@" not in ledger.fired("t")[0][1]
    # two different tasks with the same effect key both fire
    assert ledger.once("t", "other-task", "charge")[0] is True


@pytest.mark.planted(PLAN, 'kind_of_refusal="no_checkpoint") if resuming else None',
                     'kind_of_refusal="no_checkpoint") if False else None')
def test_resume_of_a_thread_without_checkpoint_is_refused(tmp_path):
    """What a start killed before its first durable checkpoint leaves: a thread with no checkpoint.  Stock LangGraph
    runs the graph from an empty state with the resume value; the guard refuses before any node runs.

    Planted bug caught: a guard that lets every load without a checkpoint pass (tuple None -> no plan).
    """
    trace: list[str] = []
    app = flow_graph(trace).compile(checkpointer=sqlite_saver(fresh(tmp_path) / "empty.db"))
    with pytest.raises(ResumeRefused, match="no checkpoint"):
        app.invoke(Command(resume="yes"), {"configurable": {"thread_id": "never-started"}})
    assert trace == []
