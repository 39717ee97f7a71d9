"""What driftlab_guard costs LangGraph: one checkpointed step and one resume, stock vs layer 1 vs all three layers.

Serves issue 15's overhead claim (aim: the full stack at most 1.2x stock per
step and per resume, on SQLite and PostgreSQL).  Three stacks, timed in one
session, interleaved (repetition-major, the order alternating):

- ``stock``: LangGraph's own saver; the nodes resolve their two resources
  (a prompt, a model) live, as an unguarded application does;
- ``guard``: layer 1 alone, the guarded saver with schema validation;
- ``full``: layers 1 + 2 + 3: the guarded saver with schema validation, the
  resources resolved through the run's manifest (pinned in the checkpoint),
  and the parking node's three premises declared (``Revalidator.park``) and
  re-checked on resume (one premise field changed while parked, so the
  revalidation reads and evaluates).

Backends: a real SQLite file (WAL, LangGraph's default synchronous=FULL), the
same on tmpfs (``/dev/shm``: CPU cost without fsync noise), PostgreSQL when
reachable.  Operations, ``durability="sync"``:

- ``step``: ``invoke`` of a one-node graph on a new thread;
- ``resume``: ``invoke(Command(resume=v))`` of a thread parked at an interrupt
  (parked by ``setup``, outside the timed region).

``analysis.resume.langgraph_findings.overhead_ratios`` turns the JSON into the
median over repetitions of each repetition's stack / stock ratio, per backend
and operation.  Run: ``pytest benchmarks/resume/bench_langgraph_guard.py
--benchmark-json out.json``.
"""
from __future__ import annotations

import itertools
import shutil
import sqlite3
import tempfile
import uuid
from pathlib import Path
from typing import Annotated, TypedDict

import pytest

from driftlab_guard import (REPLAN, DictSource, Pins, Premise, Resources, Revalidator, guarded)
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from runners.backends import create_schema, drop_schema

STACKS = ("stock", "guard", "full")
BACKENDS = ("sqlite", "sqlite-tmpfs", "postgres")
TMPFS = Path("/dev/shm")
ALIASES = ("prompt:refund", "model:chat")

RESOURCES = Resources(contracts=["prompt:refund@1 requires model:chat@1"])
RESOURCES.deploy("prompt:refund", 1, "Refund politely.")
RESOURCES.deploy("model:chat", 1, "chat-v1")
PINS = Pins(RESOURCES)
SOURCE = DictSource({"order.amount": 30, "policy.max_refund": 50, "order.note": ""})
PREMISES = [
    Premise("amount_unchanged", ("order.amount",), lambda now, then: now == then, REPLAN),
    Premise("within_policy", ("order.amount", "policy.max_refund"),
            lambda now, then: now["order.amount"] <= now["policy.max_refund"]),
    Premise("note", ("order.note",), lambda now, then: True),
]
REVALIDATOR = Revalidator(SOURCE, PREMISES)


class State(TypedDict, total=False):
    n: int
    v: str
    out: str


class FullState(TypedDict, total=False):
    n: int
    v: str
    out: str
    pins: Annotated[dict, PINS.merge]
    premises: dict
    verdict: str


def _live(state) -> dict:
    return {"out": "|".join(str(RESOURCES.get(a, RESOURCES.live(a))) for a in ALIASES)}


def _pinned(state) -> dict:
    b = PINS.bind(state)
    return {"out": "|".join(str(b.resolve(a).value) for a in ALIASES), **b.update()}


def _graph(stack: str, park: bool):
    full = stack == "full"
    resolve = _pinned if full else _live

    def decide(s):
        out = {"n": s.get("n", 0) + 1, **resolve(s)}
        if full and park:
            out["premises"] = REVALIDATOR.park(PREMISES)
        return out

    def approve(s):
        v = interrupt("ok?")
        out = {"v": v, **resolve(s)}
        if full:
            out["verdict"] = REVALIDATOR.revalidate(s["premises"]).outcome.name
        return out

    g = StateGraph(FullState if full else State)
    g.add_node("decide", decide)
    g.add_edge(START, "decide")
    if park:
        g.add_node("approve", approve)
        g.add_edge("decide", "approve"), g.add_edge("approve", END)
    else:
        g.add_edge("decide", END)
    return g


def _dsn() -> str | None:
    try:
        import psycopg

        from runners.backends import postgres_dsn

        with psycopg.connect(postgres_dsn()) as conn:
            conn.execute("select 1")
        return postgres_dsn()
    except Exception:  # noqa: BLE001 - unreachable: the postgres points are skipped
        return None


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """One database per (stack, backend), shared by the module's points; Postgres schemas dropped at the end."""
    out, cleanup = {}, []
    dsn = _dsn()
    shm = Path(tempfile.mkdtemp(prefix="bench_lg_", dir=TMPFS)) if TMPFS.is_dir() else None
    for stack, backend in itertools.product(STACKS, BACKENDS):
        if backend == "sqlite":
            conn = sqlite3.connect(str(tmp_path_factory.mktemp("lg") / f"{stack}.db"), check_same_thread=False)
            cls = SqliteSaver
        elif backend == "sqlite-tmpfs":
            if shm is None:
                continue
            conn = sqlite3.connect(str(shm / f"{stack}.db"), check_same_thread=False)
            cls = SqliteSaver
        elif dsn is None:
            continue
        else:
            import psycopg
            from psycopg.rows import dict_row

            schema = create_schema(dsn, f"bench_lg_{stack}_")
            cleanup.append(schema)
            conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row,
                                   options=f"-c search_path={schema}")
            cls = PostgresSaver
        saver = cls(conn) if stack == "stock" else guarded(cls)(conn, schema=FullState if stack == "full" else State)
        saver.setup()
        out[(stack, backend)] = (_graph(stack, False).compile(checkpointer=saver),
                                 _graph(stack, True).compile(checkpointer=saver), conn)
    yield out
    for *_, conn in out.values():
        conn.close()
    if shm is not None:
        shutil.rmtree(shm, ignore_errors=True)
    for schema in cleanup:
        drop_schema(dsn, schema)


REPETITIONS, ROUNDS = 15, 50
POINTS = [(rep, backend, op, stack) for rep in range(REPETITIONS) for backend in BACKENDS
          for op in ("step", "resume") for stack in (STACKS if rep % 2 == 0 else STACKS[::-1])]


@pytest.mark.parametrize("point", POINTS, ids=[f"{b}-{o}-{s}-r{r}" for r, b, o, s in POINTS])
def test_guard_overhead(benchmark, point, stores):
    rep, backend, op, stack = point
    if (stack, backend) not in stores:
        pytest.skip(f"{backend} not reachable")
    step_app, park_app, _conn = stores[(stack, backend)]
    benchmark.group = f"{backend}-{op}"
    benchmark.extra_info.update({"saver": stack, "backend": backend, "operation": op, "repetition": rep})

    time_operation(benchmark, op, step_app, park_app, ROUNDS,
                   # a premise field changes while parked
                   while_parked=lambda cfg: SOURCE.write("order.note", cfg["configurable"]["thread_id"]))


def time_operation(benchmark, op: str, step_app, park_app, rounds: int, while_parked=None):
    """Time one checkpointed step (``op == "step"``) or one resume of a freshly parked run (``"resume"``), each
    round on a new thread; returns the last resume's output (shared with ``bench_remit_overhead.py``)."""
    def fresh():
        return {"configurable": {"thread_id": uuid.uuid4().hex}}

    if op == "step":
        return benchmark.pedantic(lambda cfg: step_app.invoke({"n": 0, "v": ""}, cfg, durability="sync"),
                                  setup=lambda: ((fresh(),), {}), rounds=rounds, warmup_rounds=3)

    def parked():
        cfg = fresh()
        park_app.invoke({"n": 0, "v": ""}, cfg, durability="sync")
        if while_parked is not None:
            while_parked(cfg)
        return (cfg,), {}

    return benchmark.pedantic(lambda cfg: park_app.invoke(Command(resume="yes"), cfg, durability="sync"),
                              setup=parked, rounds=rounds, warmup_rounds=3)
