"""What each guard costs LangGraph per step and per resume: stock saver, driftlab's guard, REMIT (gate on).

Serves issue 14 §3 ("what each costs per step and per resume as a ratio to the
stock saver, measured in one benchmark session"; aim: the guard at no more
than REMIT's overhead).  The three savers are timed in one pytest-benchmark
session, interleaved (repetition-major, the order rotated per repetition), on
a real SQLite file and on PostgreSQL when it is reachable:

- ``step``: ``invoke`` of a one-node graph on a new thread (the input
  checkpoint, the node's writes, its checkpoint), ``durability="sync"``;
- ``resume``: ``invoke(Command(resume=v))`` of a thread parked at an interrupt
  (parked by ``setup``, outside the timed region).

Savers: ``stock`` = LangGraph's ``SqliteSaver`` / ``PostgresSaver``;
``guard`` = driftlab_guard's guarded savers with the state schema (the guard's
package, ``guard/``); ``remit`` =
``remit.wrap(<stock>, conn, validator=<strict schema check>,
cross_process_gate=True)``, as REMIT's README configures it for concurrent
resumers.  ``resume_overhead`` turns the JSON into ratios to ``stock``.
Run: ``pytest benchmarks/resume/bench_remit_overhead.py --benchmark-json out.json``.
"""
from __future__ import annotations

import itertools
import os
import sqlite3
import tempfile
from typing import TypedDict

import pytest

remit = pytest.importorskip("remit")

from driftlab_guard import GuardedPostgresSaver, GuardedSqliteSaver  # noqa: E402
from langgraph.checkpoint.postgres import PostgresSaver  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import interrupt  # noqa: E402

from mechanisms.resume.langgraph_remit import schema_validator  # noqa: E402
from benchmarks.resume.bench_langgraph_guard import time_operation  # noqa: E402
from runners.backends import create_schema, drop_schema  # noqa: E402

KINDS = ("stock", "guard", "remit")
BACKENDS = ("sqlite", "postgres")
REPETITIONS = int(os.environ.get("DRIFTLAB_OVERHEAD_REPETITIONS", "5"))
ROUNDS = int(os.environ.get("DRIFTLAB_OVERHEAD_ROUNDS", "50"))


class State(TypedDict):
    n: int
    v: str


def _graph(park: bool):
    def node(s):
        return {"n": s["n"] + 1, "v": interrupt("ok?") if park else s["v"]}

    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    return g


def _saver(kind: str, backend: str, conn):
    stock = SqliteSaver if backend == "sqlite" else PostgresSaver
    if kind == "stock":
        return stock(conn)
    if kind == "guard":
        return (GuardedSqliteSaver if backend == "sqlite" else GuardedPostgresSaver)(conn, schema=State)
    return remit.wrap(stock, conn, validator=schema_validator(State), cross_process_gate=True)


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
def stores():
    out, schemas = {}, []
    dsn = _dsn()
    folder = tempfile.mkdtemp(prefix="bench_remit_")
    for kind, backend in itertools.product(KINDS, BACKENDS):
        if backend == "sqlite":
            conn = sqlite3.connect(os.path.join(folder, f"{kind}.db"), check_same_thread=False)
        elif dsn is None:
            continue
        else:
            import psycopg
            from psycopg.rows import dict_row

            schema = create_schema(dsn, f"bench_remit_{kind}_")
            schemas.append(schema)
            conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row,
                                   options=f"-c search_path={schema}")
        saver = _saver(kind, backend, conn)
        saver.setup()
        out[(kind, backend)] = (_graph(False).compile(checkpointer=saver), _graph(True).compile(checkpointer=saver),
                                conn)
    yield out
    for *_, conn in out.values():
        conn.close()
    for schema in schemas:
        drop_schema(dsn, schema)


POINTS = [(rep, backend, op, kind) for rep in range(REPETITIONS) for backend in BACKENDS for op in ("step", "resume")
          for kind in KINDS[rep % 3:] + KINDS[:rep % 3]]


@pytest.mark.parametrize("point", POINTS, ids=[f"{b}-{o}-{k}-r{r}" for r, b, o, k in POINTS])
def test_overhead(benchmark, point, stores):
    rep, backend, op, kind = point
    if (kind, backend) not in stores:
        pytest.skip(f"{backend} not reachable")
    step_app, park_app, _conn = stores[(kind, backend)]
    benchmark.group = f"{backend}-{op}"
    benchmark.extra_info.update({"saver": kind, "backend": backend, "operation": op, "repetition": rep})

    out = time_operation(benchmark, op, step_app, park_app, ROUNDS)
    if op == "step":
        return
    assert out["v"] == "yes"  # the resume was served (a refused one would time an error path)
