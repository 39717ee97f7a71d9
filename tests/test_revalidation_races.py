"""Race pairs and cross-resource histories on real SQLite and PostgreSQL (ATR paper §5, "Races").

Every test runs the literal interleavings of ``faults/revalidation/races.py`` through the
interpreter: actor processes with their own connections, the database
deciding.  The ``unchecked`` binding (the token ignored) shows the pair
assertion can fail; a deliberately wrong inline expectation shows the
step-by-step check can fail.
"""
from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace

import pandas as pd
import psutil
import pytest

from analysis.revalidation.checkers import verdicts_by_group
from analysis.revalidation.races import report, table
from faults.revalidation.races import (CROSS_RESOURCE, HISTORIES, POLICY_CHANGE_IN_FLIGHT, RACE_PAIR, Step, by_binding,
                          expected_commits)
from runners import backends, interleaving, processes
from runners.experiment import CellOutput, Options
from runners.revalidation.races import RevalidationRaces, timing
from runners.interleaving import Interpreter, LostActor
from runners.revalidation.race_actor import RaceDomain
from runners.revalidation.race_store import SCHEMA_PREFIX, drop_orphans, open_store, schema_name
from vocabulary import INDETERMINATE, History, Verdict, history_from_jsonl, history_to_jsonl

pytestmark = pytest.mark.xdist_group("test_revalidation_races")  # one worker: its module-scoped fixture runs once


def effects(x) -> int:
    return x.audit["refunds"]


def answers(x, result: str) -> int:
    return sum(op.name == "commit" and op.value.get("result") == result for op in x.operations)


def verdict(x) -> Verdict:
    judged = verdicts_by_group(History("revalidation", tuple(x.operations))).get(x.case)
    return judged.verdict if judged else Verdict.VALID


class Lab:
    """One database for a test module; one interpreter (its actor processes) per binding."""

    def __init__(self, backend: str, dsn: str | None = None):
        self.store = open_store(backend, dsn)
        self.interpreters: dict[str, Interpreter] = {}
        self.case = 0

    def run(self, history, binding: str, n: int = 1):
        if binding not in self.interpreters:
            self.interpreters[binding] = Interpreter(RaceDomain(self.store, binding), binding)
        out = []
        for _ in range(n):
            self.case += 1
            out.append(self.interpreters[binding].run(history, self.case))
        return out

    def close(self) -> None:
        for interpreter in self.interpreters.values():
            interpreter.close()
        self.store.drop()


#: case numbers for tests that carry a plant: the planted variant (tests/planting.py) runs the test again on the same
#: module-scoped store, where the first run's case rows already are
RERUN_CASES = itertools.count(20_000)


@pytest.fixture(scope="module")
def sqlite_lab():
    lab = Lab("sqlite")
    yield lab
    lab.close()


@pytest.fixture(scope="module")
def pg_lab(pg_dsn):
    lab = Lab("postgres", pg_dsn)
    yield lab
    lab.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def lab(request):
    return request.getfixturevalue("sqlite_lab" if request.param == "sqlite" else "pg_lab")


def _explain(executions) -> str:
    bad = [x for x in executions if not x.as_expected or x.errors]
    return "; ".join(f"case {x.case}: {x.mismatch} {x.errors}" for x in bad[:3])


# ------------------------------------------------------------------ race pairs
def test_race_pairs_overlap_and_commit_exactly_once(lab):
    """Hermitage-style pairs: both transactions open with the same token; one commit, one CAS refusal."""
    runs = lab.run(RACE_PAIR, "target_cas", n=100)
    assert [effects(x) for x in runs] == [1] * 100  # refunds on the target row, read from the database
    assert all(answers(x, "committed") == 1 and answers(x, "rejected") == 1 for x in runs)
    assert all(x.as_expected and not x.errors for x in runs), _explain(runs)
    # the loser is refused by the compare-and-set (rowcount 0), never by a lock timeout or an error
    refusals = [op.value.get("refused_by") for x in runs for op in x.operations if op.value.get("result") == "rejected"]
    assert refusals == ["target_cas"] * 100
    overlapping = sum(timing(x)["overlap_us"] > 0 for x in runs)
    assert overlapping >= 95, f"only {overlapping} of 100 pairs overlapped"
    assert all(verdict(x) is Verdict.VALID for x in runs)


def test_sqlite_loser_retries_with_its_own_token(sqlite_lab):
    """SQLite refuses the loser's first write busy; the retry keeps token v0 and the CAS refuses it."""
    (x,) = sqlite_lab.run(RACE_PAIR, "target_cas")
    (loser,) = [op for op in x.operations if op.value.get("result") == "rejected"]
    assert loser.value["retried_after"] in ("SQLITE_BUSY", "SQLITE_BUSY_SNAPSHOT")
    assert loser.value["target_token"] == 0 and loser.value["in_transaction"] is True


def test_a_commit_that_ignores_the_token_refunds_twice(lab):
    """The broken control: the same race with the token ignored breaks 'exactly one' in every pair."""
    runs = lab.run(RACE_PAIR, "unchecked", n=20)
    assert [effects(x) for x in runs] == [2] * 20
    assert all(x.as_expected for x in runs), _explain(runs)
    assert all(verdict(x) is Verdict.INVALID for x in runs)  # the checker sees the double commit


class LockedAfterSetup(RaceDomain):
    """The race domain, with SQLite's writer lock taken by an outsider right after the fresh rows are written."""

    def prepare(self, script, case):
        state = super().prepare(script, case)
        self.held = self.store.connect()
        self.held.execute("BEGIN IMMEDIATE")
        return state


def test_a_silent_actor_is_indeterminate_and_its_pair_unknown(sqlite_lab):
    """Workers that never answer are killed; their commits are indeterminate, never errors, never valid."""
    domain = LockedAfterSetup(sqlite_lab.store, "target_cas")
    interpreter = Interpreter(domain, "target_cas", reply_timeout_s=0.5)
    pair = replace(RACE_PAIR, steps=tuple(s for s in RACE_PAIR.steps if getattr(s, "actor", "") != "auditor"))
    try:  # both updates get SQLITE_BUSY, retry with BEGIN IMMEDIATE and wait (busy timeout 10 s): no answer
        x = interpreter.run(pair, case=10_000)  # the audit still reads: WAL readers do not wait for the writer
    finally:
        domain.held.execute("ROLLBACK")
        domain.held.close()
        interpreter.close()
    commits = [op for op in x.operations if op.name == "commit"]
    assert [op.status for op in commits] == [INDETERMINATE, INDETERMINATE]
    assert all(op.end is None and "no answer" in op.value["lost"] for op in commits)
    assert not x.errors  # not folded into an error count
    assert verdict(x) is Verdict.UNKNOWN


class SlowToStart(RaceDomain):
    """The race domain, with each actor's process stopped (SIGSTOP) as it starts and let go 1 s later: a loaded
    machine's slow interpreter start, made certain."""

    def start_actor(self, name):
        actor = super().start_actor(name)
        os.kill(actor.pid, signal.SIGSTOP)
        threading.Timer(1.0, _let_go, (actor.proc,)).start()
        return actor


def _let_go(proc):
    if proc.poll() is None:  # not already killed for its silence
        os.kill(proc.pid, signal.SIGCONT)


@pytest.mark.planted("runners.interleaving:Interpreter.actor", "actor.wait_up(START_TIMEOUT_S)",
                     "actor.wait_up(self.reply_timeout_s)")  # the actor's start charged to the reply timeout
def test_an_actor_slow_to_start_is_waited_for_not_charged_to_its_first_step(sqlite_lab):
    """Planted bug (CI, a loaded machine): the first request is sent before the actor is up, so its start counts
    against the reply timeout; the actor is killed as silent and its steps turn indeterminate or error."""
    with Interpreter(SlowToStart(sqlite_lab.store, "target_cas"), "target_cas", reply_timeout_s=0.5) as interpreter:
        x = interpreter.run(RACE_PAIR, case=next(RERUN_CASES))  # a planted rerun: a case of its own
    assert x.indeterminate == 0 and not x.errors and x.as_expected, _explain([x])


def test_an_actor_that_never_starts_fails_the_run(sqlite_lab, monkeypatch):
    """An actor not up within the start timeout is the lab's failure (LostActor), never an indeterminate step."""
    monkeypatch.setattr(interleaving, "START_TIMEOUT_S", 0.2)
    with Interpreter(SlowToStart(sqlite_lab.store, "target_cas"), "target_cas", reply_timeout_s=5) as interpreter:
        with pytest.raises(LostActor, match=r"worker_a did not start within 0.2 s"):
            interpreter.run(RACE_PAIR, case=10_003)


class KilledFromOutside(RaceDomain):
    """The race domain, with worker_b's process SIGKILLed by an outsider (as the OOM killer would) before its
    commit is sent: an actor that ends by itself, which nothing in a race does."""

    def start_actor(self, name):
        actor = super().start_actor(name)
        self.started = {**getattr(self, "started", {}), name: actor}
        return actor

    def request(self, step, case):
        if step.op == "commit" and step.actor == "worker_b":
            self.started["worker_b"].proc.kill()
            self.started["worker_b"].proc.wait()
        return super().request(step, case)


@pytest.mark.planted("runners.interleaving:Interpreter._collect", "if reply is None and actor.exited:",
                     "if False:")  # the lab's fault recorded as an indeterminate operation
def test_an_actor_that_dies_by_itself_fails_the_run_instead_of_becoming_a_result(sqlite_lab):
    """Planted bug: a lab fault (an actor's process gone, nothing having killed it) recorded as an indeterminate
    operation, so the pair's published verdict is "unknown" instead of the cell failing with one line."""
    interpreter = Interpreter(KilledFromOutside(sqlite_lab.store, "target_cas"), "target_cas", reply_timeout_s=5)
    try:
        with pytest.raises(LostActor, match=r"worker_b exited with code -9 during commit.*lab's failure"):
            interpreter.run(RACE_PAIR, case=next(RERUN_CASES))  # a planted rerun: a case of its own
    finally:
        interpreter.close()


# ------------------------------------------------------- cross-resource histories
@pytest.mark.parametrize("history", CROSS_RESOURCE, ids=lambda h: h.name)
def test_target_only_cas_commits_and_the_policy_token_rejects(lab, history):
    (unsafe,) = lab.run(history, "target_cas")
    (checked,) = lab.run(history, "policy_token")
    assert effects(unsafe) == 1 and answers(unsafe, "committed") == 1  # a false allow: the policy was false
    assert effects(checked) == 0 and answers(checked, "rejected") == 1
    assert unsafe.as_expected and checked.as_expected, _explain([unsafe, checked])
    assert verdict(unsafe) is Verdict.INVALID and verdict(checked) is Verdict.VALID


def test_the_policy_token_waits_for_a_policy_change_in_flight_then_rejects(lab):
    (x,) = lab.run(POLICY_CHANGE_IN_FLIGHT, "policy_token")
    assert [s.result for s in x.steps if s.actor == "agent" and s.op in ("commit", "await")] == ["blocks", "rejected"]
    assert effects(x) == 0 and x.as_expected, _explain([x])
    assert verdict(x) is Verdict.VALID
    (commit,) = [op for op in x.operations if op.name == "commit"]
    admin_commit = next(op for op in x.operations if op.name == "commit_txn")
    assert commit.start < admin_commit.start < commit.end  # it really waited for the admin's transaction


# ------------------------------------------------------ the literal interleavings
@pytest.mark.parametrize("name, binding", [(h.name, b) for h in HISTORIES.values() for b in h.bindings])
def test_every_step_meets_its_inline_expectation(lab, name, binding):
    history = HISTORIES[name]
    (x,) = lab.run(history, binding)
    assert len(x.steps) == len(history.steps)
    for result in x.steps:
        assert result.ok, f"{name}/{binding}: {result.describe()}"
    assert effects(x) == expected_commits(history, binding) and not x.errors


def test_a_wrong_inline_expectation_is_reported(sqlite_lab):
    steps = list(CROSS_RESOURCE[0].steps)
    commit = next(i for i, s in enumerate(steps) if s.op == "commit")
    steps[commit] = Step("agent", "commit", expect=by_binding(target_cas="committed", policy_token="committed"))
    (x,) = sqlite_lab.run(replace(CROSS_RESOURCE[0], steps=tuple(steps)), "policy_token")
    assert not x.as_expected and x.mismatch.startswith("agent commit: got 'rejected'")


# ------------------------------------------------------------------ security: schema names
@pytest.mark.postgres
def test_a_crafted_schema_name_runs_no_sql(pg_dsn):
    """The injection repro: a schema named like an orphan with SQL in it creates nothing and is never dropped."""
    import psycopg
    from psycopg import sql

    crafted = "driftlab_races_999999_;CREATE SCHEMA pwned;--"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS pwned CASCADE")
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(crafted)))
        try:
            store = open_store("postgres", pg_dsn)  # runs the orphan clean-up
            store.drop()
            assert drop_orphans(conn) == []
            names = {n for (n,) in conn.execute("SELECT nspname FROM pg_namespace")}
            assert "pwned" not in names
            assert crafted in names  # not ours to drop: its name does not parse as this host's
        finally:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(crafted)))
            conn.execute("DROP SCHEMA IF EXISTS pwned CASCADE")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert not psutil.pid_exists(proc.pid)
    return proc.pid


@pytest.mark.postgres
def test_orphan_clean_up_drops_only_this_hosts_dead_runs(pg_dsn):
    import psycopg
    from psycopg import sql

    dead = _dead_pid()
    mine_dead = schema_name(pid=dead)
    mine_live = schema_name(pid=os.getpid())
    other_host = mine_dead.replace(backends.host_id(), "0" * 8 if backends.host_id() != "0" * 8 else "1" * 8)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for name in (mine_dead, mine_live, other_host):
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        try:
            dropped = drop_orphans(conn)
            names = {n for (n,) in conn.execute("SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)",
                                                (SCHEMA_PREFIX,))}
            assert mine_dead in dropped and mine_dead not in names
            assert mine_live in names and other_host in names  # a live run, another host: never dropped
        finally:
            for name in (mine_dead, mine_live, other_host):
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def test_schema_names_carry_host_and_pid():
    name = schema_name()
    assert name.startswith(f"{SCHEMA_PREFIX}{backends.host_id()}_{os.getpid()}_") and len(name) <= 63
    assert not backends.orphaned(SCHEMA_PREFIX, name)  # our own pid is alive
    assert not backends.orphaned(SCHEMA_PREFIX, "driftlab_races_999999_;CREATE SCHEMA pwned;--")
    with pytest.raises(ValueError):
        backends.schema_pattern("bad prefix;")


# ------------------------------------------------------------------ shared process helpers
def _sleep(seconds):
    time.sleep(seconds)


def _exit_with(code):
    sys.exit(code)


def _meet(barrier, path):
    barrier.wait()
    with open(path, "a") as f:
        f.write(f"{time.perf_counter_ns()}\n")


def test_step_server_runs_starts_and_kills_named_steps():
    with processes.StepServer() as server:
        pid, code = server.call(_exit_with, 3)
        assert code == 3 and pid != os.getpid()
        assert server.run(_sleep, 0) > 0
        started = server.start(_sleep, 30)
        assert server.kill(started) == -9  # SIGKILL at a point the caller names
        with pytest.raises(processes.StepFailed):
            server.run(_exit_with, 1)
        with pytest.raises(processes.StepFailed, match="No module named"):
            server.call("no_such_module:step")


def test_fork_call_and_barrier(tmp_path):
    assert processes.fork_call(_exit_with, (0,))[1] == 0
    barrier = processes.Barrier(3, timeout=10)
    path = tmp_path / "met"
    pids = [processes.fork_start(_meet, (barrier, str(path))) for _ in range(3)]
    assert sorted(processes.wait(p) for p in pids) == [0, 0, 0]
    stamps = [int(x) for x in path.read_text().split()]
    assert len(stamps) == 3
    assert processes.reap() == []


def test_an_actor_that_dies_gives_no_answer():
    actor = processes.ActorProcess("sleeper", "runners.processes")  # the step server ignores malformed requests
    actor.kill()
    assert actor.reply(1.0) is None and "exited" in actor.lost
    actor.close()


# ------------------------------------------------------------- experiment end to end
def test_cells_records_history_and_table():
    experiment = RevalidationRaces()
    options = Options(extra={"repetitions": 3})
    cells = experiment.cells("quick", 1, options)
    wanted = {("race_pair", "target_cas"), ("race_pair", "unchecked"), ("limit_drops", "target_cas"),
              ("limit_drops", "policy_token")}
    frames = []
    for cell in cells:
        if (cell.p["history"], cell.p["binding"]) in wanted:
            out = experiment.run_cell(cell, options)
            assert isinstance(out, CellOutput)
            again = history_from_jsonl(history_to_jsonl(out.history))  # the stored format round-trips
            assert set(again.groups()) == set(out.records["repetition"])
            assert [op.index for op in again.operations] == list(range(len(again.operations)))
            frame = pd.DataFrame(out.records)
            for key, value in cell.params:
                frame[key] = value
            frames.append(frame)
    records = pd.concat(frames, ignore_index=True)
    tab = table(records).set_index(["history", "binding"])
    assert tab.loc[("race_pair", "target_cas"), ["one_commit", "valid", "overlapping_pairs"]].tolist() == [3, 3, 3]
    assert tab.loc[("race_pair", "unchecked"), ["two_commits", "invalid"]].tolist() == [3, 3]
    assert tab.loc[("all", "target_cas"), ["false_allows", "invalid"]].tolist() == [3, 3]
    assert tab.loc[("all", "policy_token"), ["rejections", "false_allows", "valid"]].tolist() == [3, 0, 3]
    section = report(table(records), records)
    assert any(r["metric"].endswith("pairs with exactly one commit") and r["ours"].startswith("3 of 3") for r in section.rows)
    assert any("overlapping pairs" in r["metric"] and r["ours"].startswith("3 of 3") for r in section.rows)


def test_unknown_verdicts_are_never_counted_as_valid():
    base = {"backend": "sqlite", "part": "pairs", "history": "race_pair", "binding": "target_cas", "oracle_commits": 1,
            "commits": 1, "rejections": 1, "as_expected": True, "errors": "", "overlap_us": 5.0, "lock_retries": 0,
            "refused_by_cas": 1, "indeterminate": 0, "verdict": "valid"}
    records = pd.DataFrame([base, {**base, "verdict": "unknown", "indeterminate": 1, "commits": 1, "rejections": 0}])
    row = table(records).iloc[0]
    assert (row["valid"], row["unknown"], row["invalid"], row["errors"], row["indeterminate"]) == (1, 1, 0, 0, 1)


def test_children_never_import_a_stray_module_from_the_working_folder(tmp_path, monkeypatch):
    (tmp_path / "psutil.py").write_text("raise SystemExit('the stray module ran')\n")
    (tmp_path / "faults.py").write_text("raise SystemExit('the stray module ran')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as `python -m` in this folder would have it
    store = open_store("sqlite", scratch=tmp_path)
    try:
        with Interpreter(RaceDomain(store, "target_cas"), "target_cas") as interpreter:
            (x,) = [interpreter.run(CROSS_RESOURCE[0], case=1)]
        assert x.as_expected and not x.errors, _explain([x])
    finally:
        store.drop()
