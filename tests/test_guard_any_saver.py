"""The guard on any saver (issue 26 §2): ``driftlab_guard.guard(saver, claims)``, claims in SQLite, PostgreSQL or Redis.

Real LangGraph savers (the in-memory saver, ``SqliteSaver``, ``AsyncSqliteSaver``, ``PostgresSaver``), real claim
stores (a SQLite file, the machine's PostgreSQL, the machine's Redis 7 without modules), real forked processes
killed with SIGKILL and k real racing processes.  The same three promises on every saver x claim store: a second
resume is refused; k concurrent resumers are served once; a resumer killed after its claim is continued by
``invoke(None)`` with the claimed value, consumed once.  Each test names the planted bug it catches.
"""
from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import uuid
from pathlib import Path

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.types import Command  # noqa: E402

import driftlab_guard  # noqa: E402
from driftlab_guard import ResumeRefused, guard  # noqa: E402
from runners.processes import fork_start, wait  # noqa: E402
from test_driftlab_guard import flow_graph  # noqa: E402  (tests/ is on sys.path: pytest prepends it)


def redis_client():
    """The machine's Redis, or a skip that says why (a failure with DRIFTLAB_REQUIRE_REDIS=1, as in CI)."""
    redis = pytest.importorskip("redis")
    client = redis.Redis(host="127.0.0.1", port=int(os.environ.get("DRIFTLAB_REDIS_PORT", "6379")))
    try:
        client.ping()
    except redis.RedisError as exc:
        if os.environ.get("DRIFTLAB_REQUIRE_REDIS") == "1":
            pytest.fail(f"Redis at 127.0.0.1 unreachable and DRIFTLAB_REQUIRE_REDIS=1: {exc}")
        pytest.skip(f"Redis at 127.0.0.1 unreachable: {exc}")
    return client


def claims_of(kind: str, tmp: Path, prefix: str):
    """A fresh claim store of ``kind`` (each process opens its own connection to the same store)."""
    if kind == "sqlite":
        return driftlab_guard.SqliteClaims(str(tmp / "claims.db"))
    if kind == "redis":
        return driftlab_guard.RedisClaims(redis_client(), prefix=prefix)
    raise ValueError(kind)


def cleanup(kind: str, prefix: str) -> None:
    if kind == "redis":
        client = redis_client()
        for key in client.scan_iter(f"{prefix}:*"):
            client.delete(key)


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    prefix = f"driftlab_test_{uuid.uuid4().hex[:8]}"
    if request.param == "redis":
        redis_client()
    yield request.param, prefix
    cleanup(request.param, prefix)


def test_in_memory_saver_second_resume_refused_and_value_consumed_once(store, tmp_path):
    """The in-memory saver (tests' saver): one resume served, a second refused before any node runs.

    Planted bugs caught: a wrapper that forgets to claim (LangGraph would serve both: two values consumed); a
    claim store that inserts without checking (both claims succeed)."""
    kind, prefix = store
    consumed = str(tmp_path / "consumed.txt")
    app = flow_graph(consumed, None).compile(checkpointer=guard(InMemorySaver(), claims_of(kind, tmp_path, prefix)))
    cfg = {"configurable": {"thread_id": "t"}}
    app.invoke({"x": 0, "v": ""}, cfg)
    assert app.invoke(Command(resume="yes"), cfg) == {"x": 11, "v": "yes"}
    with pytest.raises(ResumeRefused) as refused:
        app.invoke(Command(resume="again"), cfg)
    assert refused.value.kind == "continued"
    assert Path(consumed).read_text().split() == ["yes"]


def _resume_file_saver(db: str, consumed: str, kind: str, tmp: Path, prefix: str, value, kill: bool):
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    app = flow_graph(consumed, os.getpid() if kill else None).compile(
        checkpointer=guard(saver, claims_of(kind, tmp, prefix)))
    return app.invoke(value, {"configurable": {"thread_id": "t"}})


def test_a_killed_claimant_is_continued_once_with_its_value(store, tmp_path):
    """SqliteSaver with the claim in another store: the resumer is SIGKILLed after consuming the value (node c);
    invoke(None) in a new process continues the run with the claimed value; a late resume is refused.

    Planted bug caught: a separate claim store that keeps no value (the recovery would park again and a resend
    would be served: two consumptions), or one whose resume write the wrapper skipped (LangGraph would never see
    the value)."""
    kind, prefix = store
    db, consumed = str(tmp_path / "cp.db"), str(tmp_path / "consumed.txt")
    _resume_file_saver(db, consumed, kind, tmp_path, prefix, {"x": 0, "v": ""}, False)
    proc = fork_start(_resume_file_saver, (db, consumed, kind, tmp_path, prefix, Command(resume="claimed"), True))
    assert wait(proc) == -signal.SIGKILL
    assert _resume_file_saver(db, consumed, kind, tmp_path, prefix, None, False) == {"x": 11, "v": "claimed"}
    with pytest.raises(ResumeRefused):
        _resume_file_saver(db, consumed, kind, tmp_path, prefix, Command(resume="late"), False)
    assert Path(consumed).read_text().split() == ["claimed"]


def _racer(db: str, consumed: str, kind: str, tmp: Path, prefix: str, i: int, answers: str) -> None:
    try:
        _resume_file_saver(db, consumed, kind, tmp, prefix, Command(resume=f"r{i}"), False)
        outcome = "served"
    except ResumeRefused:
        outcome = "refused"
    with open(answers, "a") as fh:
        fh.write(outcome + "\n")


def test_k_concurrent_resumers_are_served_once(store, tmp_path):
    """Four processes resume one parked interrupt at once through the wrapper: one is served, three refused, one
    value consumed.

    Planted bug caught: a check-then-insert claim (two racers both see no claim and both proceed)."""
    kind, prefix = store
    db, consumed, answers = str(tmp_path / "cp.db"), str(tmp_path / "consumed.txt"), str(tmp_path / "answers.txt")
    _resume_file_saver(db, consumed, kind, tmp_path, prefix, {"x": 0, "v": ""}, False)
    procs = [fork_start(_racer, (db, consumed, kind, tmp_path, prefix, i, answers)) for i in range(4)]
    assert [wait(p) for p in procs] == [0] * 4
    assert sorted(Path(answers).read_text().split()) == ["refused"] * 3 + ["served"]
    assert len(Path(consumed).read_text().split()) == 1


def test_async_saver_through_the_wrapper(store, tmp_path):
    """AsyncSqliteSaver wrapped: ainvoke claims, a second ainvoke is refused.

    Planted bug caught: the async path delegating aget_tuple unclaimed (the wrapper guarding only the sync API)."""
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    kind, prefix = store
    consumed = str(tmp_path / "consumed.txt")

    async def go():
        async with aiosqlite.connect(str(tmp_path / "a.db")) as conn:
            saver = AsyncSqliteSaver(conn)
            await saver.setup()
            app = flow_graph(consumed, None).compile(checkpointer=guard(saver, claims_of(kind, tmp_path, prefix)))
            cfg = {"configurable": {"thread_id": "t"}}
            await app.ainvoke({"x": 0, "v": ""}, cfg)
            assert await app.ainvoke(Command(resume="yes"), cfg) == {"x": 11, "v": "yes"}
            with pytest.raises(ResumeRefused):
                await app.ainvoke(Command(resume="again"), cfg)
    asyncio.run(go())
    assert Path(consumed).read_text().split() == ["yes"]


@pytest.mark.postgres
def test_postgres_saver_with_claims_in_postgres(pg_dsn, tmp_path):
    """PostgresSaver wrapped with PostgresClaims in another schema: one served, a second refused.

    Planted bug caught: PostgresClaims running the claim outside a transaction (a conflict would leave half a
    claim)."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import sql
    from psycopg.rows import dict_row

    from runners.backends import create_schema, drop_schema

    schema = create_schema(pg_dsn, "dgany_")
    consumed = str(tmp_path / "consumed.txt")
    try:
        with psycopg.connect(pg_dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn, \
                psycopg.connect(pg_dsn, autocommit=True) as claims_conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            saver = PostgresSaver(conn)
            saver.setup()
            app = flow_graph(consumed, None).compile(checkpointer=guard(saver, driftlab_guard.PostgresClaims(
                claims_conn, schema=schema)))
            cfg = {"configurable": {"thread_id": "t"}}
            app.invoke({"x": 0, "v": ""}, cfg)
            assert app.invoke(Command(resume="yes"), cfg) == {"x": 11, "v": "yes"}
            with pytest.raises(ResumeRefused):
                app.invoke(Command(resume="again"), cfg)
    finally:
        drop_schema(pg_dsn, schema)
    assert Path(consumed).read_text().split() == ["yes"]
