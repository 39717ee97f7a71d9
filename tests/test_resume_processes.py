"""Real processes: every crash a SIGKILL of a child's pid, every recovery a new process; both backends.

Catches a harness that fakes its crashes (no child killed by signal 9, or a
recovery in the killed process), and, on PostgreSQL, a consume-once gate
that serves more than one racer (planted bug: naive, which each racer runs on).
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest

import scenarios
from mechanisms.resume import DEFAULT_RUNTIMES
from analysis.resume.checkers import check_all
from runners.experiment import Options
from runners.resume.concurrency import race_cell
from runners.resume.cells import Recorder, finish, play, setup_backend
from runners.resume.procs import ForkedExecutor
from scenarios.resume.loader import by_kind, cell_graph
from vocabulary.resume import Backend

SCEN = scenarios.load_scenarios(family="resume")["resume"]


def run_cell(name: str, runtime: str, backend: Backend):
    cell = SCEN[name]
    graph = cell_graph(cell, by_kind(SCEN, "graph"))
    setup_backend(runtime, backend, graph)
    rec = Recorder(graph)
    ex = ForkedExecutor(runtime, backend, graph)
    for r in range(cell.replicas):
        play(cell, ex, rec, f"{name}-{r}", name)
    return ex, finish(rec, runtime, backend, graph)


@pytest.mark.parametrize("runtime,eo", [
    pytest.param("naive", "invalid", marks=pytest.mark.planted(  # an EO blind to the re-fired effect
        "analysis.resume.checkers:EffectExactlyOnce.judge", "if len(rows) > 1:", "if False:")),
    ("sequencer", "valid")])
def test_sigkill_after_effect_is_real_and_recovery_is_a_new_process(runtime, eo, tmp_path):
    """Planted bug: naive re-runs the node whose effect is durable but whose checkpoint is not (EO invalid);
    the sequencer's idempotent ledger does not."""
    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))  # a planted rerun (tests/planting.py) gets the same tmp_path
    ex, history = run_cell("crash_resume_after_effect_act", runtime, Backend("sqlite", str(tmp_path), "t"))
    assert ex.kills and all(code == -9 for _, code in ex.kills)  # killed by signal 9
    killed = [op for op in history.operations if op.status == "indeterminate"]
    assert killed and all(op.value["killed_by"] == 9 for op in killed)
    for op in killed:
        rec = next(o for o in history.operations if o.index > op.index and o.name == "recover"
                   and o.value["run"] == op.value["run"])
        assert rec.value["pid"] != op.value["pid"]  # a fresh process
    assert check_all(history)["EO"].verdict.value == eo


@pytest.mark.postgres
@pytest.mark.parametrize("runtime,fired", [("naive", 4), pytest.param("sequencer", 1, marks=pytest.mark.planted(
    "mechanisms.resume.store:CheckpointTables.claim", "return cur.rowcount == 1", "return True"))])
def test_concurrent_resume_on_postgres(runtime, fired, pg_dsn, tmp_path, monkeypatch):
    """Naive lets each of k = 4 racers run on (4 gated effects); the sequencer's claim serves one (planted bug: a
    claim that never refuses, so all four racers are served)."""
    monkeypatch.setenv("DRIFTLAB_POSTGRES_DSN", pg_dsn)
    out = race_cell("t", runtime, "postgres", 4, 0.0, 2, 1, Options(run_dir=tmp_path))
    assert out.records["effects_fired"] == [fired, fired]
    assert out.records["served"] == [fired, fired]
    assert out.records["indeterminate"] == [0, 0]


@pytest.mark.postgres
def test_fault_cell_on_postgres(pg_dsn, tmp_path):
    """The fault harness on PostgreSQL: a SIGKILL inside the checkpoint transaction leaves no checkpoint; the
    sequencer holds every property, naive re-fires the effect (EO)."""
    import secrets

    for runtime, eo in (("sequencer", "valid"), ("naive", "invalid")):
        backend = Backend("postgres", pg_dsn, f"driftlab_resume_test_{secrets.token_hex(4)}")
        try:
            ex, history = run_cell("crash_resume_during_checkpoint_write_act", runtime, backend)
        finally:
            from mechanisms.resume.store import drop_backend
            drop_backend(backend)
        res = check_all(history)
        assert res["EO"].verdict.value == eo
        assert all(r.verdict.value == "valid" for p, r in res.items() if p != "EO")
        assert ex.kills and all(code == -9 for _, code in ex.kills)


@pytest.mark.planted("analysis.resume.checkers:ConsumeOnce.judge",  # the second value accepted silently passes
                     'if earlier and call.value.get("state") not in (REFUSED, FAILED) and self.refusal_required:',
                     "if False:")
def test_driftlab_check_judges_a_stored_resume_history(tmp_path):
    """`driftlab check` on a resume history: exit 1 with CO's prose witness for naive's second resume, 0 for the
    sequencer's (planted bug: naive records the second value and answers 'done' instead of refusing).  The runtimes
    run in fork-server children; `driftlab check` runs in this process (its output captured here), so the marker
    plants the CO checker that must flag naive."""
    import contextlib
    import io

    from runners.cli import main
    from vocabulary import history_to_jsonl

    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))  # a planted rerun (tests/planting.py) gets the same tmp_path
    for runtime, code in (("naive", 1), ("sequencer", 0)):
        _, history = run_cell("second_resume_head", runtime, Backend("sqlite", str(tmp_path / runtime), "t"))
        path = tmp_path / f"{runtime}.jsonl"
        path.write_text(history_to_jsonl(history))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            got = main(["check", str(path)])
        assert got == code, out.getvalue() + err.getvalue()
        if code:
            assert "instead of being refused" in out.getvalue()


LOCK = "runners.resume.concurrency:one_big_race_at_a_time"
#: the wait for the lock, between pause_clock() and restart_clock() ...
TIMED_WAIT = ('pause_clock()\n'
              '        if k * per_racer > RACE_CONNECTIONS:\n'
              '            _take(conn, "SELECT pg_try_advisory_lock(%s)", INTENT_LOCK)\n'
              '            _take(conn, "SELECT pg_try_advisory_lock(%s)", RACE_LOCK)\n'
              '        else:\n'
              '            _take(conn, "SELECT pg_try_advisory_lock_shared(%s)", INTENT_LOCK)\n'
              '            _take(conn, "SELECT pg_try_advisory_lock_shared(%s)", RACE_LOCK)\n'
              '            conn.execute("SELECT pg_advisory_unlock_shared(%s)", (INTENT_LOCK,))\n'
              '        restart_clock()')
#: ... and the planted one: the same wait, the cell's clock running through it
UNTIMED_WAIT_DROPPED = TIMED_WAIT.replace("pause_clock()\n        ", "").replace("\n        restart_clock()", "")


def _hold_big_race(task: tuple[str, str, float, int, str]) -> tuple[float, float]:
    """Hold the race lock of a k = 16 race of ``per_racer`` connections each for ``hold_s``; a race that has the
    server to itself builds an index CONCURRENTLY meanwhile, as DBOS's migration does.  Both workers ask for the
    lock only once both have started (a marker file each in ``meet``, the clock paused meanwhile), so a worker
    started late on a loaded machine does not read as one that waited for the lock."""
    from pathlib import Path

    import psycopg
    from psycopg import sql

    from runners.backends import postgres_dsn
    from runners.resume.concurrency import RACE_CONNECTIONS, one_big_race_at_a_time
    from runners.workers import pause_clock, restart_clock

    schema, index, hold_s, per_racer, meet = task
    pause_clock()
    (Path(meet) / index).touch()
    deadline = time.time() + 120
    while len(list(Path(meet).iterdir())) < 2 and time.time() < deadline:
        time.sleep(0.01)
    restart_clock()
    with one_big_race_at_a_time("postgres", 16, per_racer):
        got = time.time()
        time.sleep(hold_s / 3)  # the other worker waits for the lock by now
        if 16 * per_racer > RACE_CONNECTIONS:
            with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE INDEX CONCURRENTLY {} ON {} (x)").format(
                    sql.Identifier(index), sql.Identifier(schema, "t")))
        time.sleep(max(0.0, hold_s - (time.time() - got)))
        return got, time.time()


@pytest.mark.postgres
@pytest.mark.xdist_group("race_lock")  # both rows on one worker: their CREATE INDEX CONCURRENTLYs wait for each other's snapshots
@pytest.mark.parametrize("per_racer", [
    pytest.param(5, marks=[pytest.mark.planted(LOCK, TIMED_WAIT, UNTIMED_WAIT_DROPPED),  # the wait counted
                           pytest.mark.planted(LOCK, "if k * per_racer > RACE_CONNECTIONS:", "if False:")]),  # no lock
    pytest.param(2, marks=pytest.mark.planted(LOCK, "if k * per_racer > RACE_CONNECTIONS:", "if True:")),  # serialized
], ids=["dbos-like", "lab-like"])
def test_big_postgres_races_run_one_at_a_time_and_the_wait_is_not_timed(pg_dsn, monkeypatch, per_racer, tmp_path):
    """Two k = 16 races in two workers.  With DBOS's 5 connections per racer (80 each) one holds the server while
    the other waits, and the waiter's time limit counts from when it has the lock (planted bugs: no lock, so the
    racers of both fill max_connections; a limit that counts the wait, so a cell queued behind a big race is killed
    as if it had hung; a wait inside a statement, whose snapshot the holder's CREATE INDEX CONCURRENTLY (DBOS's
    migration) waits for: a deadlock).  With the lab's 2 per racer (32 each) both run at once (planted bug: every
    k = 16 race serialized whatever it holds, idling the other worker)."""
    import secrets

    import psycopg
    from psycopg import sql

    from runners.workers import run_workers

    from runners.resume import concurrency

    monkeypatch.setenv("DRIFTLAB_POSTGRES_DSN", pg_dsn)
    # locks of this run's own (the forked workers inherit them): another test's race, or a killed worker's backend
    # of an earlier run of this one that has not yet let go, does not hold them
    for name in ("RACE_LOCK", "INTENT_LOCK"):
        monkeypatch.setattr(concurrency, name, secrets.randbits(62))
    schema = f"driftlab_test_lock_{secrets.token_hex(4)}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("CREATE TABLE {} (x int)").format(sql.Identifier(schema, "t")))
        try:
            hold, limit = 2.0, 3.0  # each holds for less than its limit (a second of slack: the CIC waits for every
            # older snapshot in the database, other tests' too); waiting plus holding is more
            tasks = [(schema, f"i{n}", hold, per_racer, str(tmp_path)) for n in range(2)]
            spans = sorted(span for _, span in run_workers(_hold_big_race, tasks, 2, limit))
        finally:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    assert (spans[1][0] >= spans[0][1]) == (per_racer == 5)


def _peak_connections(work, monkeypatch) -> int:
    """Run ``work()``; the most PostgreSQL connections that this process and the processes it starts held at once,
    polled from ``pg_stat_activity`` every 5 ms: they carry an application name of their own (``PGAPPNAME``,
    inherited by every racer), so the other xdist worker's connections are not counted."""
    import secrets
    import threading

    import psycopg

    from runners.backends import postgres_dsn

    name = f"driftlab-peak-{secrets.token_hex(4)}"
    monkeypatch.setenv("PGAPPNAME", name)
    peak, done = [0], threading.Event()
    poller = psycopg.connect(postgres_dsn(), autocommit=True, application_name="driftlab-poller")

    def sample() -> None:
        while not done.is_set():
            held = poller.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                  (name,)).fetchone()[0]
            peak[0] = max(peak[0], held)
            done.wait(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        work()
    finally:
        done.set()
        sampler.join()
        poller.close()
    return peak[0]


#: connections of a race's driver (this process: the run's store and ledger, the race lock's, a guard's or REMIT's own), outside the racers'
DRIVER_CONNECTIONS = 5


PER_RACER = "runners.resume.common:connections_per_racer"


@pytest.mark.postgres
@pytest.mark.parametrize("runtime", [
    pytest.param(r, marks=[pytest.mark.planted(PER_RACER, '"connections_per_racer",', '"connections",')]
                 if r == "langgraph+guard[any-saver]" else [])
    for r in DEFAULT_RUNTIMES])
def test_a_racer_holds_no_more_postgres_connections_than_its_runtime_declares(pg_dsn, monkeypatch, runtime):
    """A k = 8 race on PostgreSQL holds at most k x the runtime's ``connections_per_racer`` connections beside its
    driver's (planted bug: the declaration looked up under a wrong name, so the guard over any saver reads as the
    default 2 although its claim store opens a third connection per racer; a paper run's k = 16 race then shared
    the server as a small race and PostgreSQL refused it "too many clients")."""
    from runners.resume.common import connections_per_racer

    monkeypatch.setenv("DRIFTLAB_POSTGRES_DSN", pg_dsn)
    k = 8
    peak = _peak_connections(lambda: race_cell("resume_concurrency", runtime, "postgres", k, 0.0, 1, 1,
                                               Options(mechanisms=(runtime,), run_dir=Path(tempfile.mkdtemp()))),
                             monkeypatch)
    assert peak > k, f"{runtime}: the sampler saw {peak} connections for {k} racers: it measured nothing"
    assert peak <= k * connections_per_racer(runtime) + DRIVER_CONNECTIONS, (
        f"{runtime}: a k = {k} race held {peak} connections, declared {connections_per_racer(runtime)} per racer")
