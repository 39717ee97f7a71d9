"""driftlab_guard as a package: installs alone, one LangGraph coupling, CO in every durability mode, layers 2 and 3.

Real LangGraph, real SQLite files and PostgreSQL schemas, real forked processes
killed with SIGKILL, a real fresh virtual environment.  Each test names the
planted bug it catches.  (The consume-once conformance kit, k concurrent
resumers, schema validation and effects are in ``tests/test_langgraph_guard.py``.)
"""
from __future__ import annotations

import ast
import asyncio
import importlib.metadata
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TypedDict

import pytest

pytest.importorskip("langgraph")

import aiosqlite  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402

import driftlab_guard  # noqa: E402
from driftlab_guard import (BLOCK, KEEP, REFRESH, REPLAN, ContractViolation, DictSource, GuardedAsyncSqliteSaver,  # noqa: E402
                        GuardedSqliteSaver, PinConflict, Pins, PinsNotInherited, Premise, Resources, ResumeRefused,
                        Revalidator, StaleDecision)
from driftlab_guard._pregel import loading_invocation  # noqa: E402
from planting import planted  # noqa: E402
from runners.processes import fork_start, wait  # noqa: E402

GUARD = Path(__file__).resolve().parents[1] / "guard"
LAB_PACKAGES = {"vocabulary", "scenarios", "mechanisms", "faults", "runners", "analysis", "figures", "benchmarks"}


def fresh(tmp_path: Path) -> Path:
    """A new directory under ``tmp_path``: one per call where a test runs a real saver and its planted variant side
    by side (each rerun of tests/planting.py gets a fresh ``tmp_path`` of its own)."""
    return Path(tempfile.mkdtemp(dir=tmp_path))


# ---------------------------------------------------------------------------------------------- the package alone
def test_package_imports_nothing_of_the_lab():
    """Planted bug caught: a driftlab_guard module importing the lab (``from vocabulary...``), which a user who
    installed only driftlab_guard does not have."""
    def check(texts: dict[str, str]) -> None:
        found = []
        for name, text in sorted(texts.items()):
            for node in ast.walk(ast.parse(text)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
                found += [(name, n) for n in names if n.split(".")[0] in LAB_PACKAGES]
        assert found == []

    texts = {p.name: p.read_text() for p in (GUARD / "driftlab_guard").glob("*.py")}
    check(texts)
    planted_texts = {**texts, "revalidation.py": texts["revalidation.py"].replace(  # the lab imported inside a function
        "    def require(self, parked", "    def require(self, parked_=None):\n        from vocabulary import words\n\n"
        "    def require_(self, parked", 1)}
    with pytest.raises(AssertionError):
        check(planted_texts)


def test_the_four_savers_share_one_claim():
    """The sync savers share one get_tuple, the async ones one aget_tuple, and the claim's statements are written
    once (consume_once.py); each saver only says how it runs a statement.

    Planted bug caught: a saver with its own copy of the claim (the near-copies the package replaced, which drift:
    one of them checking the insert's row count and another not)."""
    from driftlab_guard.consume_once import AsyncGuard, SyncGuard

    pg = pytest.importorskip("driftlab_guard.postgres")
    assert GuardedSqliteSaver.get_tuple is pg.GuardedPostgresSaver.get_tuple is SyncGuard.get_tuple
    assert GuardedAsyncSqliteSaver.aget_tuple is pg.GuardedAsyncPostgresSaver.aget_tuple is AsyncGuard.aget_tuple

    def one_claim(texts: dict[str, str]) -> None:
        assert [name for name, text in texts.items() if "INSERT INTO driftlab_guard_claims" in text] == \
            ["consume_once.py"]

    texts = {p.name: p.read_text() for p in (GUARD / "driftlab_guard").glob("*.py")}
    one_claim(texts)
    insert = texts["consume_once.py"].split('insert: str = (', 1)[1].split(")\n", 1)[0]
    with pytest.raises(AssertionError):  # planted: sqlite.py with its own copy of the claim's insert
        one_claim({**texts, "sqlite.py": texts["sqlite.py"] + f"\n\nOWN_INSERT = ({insert})\n"})


def _uv(*args: str, offline: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PYTHON")}
    return subprocess.run(["uv", *args, *(["--offline"] if offline else [])], capture_output=True, text=True,
                          env=env, timeout=300)


def _pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=3).close()
        return True
    except OSError:
        return False


@pytest.mark.planted("driftlab_guard.claims:guard",  # in the fresh venv: an API the README's layer-1 snippet misses
                     "claims: ClaimStore, *,", "*, claims: ClaimStore,")
def test_pip_install_guard_alone_and_the_readme_snippets_run(tmp_path):
    """A fresh venv with only LangGraph and its SQLite saver (the lab's versions, from uv's cache when it has
    them), then ``uv pip install ./guard``: every README snippet runs, and importing driftlab_guard loads neither
    the PostgreSQL extra nor anything of the lab.

    Planted bugs caught: a dependency missing from guard/pyproject.toml (psycopg imported at import time), a
    module left out of the package, a README snippet that no longer runs against the API (planted: guard()'s claims
    made keyword-only, the README passes them by position).  Skipped only when uv is missing, or when uv's cache
    cannot satisfy the install and PyPI is unreachable.
    """
    if shutil.which("uv") is None:
        pytest.skip("uv is not installed (it builds the fresh venv)")
    venv = tmp_path / "venv"
    python = str(venv / "bin" / "python")
    assert _uv("venv", "-q", "-p", sys.executable, str(venv), offline=False).returncode == 0
    pins = [f"{p}=={importlib.metadata.version(p)}" for p in ("langgraph", "langgraph-checkpoint-sqlite")]
    for offline in (True, False):
        lg = _uv("pip", "install", "-q", "--python", python, *pins, offline=offline)
        guard = _uv("pip", "install", "-q", "--python", python, str(GUARD), offline=offline) if lg.returncode == 0 \
            else lg
        if guard.returncode == 0:
            break
        if offline and not _pypi_reachable():
            pytest.skip(f"no network and uv's cache cannot build the venv: {guard.stderr.strip().splitlines()[-1]}")
    assert guard.returncode == 0, guard.stderr
    snippets = re.findall(r"```python\n(.*?)```", (GUARD / "README.md").read_text(), re.S)
    assert len(snippets) == 4  # one per layer, and layer 1 on any saver
    # one interpreter (LangGraph takes seconds to import): the probe, then each snippet in its own namespace
    script = ("import sys, driftlab_guard\n"
              f"lab = {sorted(LAB_PACKAGES)!r}\n"
              "assert 'driftlab_guard.postgres' not in sys.modules and 'psycopg' not in sys.modules, 'extra imported'\n"
              "assert not [m for m in sys.modules if m.split('.')[0] in lab], 'the lab was imported'\n"
              f"for i, code in enumerate({snippets!r}):\n"
              "    print('snippet', i + 1, flush=True)\n"
              "    exec(compile(code, f'README snippet {i + 1}', 'exec'), {'__name__': '__main__'})\n")
    ran = subprocess.run([python, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr


# ---------------------------------------------------------------------------------------------- the coupling
class Flow(TypedDict):
    x: int
    v: str


@pytest.mark.planted("driftlab_guard._pregel:loading_invocation", "sys._getframe(2)", "sys._getframe(3)")
@pytest.mark.planted("driftlab_guard._pregel:loading_invocation",
                     "return None if owner.is_nested else Invocation(owner)", "return Invocation(owner)")
def test_loading_invocation_reads_the_input_of_the_loop_that_loads(tmp_path):
    """The one coupling to LangGraph's internals: inside the saver's load, the outer loop and its input are found
    for invoke and ainvoke, and not for get_state (no loop) or a subgraph's load (nested loop).

    Planted bugs caught (or a LangGraph release that moved the load): a frame walk off by one frame (it misses the
    loop's frame), so every resume passes unclaimed (the input found would be none); a walk that returns the
    nested loop of a subgraph's load (its input taken for the invocation's)."""
    none = "<no loop found>"
    loads: list[tuple[str, str, object]] = []  # (sync | async, the load's namespace, the input found)

    class Probe(InMemorySaver):
        def get_tuple(self, config):
            inv = loading_invocation()
            loads.append(("sync", config["configurable"].get("checkpoint_ns", "").split(":")[0],
                          inv.input if inv else none))
            return super().get_tuple(config)

        async def aget_tuple(self, config):
            inv = loading_invocation()
            loads.append(("async", config["configurable"].get("checkpoint_ns", "").split(":")[0],
                          inv.input if inv else none))
            return await super().aget_tuple(config)

    def n(s):
        return {"x": s["x"] + 1}

    sub = StateGraph(Flow)
    sub.add_node("m", n)
    sub.add_edge(START, "m"), sub.add_edge("m", END)
    g = StateGraph(Flow)
    g.add_node("n", n), g.add_node("child", sub.compile())
    g.add_edge(START, "n"), g.add_edge("n", "child"), g.add_edge("child", END)
    app = g.compile(checkpointer=Probe())
    cfg = {"configurable": {"thread_id": "t"}}
    first, again = {"x": 1, "v": ""}, {"x": 5, "v": ""}
    app.invoke(first, cfg)
    assert loads == [("sync", "", first), ("sync", "child", none)]  # the subgraph's load: a nested loop
    loads.clear()
    asyncio.run(app.ainvoke(again, {"configurable": {"thread_id": "a"}}))
    assert [(ns, found) for kind, ns, found in loads if kind == "async"] == [("", again), ("child", none)]
    loads.clear()
    app.get_state(cfg)  # a load with no loop on the stack
    assert loads == [("sync", "", none)]
    loads.clear()
    cmd = Command(resume="r")
    try:
        app.invoke(cmd, cfg)
    except Exception:  # noqa: BLE001 - stock LangGraph may refuse a resume with nothing parked; the load came first
        pass
    assert loads[0][:2] == ("sync", "") and loads[0][2] is cmd


# ---------------------------------------------------------------------------------------------- the claim's key
class Two(TypedDict):
    first: str
    second: str


def two_interrupts():
    def ask1(s):
        return {"first": interrupt("first?")}

    def ask2(s):
        return {"second": interrupt("second?")}

    g = StateGraph(Two)
    g.add_node("ask1", ask1), g.add_node("ask2", ask2)
    g.add_edge(START, "ask1"), g.add_edge("ask1", "ask2"), g.add_edge("ask2", END)
    return g


@pytest.mark.planted("driftlab_guard.consume_once:ConsumeOnce._guard_procedure", "(thread, ns, iid, cp,",
                     "(thread, ns, \"\", cp,")  # the claim keyed by thread and namespace only
def test_each_interrupt_of_a_thread_is_claimed_on_its_own(tmp_path):
    """Two interrupts, one after the other, on one thread: each is served once and refused after.

    Planted bug caught: a claim keyed without the interrupt id (by thread and namespace only, or by thread and
    node), which refuses the second, never consumed, interrupt as "already consumed"."""
    tmp_path = fresh(tmp_path)
    saver = GuardedSqliteSaver(sqlite3.connect(str(tmp_path / "two.db"), check_same_thread=False))
    app = two_interrupts().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t"}}
    app.invoke({"first": "", "second": ""}, cfg)
    app.invoke(Command(resume="a"), cfg)
    with pytest.raises(ResumeRefused):
        app.invoke(Command(resume="a-again"), {"configurable": {"thread_id": "t", "checkpoint_id": saver.list(
            cfg, limit=3).__next__().parent_config["configurable"]["checkpoint_id"]}})
    assert app.invoke(Command(resume="b"), cfg) == {"first": "a", "second": "b"}
    with pytest.raises(ResumeRefused):
        app.invoke(Command(resume="c"), cfg)
    rows = saver.conn.execute("SELECT interrupt_id FROM driftlab_guard_claims WHERE thread_id = 't'").fetchall()
    assert len({r[0] for r in rows}) == 2


def test_a_resume_value_outside_the_resume_schema_is_refused_before_its_claim(tmp_path):
    """A resume value that fails the resume schema is refused (InvalidState) before the claim is taken: the
    interrupt stays parked, so the correct approval sent afterwards is served and the run finishes.

    Planted bug caught: validating the value after the claim (or only when the node's write is persisted): the
    bad value uses up the approval and the correct one is refused as "already consumed", the run never ends."""
    _resume_schema_checked_before_the_claim(fresh(tmp_path))
    with planted("driftlab_guard.consume_once:ConsumeOnce._guard_plan", "self._guard_check_resume(value)", "pass"), \
            planted("driftlab_guard.consume_once:ConsumeOnce._guard_outcome", "self.claims_made += 1",
                    "self.claims_made += 1; self._guard_check_resume(plan.value)"), \
            pytest.raises(AssertionError):  # planted: the value validated right after its claim
        _resume_schema_checked_before_the_claim(fresh(tmp_path))


def _resume_schema_checked_before_the_claim(tmp_path: Path) -> None:
    from typing import Literal

    saver = GuardedSqliteSaver(sqlite3.connect(str(tmp_path / "cp.db"), check_same_thread=False),
                               resume_schema=Literal["approve", "reject"])
    consumed = str(tmp_path / "consumed.txt")
    app = flow_graph(consumed, None).compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t"}}
    app.invoke({"x": 0, "v": ""}, cfg)
    with pytest.raises(driftlab_guard.InvalidState, match="nothing was claimed"):
        app.invoke(Command(resume="aprove"), cfg)
    assert saver.conn.execute("SELECT count(*) FROM driftlab_guard_claims").fetchone()[0] == 0
    assert app.invoke(Command(resume="approve"), cfg) == {"x": 11, "v": "approve"}
    assert Path(consumed).read_text().split() == ["approve"]


@pytest.mark.planted("driftlab_guard.consume_once:ConsumeOnce._guard_refuse_unparked", "if latest is None:", "if True:")
def test_a_resend_after_the_claimant_crashed_names_the_claimant_and_the_recovery(tmp_path):
    """The claimant consumes the approval in b and is SIGKILLed in c; the approval re-sent (as any caller holding
    it would) is refused as ``continued``, naming the crashed claimant and ``invoke(None, config)``; that recovery
    finishes the run; a thread that never parked is refused as ``not_parked``.

    Planted bug caught: the refusal of a resume at a checkpoint with no interrupt saying "the run ended, do not
    retry" (``not_parked``) while the run is half done and only invoke(None) finishes it."""
    tmp_path = fresh(tmp_path)
    where, consumed = str(tmp_path / "cp.db"), str(tmp_path / "consumed.txt")
    _invoke("sync", where, consumed, {"x": 0, "v": ""}, "sync", kill=False)
    assert wait(fork_start(_resume_and_die, ("sync", where, consumed, "sync"))) == -signal.SIGKILL
    with pytest.raises(ResumeRefused) as refused:
        _invoke("sync", where, consumed, Command(resume="again"), "sync", kill=False)
    assert refused.value.kind == "continued" and "invoke(None, config)" in refused.value.action
    claimant = sqlite3.connect(where).execute("SELECT claimant FROM driftlab_guard_claims").fetchone()[0]
    assert refused.value.claimant == claimant and claimant in str(refused.value)
    assert _invoke("sync", where, consumed, None, "sync", kill=False) == {"x": 11, "v": "claimed"}
    saver = GuardedSqliteSaver(sqlite3.connect(str(tmp_path / "never.db"), check_same_thread=False))
    app = StateGraph(Flow)
    app.add_node("n", lambda s: {"x": 1})
    app.add_edge(START, "n"), app.add_edge("n", END)
    compiled = app.compile(checkpointer=saver)
    compiled.invoke({"x": 0, "v": ""}, {"configurable": {"thread_id": "u"}})
    with pytest.raises(ResumeRefused) as never:
        compiled.invoke(Command(resume="x"), {"configurable": {"thread_id": "u"}})
    assert never.value.kind == "not_parked" and never.value.claimant is None


# ---------------------------------------------------------------------------------------------- CO in every durability
def flow_graph(consumed: str, kill_in_c: int | None):
    """a -> b (interrupt; appends the value it consumed to ``consumed``) -> c (SIGKILLs process ``kill_in_c``)."""

    def a(s):
        return {"x": s["x"] + 1}

    def b(s):
        v = interrupt("approve?")
        with open(consumed, "a") as fh:
            fh.write(f"{v}\n")
        return {"v": v}

    def c(s):
        if os.getpid() == kill_in_c:
            os.kill(os.getpid(), signal.SIGKILL)
        return {"x": s["x"] + 10}

    g = StateGraph(Flow)
    for fn in (a, b, c):
        g.add_node(fn.__name__, fn)
    g.add_edge(START, "a"), g.add_edge("a", "b"), g.add_edge("b", "c"), g.add_edge("c", END)
    return g


def _invoke(saver_kind: str, where: str, consumed: str, value, durability: str, kill: bool):
    cfg = {"configurable": {"thread_id": "t"}}
    kill_pid = os.getpid() if kill else None
    if saver_kind == "sync":
        # closed before returning: the next step forks a resumer, and a SQLite connection open across a fork (here
        # until the compiled graph's reference cycles are collected) is what SQLite says never to do
        conn = sqlite3.connect(where, check_same_thread=False)
        try:
            app = flow_graph(consumed, kill_pid).compile(checkpointer=GuardedSqliteSaver(conn))
            return app.invoke(value, cfg, durability=durability)
        finally:
            conn.close()

    async def go():
        async with aiosqlite.connect(where) as conn:
            saver = GuardedAsyncSqliteSaver(conn)
            await saver.setup()
            app = flow_graph(consumed, kill_pid).compile(checkpointer=saver)
            return await app.ainvoke(value, cfg, durability=durability)
    return asyncio.run(go())


def _resume_and_die(saver_kind, where, consumed, durability):
    _invoke(saver_kind, where, consumed, Command(resume="claimed"), durability, kill=True)


planted_callers_durability = pytest.mark.planted("driftlab_guard._pregel:Invocation.make_durable",
                                                 'if loop.durability == "sync":', "if True:")


@pytest.mark.parametrize("durability", ["sync", "async", pytest.param("exit", marks=planted_callers_durability)])
@pytest.mark.parametrize("saver_kind", ["sync", "async"])
def test_consume_once_holds_in_every_durability_mode(saver_kind, durability, tmp_path):
    """The resumer consumes the value in b and is SIGKILLed in c; a recovery (invoke(None)) in the parent ends the
    run with the claimed value, b having consumed it exactly once across both processes; a late resume is refused.

    Planted bug caught: a claimed resume left in the caller's durability: under "exit" LangGraph persists nothing
    of the resume before the crash, so the recovery re-runs b with the claimed value (two consumptions, the
    README's old "what the guard trades away"); under "async" b's checkpoint may still be in flight when c runs.
    """
    tmp_path = fresh(tmp_path)
    where, consumed = str(tmp_path / "cp.db"), str(tmp_path / "consumed.txt")
    _invoke(saver_kind, where, consumed, {"x": 0, "v": ""}, durability, kill=False)
    assert wait(fork_start(_resume_and_die, (saver_kind, where, consumed, durability))) == -signal.SIGKILL
    assert _invoke(saver_kind, where, consumed, None, durability, kill=False) == {"x": 11, "v": "claimed"}
    assert Path(consumed).read_text().split() == ["claimed"]
    with pytest.raises(ResumeRefused):
        _invoke(saver_kind, where, consumed, Command(resume="late"), durability, kill=False)


@pytest.mark.postgres
@pytest.mark.parametrize("durability", ["async", pytest.param("exit", marks=planted_callers_durability)])
@pytest.mark.parametrize("saver_kind", ["sync", "async"])
def test_consume_once_holds_on_postgres(saver_kind, durability, pg_dsn, tmp_path):
    """The same crash on GuardedPostgresSaver and GuardedAsyncPostgresSaver (the claim and LangGraph's resume write
    in one transaction).

    Planted bugs caught: as above, and a claim whose resume write goes to another transaction than the claim (a
    crash between them leaves a claim without a write: the recovery would park again)."""
    import psycopg
    from psycopg.rows import dict_row

    from runners.backends import create_schema, drop_schema

    schema = create_schema(pg_dsn, "dguard_")
    consumed = str(fresh(tmp_path) / "consumed.txt")
    opts = dict(autocommit=True, prepare_threshold=0, row_factory=dict_row, options=f"-c search_path={schema}")
    cfg = {"configurable": {"thread_id": "t"}}

    def run(value, kill):
        graph = flow_graph(consumed, os.getpid() if kill else None)
        if saver_kind == "sync":
            with psycopg.connect(pg_dsn, **opts) as conn:
                saver = driftlab_guard.GuardedPostgresSaver(conn)
                saver.setup()
                return graph.compile(checkpointer=saver).invoke(value, cfg, durability=durability)

        async def go():
            async with await psycopg.AsyncConnection.connect(pg_dsn, **opts) as conn:
                saver = driftlab_guard.GuardedAsyncPostgresSaver(conn)
                await saver.setup()
                return await graph.compile(checkpointer=saver).ainvoke(value, cfg, durability=durability)
        return asyncio.run(go())

    try:
        run({"x": 0, "v": ""}, False)
        assert wait(fork_start(run, (Command(resume="claimed"), True))) == -signal.SIGKILL
        assert run(None, False) == {"x": 11, "v": "claimed"}
        assert Path(consumed).read_text().split() == ["claimed"]
    finally:
        drop_schema(pg_dsn, schema)


# ---------------------------------------------------------------------------------------------- state lost behind a claim
class LostState:
    """A guarded saver on one claim store whose checkpoints of thread ``t`` can be deleted behind its claims (what a
    store rolled back by a power loss leaves, while the claim store kept the claim)."""

    def __init__(self, store: str, tmp: Path, request):
        self.store, self.tmp, self.consumed = store, tmp, str(tmp / "consumed.txt")
        self.closing: list = []
        self.schema = self.dsn = self.prefix = None
        if "postgres" in store:
            from runners.backends import create_schema

            self.dsn = request.getfixturevalue("pg_dsn")
            self.schema = create_schema(self.dsn, "dglost_")
        if store == "redis-claims":
            from test_guard_any_saver import redis_client

            self.redis, self.prefix = redis_client(), f"driftlab_test_lost_{os.getpid()}_{tmp.name}"

    def saver(self):
        if self.store == "in-saver-postgres":
            import psycopg
            from psycopg.rows import dict_row

            conn = psycopg.connect(self.dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row,
                                   options=f"-c search_path={self.schema}")
            self.closing.append(conn)
            saver = driftlab_guard.GuardedPostgresSaver(conn)
            saver.setup()
            return saver
        conn = sqlite3.connect(str(self.tmp / "cp.db"), check_same_thread=False)
        self.closing.append(conn)
        if self.store == "in-saver-sqlite":
            return GuardedSqliteSaver(conn)
        from langgraph.checkpoint.sqlite import SqliteSaver

        if self.store == "sqlite-claims":
            claims = driftlab_guard.SqliteClaims(str(self.tmp / "claims.db"))
        elif self.store == "postgres-claims":
            claims = driftlab_guard.PostgresClaims(self.dsn, schema=self.schema)
            self.closing.append(claims.conn)
        else:
            claims = driftlab_guard.RedisClaims(self.redis, prefix=self.prefix)
        saver = driftlab_guard.guard(SqliteSaver(conn), claims)
        saver.setup()
        return saver

    def invoke(self, value):
        cfg = {"configurable": {"thread_id": "t"}}
        if self.store == "async-sqlite-claims":  # the async glue: AsyncSqliteSaver wrapped, claims in SQLite
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            async def go():
                async with aiosqlite.connect(str(self.tmp / "cp.db")) as conn:
                    saver = driftlab_guard.guard(AsyncSqliteSaver(conn), driftlab_guard.SqliteClaims(
                        str(self.tmp / "claims.db")))
                    await saver.setup()
                    return await flow_graph(self.consumed, None).compile(checkpointer=saver).ainvoke(value, cfg)
            return asyncio.run(go())
        return flow_graph(self.consumed, None).compile(checkpointer=self.saver()).invoke(value, cfg)

    def lose(self) -> None:
        """Every checkpoint and write of thread t deleted; the claims stay."""
        if self.store == "in-saver-postgres":
            import psycopg

            with psycopg.connect(self.dsn, autocommit=True, options=f"-c search_path={self.schema}") as conn:
                for stmt in ("DELETE FROM checkpoint_writes WHERE thread_id = 't'",
                             "DELETE FROM checkpoint_blobs WHERE thread_id = 't'",
                             "DELETE FROM checkpoints WHERE thread_id = 't'"):
                    conn.execute(stmt)
            return
        with sqlite3.connect(str(self.tmp / "cp.db")) as conn:
            conn.execute("DELETE FROM writes WHERE thread_id = 't'")
            conn.execute("DELETE FROM checkpoints WHERE thread_id = 't'")

    def close(self) -> None:
        for conn in self.closing:
            conn.close()
        if self.schema:
            from runners.backends import drop_schema

            drop_schema(self.dsn, self.schema)
        if self.prefix:
            for key in self.redis.scan_iter(f"{self.prefix}:*"):
                self.redis.delete(key)


LOST_STORES = ["in-saver-sqlite", pytest.param("in-saver-postgres", marks=pytest.mark.postgres), "sqlite-claims",
               "async-sqlite-claims", pytest.param("postgres-claims", marks=pytest.mark.postgres),
               pytest.param("redis-claims", marks=pytest.mark.planted(
                   "driftlab_guard.claims:RedisClaims.run", 'if op == "CLAIMS":', 'if op == "NO-SUCH-OP":'))]


@pytest.mark.planted("driftlab_guard.consume_once:ConsumeOnce._guard_state_lost", "if not claims:", "if True:")
@pytest.mark.planted("driftlab_guard.consume_once:lost_park", "if not lost:", "if True:")
@pytest.mark.parametrize("store", LOST_STORES)
def test_a_claim_that_outlived_its_checkpoints_names_the_loss_and_the_recovery(store, tmp_path, request):
    """A resume claimed (b consumed "yes"), then every checkpoint of the thread lost behind the claim (deleted: what
    a saver rolled back by a power loss leaves while the claim store kept the claim).  A resend and a recovery
    (invoke(None)) are refused ``state_lost``, naming the consumed interrupt and its claimant; the named recovery
    works: the run started again with its input parks at b (a new interrupt id: LangGraph's id hashes the task,
    whose id hashes the checkpoint id), invoke(None) finishes it with the claimed value (the lost claim re-keyed to
    the new park, its claimant kept), and a resend afterwards is refused; "again" is never consumed.  On every claim
    store: the guarded savers' own table (SQLite, PostgreSQL), SqliteClaims (sync and async saver), PostgresClaims,
    RedisClaims.

    Bug class caught: a guard that answers "nothing is parked" to a thread whose claim outlived its checkpoints,
    leaving the run stuck (no resume is served, invoke(None) has no input).  Planted: the state-lost branch disabled
    (the resend is refused ``no_checkpoint`` and the recovery fails); the lost claim never handed on (the restarted
    run parks again: stuck); RedisClaims not answering "the claims of this thread"."""
    tmp = fresh(tmp_path)
    h = LostState(store, tmp, request)
    try:
        h.invoke({"x": 0, "v": ""})
        assert h.invoke(Command(resume="yes")) == {"x": 11, "v": "yes"}
        h.lose()
        with pytest.raises(ResumeRefused) as resent:
            h.invoke(Command(resume="again"))
        lost = resent.value
        assert lost.kind == "state_lost" and lost.action == driftlab_guard.errors.REFUSAL_ACTIONS["state_lost"]
        assert lost.claimant and lost.claimant in lost.reason and lost.interrupt_ids
        assert lost.reason.startswith("state lost: ") and all(i in lost.reason for i in lost.interrupt_ids)
        with pytest.raises(ResumeRefused) as recovered:
            h.invoke(None)
        assert recovered.value.kind == "state_lost"
        restarted = h.invoke({"x": 0, "v": ""})
        assert [i.id for i in restarted["__interrupt__"]] != list(lost.interrupt_ids)  # not the lost interrupt's id
        assert h.invoke(None) == {"x": 11, "v": "yes"}  # the lost claim handed to the restarted park
        with pytest.raises(ResumeRefused) as again:
            h.invoke(Command(resume="again"))
        assert again.value.kind == "continued" and again.value.claimant == lost.claimant  # the claim, re-keyed
    finally:
        h.close()
    assert Path(h.consumed).read_text().split() == ["yes", "yes"]  # b ran again after the loss, with the claim


def test_the_readme_names_every_refusal_and_its_action():
    """The README's table of exceptions has a row for each refusal kind, saying what the caller does next."""
    from driftlab_guard.errors import REFUSAL_ACTIONS

    table = [ln for ln in (GUARD / "README.md").read_text().splitlines() if ln.startswith("| `ResumeRefused`")]
    for kind in REFUSAL_ACTIONS:
        assert any(f'"{kind}"' in ln for ln in table), f"the README's exceptions table has no row for {kind!r}"


# ---------------------------------------------------------------------------------------------- layer 2
def premises():
    return [
        Premise("amount_unchanged", ("order.amount",), lambda now, then: now == then, REPLAN),
        Premise("within_policy", ("order.amount", "policy.max_refund"),
                lambda now, then: now["order.amount"] <= now["policy.max_refund"], BLOCK),
        Premise("address_shown", ("customer.address",), lambda now, then: now == then, REFRESH),
        Premise("customer_active", ("customer.status",), lambda now, then: now["customer.status"] != "closed", BLOCK),
    ]


START_VALUES = {"order.amount": 30, "policy.max_refund": 50, "customer.address": "Main St", "customer.status": "ok",
                "order.comment": ""}

# the five premise classes of the revalidation family: (changes while parked, outcome, premises re-checked)
CLASSES = {
    "irrelevant": ({"order.comment": "late"}, KEEP, ()),
    "presentation": ({"customer.address": "Side St"}, REFRESH, ("address_shown",)),
    "predicate_preserving": ({"policy.max_refund": 40}, KEEP, ("within_policy",)),
    "replanning": ({"order.amount": 35}, REPLAN, ("amount_unchanged", "within_policy")),
    "blocking": ({"customer.status": "closed"}, BLOCK, ("customer_active",)),
}


REVALIDATE, AFFECTED = "driftlab_guard.revalidation:Revalidator.revalidate", "affected = {i for r in changed for i in index[r]}"
SKIPS_A_CLASS = pytest.mark.planted(REVALIDATE, "if p.id not in affected:",
                                   "if p.id not in affected or p.on_fail < REPLAN:")  # BLOCK/REPLAN premises only
BY_OBJECT = pytest.mark.planted(REVALIDATE, AFFECTED,  # every premise reading the changed field's object
                                "affected = {i for r in changed for ref in index if ref.split('.')[0] == r.split('.')[0] "
                                "for i in index[ref]}")


@pytest.mark.planted(REVALIDATE, AFFECTED, "affected = set(ids)")  # a full scan
@pytest.mark.parametrize("with_log", [True, False], ids=["change-log", "versions"])
@pytest.mark.parametrize("kind", [pytest.param(k, marks={"presentation": [SKIPS_A_CLASS, BY_OBJECT],
                                                          "blocking": [BY_OBJECT]}.get(k, [])) for k in CLASSES])
def test_revalidation_outcome_per_premise_class(kind, with_log):
    """Each premise class of the revalidation family gets its outcome, re-checking only the premises that read a
    changed field (the reverse index), with the source's change log or by comparing versions.

    Planted bugs caught: a layer that skips one premise class (e.g. evaluates only BLOCK/REPLAN premises: the
    presentation change would KEEP), a full scan instead of the reverse index (evaluated would list every premise),
    a check of every premise read by any changed object instead of the changed field."""
    source = DictSource(START_VALUES)
    if not with_log:
        source.changes_since = None  # type: ignore[assignment]
        del source.changes_since
        source.position = None  # type: ignore[assignment]
        del source.position
    guard = Revalidator(source)
    parked = guard.park(premises())
    changes, outcome, evaluated = CLASSES[kind]
    for ref, value in changes.items():
        source.write(ref, value)
    verdict = guard.revalidate(parked)
    assert (verdict.outcome, verdict.evaluated) == (outcome, evaluated)
    assert verdict.releases == (outcome <= REFRESH)


@pytest.mark.planted(REVALIDATE, 'ids = list(parked["premises"])',
                     'ids = [i for i in parked["premises"] if i in self.premises]')  # an unknown premise skipped
@pytest.mark.planted("driftlab_guard.revalidation:Revalidator.require", "if not verdict.releases:",
                     "if verdict.outcome >= REFRESH:")
def test_revalidation_dominance_and_fail_closed():
    """Two failures: the dominant outcome wins (BLOCK > REPLAN); a parked premise the running code no longer
    declares BLOCKs; require() raises StaleDecision for REPLAN/BLOCK and not for REFRESH.

    Planted bugs caught: an unknown premise skipped (it would KEEP); require() raising on REFRESH (a safe action
    needlessly stopped).  (The last failing premise winning instead of the most severe is caught by the test below:
    here BLOCK is declared last, so the last failure is also the most severe.)"""
    source = DictSource(START_VALUES)
    guard = Revalidator(source)
    parked = guard.park(premises())
    source.write("order.amount", 60)  # replanning and blocking at once
    assert guard.revalidate(parked).outcome == BLOCK
    with pytest.raises(StaleDecision):
        guard.require(parked)
    assert Revalidator(source).revalidate(parked).outcome == BLOCK  # a process that declares none of them
    source2 = DictSource(START_VALUES)
    g2 = Revalidator(source2)
    p2 = g2.park(premises())
    source2.write("customer.address", "Side St")
    assert g2.require(p2).outcome == REFRESH


@pytest.mark.parametrize("order", ["block-last", pytest.param("block-first", marks=pytest.mark.planted(
    REVALIDATE, "outcome = max(outcome, p.on_fail)", "outcome = p.on_fail"))])
def test_the_most_severe_failure_wins_in_either_declaration_order(order):
    """Both premises fail on one change; BLOCK wins whether it is declared before or after the REPLAN one, and the
    witness (``failed``) names the BLOCK premise first.

    Planted bug caught: the last failing premise wins (``outcome = p.on_fail`` instead of the max): with BLOCK
    declared first, the REPLAN premise after it would win (the test above declares BLOCK last, so it cannot tell)."""
    ps = premises()[:2] if order == "block-last" else premises()[1::-1]
    source = DictSource(START_VALUES)
    guard = Revalidator(source)
    parked = guard.park(ps)
    source.write("order.amount", 60)  # amount changed (REPLAN) and above the policy (BLOCK)
    verdict = guard.revalidate(parked)
    assert verdict.outcome == BLOCK and verdict.failed[0] == "within_policy"


def _same(now, then):
    return now == then


@pytest.mark.parametrize("declare, at, problem", [
    pytest.param(lambda: Premise("p", "order.amount", _same), "declare", "not the string", marks=pytest.mark.planted(
        "driftlab_guard.revalidation:Premise.__post_init__", "isinstance(self.reads, (str, bytes))", "False")),
    (lambda: Premise("p", (), _same), "declare", "at least one field"),
    (lambda: Premise("p", ("order.amount", 3), _same), "declare", "at least one field"),
    (lambda: Premise("p", ("order.amount",), "yes"), "declare", "callable"),
    pytest.param(lambda: Premise("p", ("order.amout",), _same), "park", "does not know", marks=pytest.mark.planted(
        "driftlab_guard.revalidation:Revalidator.park", "if unknown:", "if False:")),
    pytest.param(lambda: Premise("p", ("order.amount",), lambda now, then: "no"), "revalidate", "not a bool",
                 marks=pytest.mark.planted("driftlab_guard.revalidation:Premise.holds",
                                           "if not isinstance(result, bool):",
                                           "if not isinstance(result := bool(result), bool):")),
], ids=["reads-a-string", "reads-empty", "reads-not-names", "rule-not-callable", "misspelt-field", "rule-not-bool"])
def test_a_premise_that_cannot_mean_what_it_says_is_an_error(declare, at, problem):
    """Each declaration that would otherwise revalidate to KEEP after its field changed is an error, where it
    is made: a string for ``reads`` (read as its characters, none of them a field), a misspelt field (it never
    changes), a rule returning a truthy string ("no" holds).

    Planted bugs caught: ``tuple(reads)`` on a string accepted, park not checking the fields exist, ``bool(rule())``
    coercing the rule's answer (each of these rows would KEEP instead of raising)."""
    if at == "declare":
        with pytest.raises(TypeError, match=problem):
            declare()
        return
    source = DictSource(START_VALUES)
    guard = Revalidator(source)
    if at == "park":
        with pytest.raises(ValueError, match=problem):
            guard.park([declare()])
        return
    parked = guard.park([declare()])
    source.write("order.amount", 31)
    with pytest.raises(TypeError, match=problem):
        guard.revalidate(parked)


class Refund(TypedDict, total=False):
    premises: dict
    plans: int
    acted: int
    verdict: str


@pytest.mark.planted(REVALIDATE, 'seen: dict[str, Any] = parked["seen"]',  # the values read at resume, not at park
                     "seen: dict[str, Any] = {r: list(v) for r, v in self.source.read(sorted({r for i in ids for r in "
                     "self.premises[i].reads})).items()}")
def test_revalidation_routes_a_langgraph_run_to_replan_instead_of_acting(tmp_path):
    """Layer 2 alone on a stock saver: the refund decided before the pause is re-planned after the amount changed,
    and acted on only once a fresh decision holds.

    Planted bug caught: revalidating against values read at resume (park not stored in the checkpoint): the
    change during the pause is invisible and the stale refund is released (acted would be 1 after one plan)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    tmp_path = fresh(tmp_path)
    source = DictSource(START_VALUES)
    guard = Revalidator(source)

    def propose(s):
        return {"premises": guard.park(premises()), "plans": s.get("plans", 0) + 1}

    def approve(s):
        interrupt("approve?")
        v = guard.revalidate(s["premises"])
        return Command(goto=v.route(keep="act", replan="propose", block=END), update={"verdict": v.outcome.name})

    def act(s):
        return {"acted": s.get("acted", 0) + 1}

    g = StateGraph(Refund)
    for fn in (propose, approve, act):
        g.add_node(fn.__name__, fn)
    g.add_edge(START, "propose"), g.add_edge("propose", "approve"), g.add_edge("act", END)
    app = g.compile(checkpointer=SqliteSaver(sqlite3.connect(str(tmp_path / "r.db"), check_same_thread=False)))
    cfg = {"configurable": {"thread_id": "t"}}
    app.invoke({}, cfg)
    source.write("order.amount", 35)
    out = app.invoke(Command(resume="ok"), cfg)  # REPLAN: back to propose, parked again
    assert (out["verdict"], out["plans"], out.get("acted")) == ("REPLAN", 2, None)
    out = app.invoke(Command(resume="ok"), cfg)
    assert (out["verdict"], out["plans"], out["acted"]) == ("KEEP", 2, 1)


# ---------------------------------------------------------------------------------------------- layer 3
def registry():
    r = Resources(contracts=["index:docs@2 requires model:embed@2"])
    r.deploy("prompt:refund", 1, "p1")
    r.deploy("model:embed", 1, "e1")
    r.deploy("index:docs", 1, "d1")
    return r


@pytest.mark.planted("driftlab_guard.pinning:Pins.bind", "if bound is None and _in_subgraph():", "if False:")
def test_pins_hold_across_a_pause_and_are_inherited_by_a_subgraph(tmp_path):
    """prompt:refund@1 is bound before the pause and redeployed as @2 during it; after the resume the parent and a
    subgraph that declares the manifest channel both read @1.  A subgraph whose state lacks the channel raises
    PinsNotInherited instead of reading @2.

    Planted bug caught: a manifest not inherited by a subgraph (the guard resolving live when a subgraph's state has
    no manifest: the second run would return "p2" instead of raising)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    tmp_path = fresh(tmp_path)
    resources = registry()
    pins = Pins(resources)

    S = TypedDict("S", {"pins": pins.channel(), "seen": list}, total=False)  # noqa: UP013 - a local annotation
    Bare = TypedDict("Bare", {"seen": list}, total=False)  # noqa: UP013

    def read(s):
        b = pins.bind(s)
        return {"seen": (s.get("seen") or []) + [b.resolve("prompt:refund").value], **b.update()}

    def wait(s):
        interrupt("go?")
        return {}

    def build(sub_state):
        sub = StateGraph(sub_state)
        sub.add_node("sub_read", read)
        sub.add_edge(START, "sub_read"), sub.add_edge("sub_read", END)
        g = StateGraph(S)
        g.add_node("read", read), g.add_node("wait", wait), g.add_node("child", sub.compile())
        g.add_edge(START, "read"), g.add_edge("read", "wait"), g.add_edge("wait", "child"), g.add_edge("child", END)
        return g.compile(checkpointer=SqliteSaver(sqlite3.connect(str(tmp_path / f"{sub_state.__name__}.db"),
                                                                  check_same_thread=False)))

    for sub_state in (S, Bare):
        resources.deploy("prompt:refund", 1, "p1")
        app = build(sub_state)
        cfg = {"configurable": {"thread_id": "t"}}
        app.invoke({}, cfg)
        resources.deploy("prompt:refund", 2, "p2")
        if sub_state is S:
            out = app.invoke(Command(resume="go"), cfg)
            assert out["seen"] == ["p1", "p1"] and out["pins"] == {"prompt:refund": 1}
        else:
            with pytest.raises(PinsNotInherited):
                app.invoke(Command(resume="go"), cfg)


@pytest.mark.planted("driftlab_guard.pinning:Binding._breaks", "trial = {**self.bound, alias: version}",
                     "trial = {**self.new, alias: version}")  # only the node's own new bindings
@pytest.mark.planted("driftlab_guard.pinning:Pins.merge", "broken = violation(merged, self.resources.contracts)",
                     "broken = None")  # a reducer that merges without checking
def test_contracts_at_first_binding_and_at_fan_in():
    """First binding: with model:embed@1 bound, the live index:docs@2 (requires embed@2) is refused and the
    retained @1 bound instead; with no compatible version, ContractViolation.  Fan-in: two parallel branches that
    each bound a compatible half of a broken pair are refused at the merge (ContractViolation), two versions of one
    alias too (PinConflict).

    Planted bugs caught: contracts checked only against the node's own new bindings (the first case would bind
    index:docs@2), a reducer that merges without checking (the fan-in would be admitted)."""
    resources = registry()
    resources.deploy("index:docs", 2, "d2")
    # model:embed@2 deployed but not live: index:docs@2 alone could be bound (what it requires is deployed), so it is
    # refused only against the bound model:embed@1, and each parallel branch below binds without error: the merge
    # alone sees the pair break the contract
    resources.deploy("model:embed", 2, "e2", live=False)
    pins = Pins(resources)
    b = pins.bind({"pins": {"model:embed": 1}})
    got = b.resolve("index:docs")
    assert (got.version, got.via) == (1, "retained") and b.update() == {"pins": {"index:docs": 1}}
    resources.retire("index:docs", 1)
    with pytest.raises(ContractViolation):
        pins.bind({"pins": {"model:embed": 1}}).resolve("index:docs")

    S = TypedDict("S", {"pins": pins.channel()}, total=False)  # noqa: UP013 - a local annotation

    def left(s):
        b = pins.bind(s)
        b.resolve("index:docs")  # @2, fine alone (model:embed unbound)
        return b.update()

    def right(s):
        b = pins.bind(s)
        b.resolve("model:embed")  # @1, fine alone
        return b.update()

    g = StateGraph(S)
    g.add_node("left", left), g.add_node("right", right)
    g.add_edge(START, "left"), g.add_edge(START, "right"), g.add_edge("left", END), g.add_edge("right", END)
    with pytest.raises(ContractViolation):
        g.compile().invoke({})
    with pytest.raises(PinConflict):
        pins.merge({"prompt:refund": 1}, {"prompt:refund": 2})
