"""The consume-once claim under a forced race, on SQLite and on PostgreSQL alike.

Bug class (issue 16 §7): a cross-process claim tested only on PostgreSQL.  A check-then-set claim (read whether
the interrupt is claimed, then write the claim, in two statements) serves two racers when both read before
either writes; on SQLite the lab's races rarely interleave there, so the planted bug passed.  Here the race is
forced: two claimants, each on its own connection to the one store, are held at a barrier just before their
first write statement of the claim (after any read), then released together.  Exactly one must win on either
backend.  A claim that is one atomic statement, or a transaction that serialises (SQLite ``BEGIN IMMEDIATE``),
passes: the barrier then times out for the waiting one, which goes on after the winner committed.

The second test runs the lab's own k-racer cell (real processes) on SQLite as it does on PostgreSQL.
"""
from __future__ import annotations

import multiprocessing
import secrets
import threading

import pytest

from mechanisms.resume.store import CheckpointTables, drop_backend
from vocabulary.resume import Backend

WRITES = ("insert", "update", "replace", "begin", "delete")
#: the claim's one atomic statement (mechanisms/resume/store.py) ...
ATOMIC_CLAIM = ('cur = self.sql.execute("INSERT INTO claims (run_id, step, value, pid, at) VALUES (?, ?, ?, ?, ?) "\n'
                '                           "ON CONFLICT (run_id, step) DO NOTHING",\n'
                '                           (run_id, step, json.dumps(value), os.getpid(), time.time()))\n'
                '    return cur.rowcount == 1')
#: ... and the planted check-then-set claim: read whether it is claimed, then write, in two statements
CHECK_THEN_SET = ('if self.claimed(run_id, step)[0]:\n'
                  '        return False\n'
                  '    self.sql.execute("INSERT INTO claims (run_id, step, value, pid, at) VALUES (?, ?, ?, ?, ?) "\n'
                  '                     "ON CONFLICT (run_id, step) DO NOTHING",\n'
                  '                     (run_id, step, json.dumps(value), os.getpid(), time.time()))\n'
                  '    return True')
planted_check_then_set = pytest.mark.planted("mechanisms.resume.store:CheckpointTables.claim", ATOMIC_CLAIM,
                                             CHECK_THEN_SET)


def _racer(i: int, backend: Backend, barrier, answers) -> None:
    """One claimant in its own process (its own connection: a process shares one PostgreSQL connection between
    its stores, so threads of one process would not race), held before its first write statement."""
    tables = CheckpointTables(backend)
    tables.sql.restore()
    plain, held = tables.sql.execute, []

    def execute(sql, params=()):
        if not held and sql.lstrip().lower().startswith(WRITES):
            held.append(sql)
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                pass  # the other racer is blocked behind a serialising transaction: go on alone
        return plain(sql, params)

    tables.sql.execute = execute
    try:
        answers.put((i, tables.claim("r1", 1, f"value-{i}")))
    except Exception as exc:  # noqa: BLE001 - a claim that raises under the race is reported as such
        answers.put((i, f"{type(exc).__name__}: {exc}"))
    finally:
        tables.sql.close()


def race_claims(backend: Backend, racers: int = 2) -> list:
    """Each racer claims (run r1, step 1) in its own process; all are held before their first write."""
    setup = CheckpointTables(backend)
    setup.setup()
    setup.sql.close()
    ctx = multiprocessing.get_context("fork")
    barrier, answers = ctx.Barrier(racers, timeout=2.0), ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(i, backend, barrier, answers)) for i in range(racers)]
    for p in procs:
        p.start()
    results: list = [None] * racers
    for _ in procs:
        i, result = answers.get(timeout=60)
        results[i] = result
    for p in procs:
        p.join(10)
    return results


@planted_check_then_set
def test_check_then_set_claim_is_caught_on_sqlite(tmp_path):
    """Bug class: a cross-process claim tested only on PostgreSQL: on SQLite the forced race serves exactly one
    claimant (a check-then-set claim serves both, or raises on the second insert)."""
    results = race_claims(Backend("sqlite", str(tmp_path), f"claims_{secrets.token_hex(4)}"))  # new per run
    assert sorted(results, key=str) == [False, True], results


@pytest.mark.postgres
@planted_check_then_set
def test_check_then_set_claim_is_caught_on_postgres(pg_dsn):
    """Bug class: the same forced race on PostgreSQL."""
    backend = Backend("postgres", pg_dsn, f"driftlab_claim_test_{secrets.token_hex(4)}")
    try:
        results = race_claims(backend)
    finally:
        drop_backend(backend)
    assert sorted(results, key=str) == [False, True], results


@pytest.mark.parametrize("runtime,fired", [("naive", 4), pytest.param("sequencer", 1, marks=pytest.mark.planted(
    "mechanisms.resume.store:CheckpointTables.claim", "return cur.rowcount == 1", "return True"))])  # never refuses
def test_concurrent_resume_on_sqlite(runtime, fired, tmp_path):
    """Bug class: a cross-process claim tested only on PostgreSQL: the k = 4 racer cell on SQLite; naive lets every
    racer run on (4 gated effects), the sequencer's claim serves one (planted: a claim that never refuses, so all
    four racers are served, though the effect ledger's idempotency key still fires the effect once)."""
    from runners.experiment import Options
    from runners.resume.concurrency import race_cell

    out = race_cell("t", runtime, "sqlite", 4, 0.0, 2, 1, Options(run_dir=tmp_path))
    assert out.records["effects_fired"] == [fired, fired]
    assert out.records["served"] == [fired, fired]
    assert out.records["indeterminate"] == [0, 0]
