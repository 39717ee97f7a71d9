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
from test_driftlab_guard import flow_graph, fresh  # noqa: E402  (tests/ is on sys.path: pytest prepends it)

PLAN = "driftlab_guard.consume_once:ConsumeOnce._guard_plan"
planted_never_claims = pytest.mark.planted(PLAN, "if inv is None or inv.loop in self._guard_seen:", "if True:")
planted_unchecked_insert = pytest.mark.planted("driftlab_guard.consume_once:claim",  # both claims succeed
                                               "if (yield d.insert, row) is None:",
                                               "if (yield d.insert, row) is None and False:")
planted_keeps_no_value = pytest.mark.planted("driftlab_guard.consume_once:ConsumeOnce._guard_procedure",
                                             "vtype, blob = self.serde.dumps_typed(plan.value)",
                                             "vtype, blob = self.serde.dumps_typed(None)")


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


@planted_never_claims
@planted_unchecked_insert
def test_in_memory_saver_second_resume_refused_and_value_consumed_once(store, tmp_path):
    """The in-memory saver (tests' saver): one resume served, a second refused before any node runs, at the head
    and addressed to the parked checkpoint (whose interrupt the second resume then tries to claim again).

    Planted bugs caught: a wrapper that forgets to claim (LangGraph would serve both: two values consumed); a
    claim store that inserts without checking (both claims succeed: the addressed resume would re-run b)."""
    kind, prefix = store
    tmp_path = fresh(tmp_path)
    consumed = str(tmp_path / "consumed.txt")
    app = flow_graph(consumed, None).compile(checkpointer=guard(InMemorySaver(), claims_of(kind, tmp_path, prefix)))
    cfg = {"configurable": {"thread_id": "t"}}
    app.invoke({"x": 0, "v": ""}, cfg)
    parked = app.get_state(cfg).config["configurable"]["checkpoint_id"]
    assert app.invoke(Command(resume="yes"), cfg) == {"x": 11, "v": "yes"}
    with pytest.raises(ResumeRefused) as refused:
        app.invoke(Command(resume="again"), cfg)
    assert refused.value.kind == "continued"
    with pytest.raises(ResumeRefused) as addressed:
        app.invoke(Command(resume="again"), {"configurable": {"thread_id": "t", "checkpoint_id": parked}})
    assert addressed.value.kind == "consumed"
    assert Path(consumed).read_text().split() == ["yes"]


def _resume_file_saver(db: str, consumed: str, kind: str, tmp: Path, prefix: str, value, kill: bool | str):
    """``kill``: True (SIGKILL in node c), "claim" (right after the claim store ran its first procedure), False."""
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    claims = claims_of(kind, tmp, prefix)
    if kill == "claim":
        run = claims.run

        def run_then_die(proc):
            result = run(proc)
            os.kill(os.getpid(), signal.SIGKILL)  # the claim is in the store, nothing of the resume in the saver
            return result
        claims.run = run_then_die
    app = flow_graph(consumed, os.getpid() if kill is True else None).compile(checkpointer=guard(saver, claims))
    return app.invoke(value, {"configurable": {"thread_id": "t"}})


@pytest.mark.parametrize("kill_at", [True, pytest.param("claim", marks=planted_keeps_no_value)],
                         ids=["in-c", "after-the-claim"])
def test_a_killed_claimant_is_continued_once_with_its_value(store, kill_at, tmp_path):
    """SqliteSaver with the claim in another store: the resumer is SIGKILLed after consuming the value (node c), or
    right after its claim is in the store (before LangGraph wrote anything of the resume); invoke(None) continues
    the run with the claimed value; a late resume is refused.

    Planted bug caught: a separate claim store that keeps no value (the recovery after the claim would park again
    and a resend would be served: two consumptions).  Killed in c, the claimed resume was made durable (b's write
    and checkpoint are in the saver), so the recovery needs no value from the store: that row alone cannot tell."""
    kind, prefix = store
    tmp_path = fresh(tmp_path)
    db, consumed = str(tmp_path / "cp.db"), str(tmp_path / "consumed.txt")
    _resume_file_saver(db, consumed, kind, tmp_path, prefix, {"x": 0, "v": ""}, False)
    proc = fork_start(_resume_file_saver, (db, consumed, kind, tmp_path, prefix, Command(resume="claimed"), kill_at))
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


@pytest.mark.planted("driftlab_guard.consume_once:claim", "if (yield d.insert, row) is None:", "if True:")
def test_k_concurrent_resumers_are_served_once(store, tmp_path):
    """Four processes resume one parked interrupt at once through the wrapper: one is served, three refused, one
    value consumed.

    Planted bug caught: a claim that reads its own insert as a conflict (every racer refused, none served).  Claims
    that let more than one racer through (a check-then-insert claim, or an insert whose answer is not checked) fail
    this test only in the runs where a second racer gets past the claim before the first one's resume made the
    thread unparked (it is refused then anyway), so they are not claimed here."""
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

    from driftlab_guard.claims import GuardedSaver, _Delegate

    kind, prefix = store

    def second_resume(wrapper, where: Path, prefix: str) -> None:
        consumed = str(where / "consumed.txt")

        async def go():
            async with aiosqlite.connect(str(where / "a.db")) as conn:
                saver = AsyncSqliteSaver(conn)
                await saver.setup()
                app = flow_graph(consumed, None).compile(checkpointer=wrapper(saver, claims_of(kind, where, prefix)))
                cfg = {"configurable": {"thread_id": "t"}}
                await app.ainvoke({"x": 0, "v": ""}, cfg)
                assert await app.ainvoke(Command(resume="yes"), cfg) == {"x": 11, "v": "yes"}
                try:
                    await app.ainvoke(Command(resume="again"), cfg)
                except ResumeRefused:
                    return "refused"
                return "served"
        assert asyncio.run(go()) == "refused"
        assert Path(consumed).read_text().split() == ["yes"]

    second_resume(GuardedSaver, fresh(tmp_path), prefix)

    class SyncOnly(GuardedSaver):  # planted: aget_tuple delegated unclaimed, only the sync get_tuple guarded
        aget_tuple = _Delegate.aget_tuple

    with pytest.raises(AssertionError):
        second_resume(SyncOnly, fresh(tmp_path), f"{prefix}:planted")


@pytest.mark.postgres
@pytest.mark.planted("driftlab_guard.claims:PostgresClaims.run", "cur = self.conn.execute(sql, params)",
                     'cur = self.conn.execute("SELECT 1" if sql in ("BEGIN", "COMMIT", "ROLLBACK") else sql, params)')
def test_postgres_saver_with_claims_in_postgres(pg_dsn, tmp_path):
    """PostgresSaver wrapped with PostgresClaims in another schema: one served, a second refused; then a claim of
    two interrupts whose second is already claimed is refused whole (its first row is not left behind).

    Planted bug caught: PostgresClaims running the claim outside a transaction (a conflict would leave half a
    claim: the first interrupt claimed by a resume that was refused)."""
    from driftlab_guard.consume_once import claim

    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import sql
    from psycopg.rows import dict_row

    from runners.backends import create_schema, drop_schema

    schema = create_schema(pg_dsn, "dgany_")
    consumed = str(fresh(tmp_path) / "consumed.txt")
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
            store = driftlab_guard.PostgresClaims(claims_conn, schema=schema)

            def row(iid):  # (thread, namespace, interrupt, checkpoint, claimant, value type, value, claimed at)
                return ("two", "", iid, "cp", "first", "str", b"v", 0.0)
            assert store.run(claim(store.dialect, [row("b")], None)) is None
            assert store.run(claim(store.dialect, [row("a"), row("b")], None)) == ("first", "cp")  # b: a conflict
            assert claims_conn.execute("SELECT interrupt_id FROM driftlab_guard_claims WHERE thread_id = 'two'"
                                       ).fetchall() == [("b",)]
    finally:
        drop_schema(pg_dsn, schema)
    assert Path(consumed).read_text().split() == ["yes"]
