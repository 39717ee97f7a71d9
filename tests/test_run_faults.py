"""Faults during a run (issue 16, §3 and §6): what the lab does when its own process, its workers, its store
or a plug-in fails mid-run.  Real processes, real SIGKILL and SIGINT, a real dropped PostgreSQL connection.

Each test names in its docstring the class of planted bug it catches.  Bad *input* is the table of
``tests/test_bad_input.py``; these are faults that happen while cells run.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from runners.backends import host_id, schema_name
from runners.dask_executor import SCRATCH_PREFIX, remove_orphan_scratch
from runners.engine import RunLock, check_identity
from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, compute
from runners.workers import TaskTimedOut, WorkerDied, pause_clock, restart_clock, run_workers

REPO = Path(__file__).resolve().parent.parent


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "runners.cli", *args, "--quiet"]


def fresh(tmp_path: Path) -> Path:
    """A new directory under ``tmp_path``: a planted variant (tests/planting.py) runs the test again with the same
    ``tmp_path``, and must not find the first run's folders there."""
    return Path(tempfile.mkdtemp(dir=tmp_path))


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def _wait_for(predicate, timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# ------------------------------------------------------------------ the worker pool itself
def _task(t):
    if t == "exit":
        os._exit(3)
    if t == "hang":
        time.sleep(3600)
    if t in ("wait", "wait-then-hang"):  # waits for another task's resource (1.5 limits), then holds it
        pause_clock()
        time.sleep(1.5)
        restart_clock()
        time.sleep(0.5 if t == "wait" else 3600)
        return t
    return t * 2


@pytest.mark.planted("runners.workers:run_workers", "proc, (i, started), lane = slot",  # a failure blamed on
                     "proc, (i, started), lane = slot[0], (0, slot[1][1]), slot[2]")  # the first task, not its own
def test_a_worker_that_exits_or_hangs_stops_the_run_naming_its_task_and_leaves_no_process():
    """Planted bugs: a pool that waits forever for the task of a worker that called ``os._exit`` (what
    ``multiprocessing.Pool.imap`` does); a task past its time limit left running; a killed worker's task
    blamed on another task.  (Only the last is planted: the first would hang the test, and the pool's clean-up kills
    a worker left running after 5 s whatever the plant.)"""
    assert sorted(r for _, r in run_workers(_task, [1, 2, 3, 4], 2, 5)) == [2, 4, 6, 8]
    for bad, error in (("exit", WorkerDied), ("hang", TaskTimedOut)):
        before = {p.pid for p in _descendants(os.getpid())}
        t0 = time.monotonic()
        with pytest.raises(error) as raised:
            list(run_workers(_task, [1, bad, 3], 2, 1.0))
        assert raised.value.task == bad and time.monotonic() - t0 < 10
        assert not _alive([p for p in _descendants(os.getpid()) if p.pid not in before]), "no worker outlives the pool"
    assert "code 3" in str(WorkerDied("exit", 3))


@pytest.mark.planted("runners.workers:run_workers", "slot[1] = (i, time.monotonic() if got == _CLOCK else math.inf)",
                     "slot[1] = (i, started)")  # the wait eats the limit
def test_a_paused_wait_is_not_timed_but_what_follows_it_is():
    """Planted bugs: a wait for another task's resource (pause_clock ... restart_clock) that eats the task's limit,
    so a cell queued behind a big race is killed as if it had hung; or a pause that is never lifted, so a task that
    hangs after its wait is never stopped (not planted: it would hang the test)."""
    assert [r for _, r in run_workers(_task, ["wait"], 1, 1.0)] == ["wait"]
    with pytest.raises(TaskTimedOut) as raised:
        list(run_workers(_task, ["wait-then-hang"], 1, 1.0))
    assert raised.value.task == "wait-then-hang"


def _most_at_once(spans: dict, names=None) -> int:
    """The most tasks (of ``names``, else all) running at one moment, from their (start, end) spans."""
    names = list(spans) if names is None else names
    return max(sum(1 for m in names if spans[m][0] <= spans[n][0] < spans[m][1]) for n in names)


def _timed(t):
    start = time.time()
    time.sleep(0.5 if t.startswith("compute") else 0.1)
    return t, start, time.time()


@pytest.mark.planted("runners.workers:run_workers", "waits = list(waiting) if waiting is not None and jobs > 1 else",
                     "waits = [False] * len(tasks) if True else")  # the mark ignored
@pytest.mark.planted("runners.workers:run_workers", "for queue in (todo[True],) if lane else (todo[False], todo[True]):",
                     "for queue in (todo[False], todo[True]):")  # a waiting worker takes computing tasks
@pytest.mark.planted("runners.workers:run_workers", "if waiting is not None and jobs > 1 else", "if waiting is not None else")  # one job
def test_waiting_tasks_run_beside_the_computing_ones_which_never_exceed_jobs():
    """Tasks marked waiting get workers of their own beside the ``jobs`` computing ones (planted bugs: the mark
    ignored, so a task that only waits out a timeout holds a core's worker; a waiting worker that also takes
    computing tasks, so more than ``jobs`` compute at once; a lane that runs with one job, which must stay in
    order, one task at a time)."""
    tasks = ["compute-1", "compute-2", "compute-3", "wait-1", "wait-2"]
    marks = [t.startswith("wait") for t in tasks]

    def spans(jobs):
        got = {r[0]: r[1:] for _, r in run_workers(_timed, tasks, jobs, 30, marks)}
        assert sorted(got) == sorted(tasks)
        return got

    got = spans(2)
    computing = [t for t in tasks if t.startswith("compute")]
    assert _most_at_once(got, computing) == 2  # never 3: the waiting workers took no computing task
    assert got["wait-1"][0] < min(got[t][1] for t in computing)  # it did not queue behind a computing task
    got = spans(1)
    assert _most_at_once(got, tasks) == 1 and [t for t in sorted(got, key=lambda t: got[t][0])] == tasks


def _slept(t):
    start = time.time()
    time.sleep(1.0)
    return t, start, time.time()


class _Sleepers(Experiment):
    """Four cells that only sleep, every one marked waiting, two waiting workers per job."""

    name = "test_sleepers"
    family = "resume"
    description = "cells that sleep"
    waiting_workers_per_job = 2

    def cells(self, profile, seed, options):
        return [Cell(self.name, (("i", i),), 1, seed) for i in range(4)]

    def waits(self, cell, options):
        return True

    def run_cell(self, cell, options):
        _, start, end = _slept(cell.id)
        return CellOutput({"start": [start], "end": [end]})


@pytest.mark.planted("runners.workers:run_workers", "True: max([1, *(sizes[i] for i in todo[True])])}",
                     "True: max(1, jobs)}")
@pytest.mark.planted("runners.execute:_local", "lanes = [jobs * p.experiment.waiting_workers_per_job for p in of]",
                     "lanes = [jobs for p in of]")
def test_an_experiment_whose_waiting_cells_sleep_gets_more_waiting_workers_than_jobs(tmp_path):
    """An experiment's ``waiting_workers_per_job`` sizes its waiting lane apart from the computing one: four cells
    that only sleep run at once with two jobs (planted bugs: the lane held to ``jobs`` workers, in the pool or in
    the executor that forgets to pass the experiment's size, so sleeping cells queue behind each other while the
    cores idle); a pool given no lane size keeps ``jobs`` waiting workers."""
    import pandas as pd

    from runners.execute import Part, run_together

    exp = _Sleepers()
    run_together([Part(exp, exp.cells("quick", 1, Options()), exp.name)], Options(), tmp_path, 2, progress=False)
    frames = [pd.read_parquet(p) for p in (tmp_path / "records" / exp.name).glob("*.parquet")]
    assert len(frames) == 4
    assert _most_at_once({f.cell[0]: (f.start[0], f.end[0]) for f in frames}) == 4
    tasks = ["wait-1", "wait-2", "wait-3", "wait-4"]
    got = {r[0]: r[1:] for _, r in run_workers(_slept, tasks, 2, 30, [True] * 4)}
    assert _most_at_once(got) == 2


class _Spans(Experiment):
    """Cells that sleep the seconds their parameter says and record when they ran."""

    family = "resume"
    description = "cells that sleep and say when"

    def __init__(self, name: str, seconds: list[float]):
        self.name, self.spans = name, seconds

    def cells(self, profile, seed, options):
        return [Cell(self.name, (("i", i), ("s", s)), 1, seed) for i, s in enumerate(self.spans)]

    def run_cell(self, cell, options):
        start = time.time()
        time.sleep(cell.p["s"])
        return CellOutput({"start": [start], "end": [time.time()]})


@pytest.mark.planted("runners.execute:run_together", "results = _local(parts, todo, options, jobs)",
                     "results = (r for k in range(len(parts)) for r in _local([parts[k]], [todo[k]], options, jobs))")
@pytest.mark.planted("runners.execute:run_together", "wall[k], t = wall[k] + now - t, now", "wall[k] = now - t")
def test_the_next_experiments_cells_run_in_the_tail_of_the_previous_one(tmp_path):
    """Experiments run together share one pool: while the first experiment's long last cell runs, the worker that
    finished its short one takes the second experiment's cells.  Planted bugs: a pool per experiment, so a core idles
    through every experiment's tail; walls that are not the run's time shared out (each experiment's counted from the
    pool's start), so they add up to more than the run took."""
    import pandas as pd

    from runners.execute import Part, run_together

    first, second = _Spans("test_first", [1.5, 0.1]), _Spans("test_second", [0.2, 0.2])
    parts = [Part(e, e.cells("quick", 1, Options()), e.name) for e in (first, second)]
    t0 = time.perf_counter()
    got = run_together(parts, Options(), tmp_path, 2, progress=False)
    took = time.perf_counter() - t0
    span = {e.name: pd.concat([pd.read_parquet(p) for p in (tmp_path / "records" / e.name).glob("*.parquet")])
            for e in (first, second)}
    assert {name: n for name, (n, _) in got.items()} == {"test_first": 2, "test_second": 2}
    assert span["test_second"].end.max() < span["test_first"].end.max(), "the second ran beside the first's tail"
    assert all(wall > 0 for _, wall in got.values()) and sum(wall for _, wall in got.values()) <= took


def _limited(t):
    time.sleep(t)
    return t


@pytest.mark.planted("runners.workers:run_workers", "limits = list(timeout_s) if isinstance(timeout_s, (list, tuple))",
                     "limits = [timeout_s[0]] * len(tasks) if isinstance(timeout_s, (list, tuple))")
def test_each_task_is_held_to_its_own_time_limit():
    """Tasks of several experiments share a pool, each with its experiment's limit.  Planted bug: one limit for every
    task (the first experiment's), so a long cell of a later experiment is killed as hung, or a hang outlives its
    own limit."""
    assert sorted(r for _, r in run_workers(_limited, [0.1, 1.5], 2, [1.0, 5.0])) == [0.1, 1.5]
    with pytest.raises(TaskTimedOut) as raised:
        list(run_workers(_limited, [0.1, 30.0], 2, [5.0, 0.5]))
    assert raised.value.task == 30.0 and raised.value.timeout_s == 0.5


@pytest.mark.planted("runners.workers:run_workers", "order = [j for j in order if sizes[queue[j]] > busy]",
                     "order = list(order)")
def test_a_waiting_task_keeps_to_its_own_lane_size_in_a_shared_pool():
    """Waiting tasks of an experiment with a lane of 2 beside one with a lane of 4: the pool starts 4 waiting
    workers, and never more than 2 of them are busy when one of the first experiment's tasks starts (planted bug:
    lane sizes ignored, so every waiting task takes the largest lane: each adds an env server's worth of CPU)."""
    tasks = ["two-1", "two-2", "two-3", "two-4", "four-1", "four-2", "four-3", "four-4"]
    sizes = [2 if t.startswith("two") else 4 for t in tasks]
    got = {r[0]: r[1:] for _, r in run_workers(_slept, tasks, 2, 30, [True] * len(tasks), waiting_jobs=sizes)}
    assert sorted(got) == sorted(tasks)
    assert _most_at_once(got, [t for t in tasks if t.startswith("two")]) <= 2
    assert _most_at_once(got) == 4


# ------------------------------------------------------------------ SIGKILL between run.json.tmp and its rename
@pytest.mark.planted("runners.engine:check_identity", "any(p.name not in OWN_TEMPORARY for p in run_dir.iterdir())",
                     "any(True for p in run_dir.iterdir())")  # the lab's own temporary files read as foreign
def test_a_folder_holding_only_the_labs_own_temporary_files_is_taken_by_the_rerun(tmp_path):
    """Planted bug: a run SIGKILLed between writing ``run.json.tmp`` and renaming it leaves a folder every later
    run refuses as "not a driftlab run"; the rerun must take it (and still refuse a folder with anything else)."""
    run = fresh(tmp_path) / "run"
    run.mkdir()
    (run / ".lock").write_text("12345")
    (run / "run.json.tmp").write_text('{"profile": "qu')  # what the kill left: half a manifest, never renamed
    (run / "scratch").mkdir()
    assert check_identity(run, {"profile": "quick"}) is False  # the lab's: a fresh run, not a refusal
    (run / "notes.txt").write_text("mine")
    with pytest.raises(DriftlabError, match="holds no driftlab run"):
        check_identity(run, {"profile": "quick"})


# ------------------------------------------------------------------ kill -9 of the main process alone
@pytest.mark.planted("runners.workers:_worker", "die_with_parent(parent)", "pass")  # workers outlive the main process
def test_sigkill_of_the_main_process_alone_kills_its_workers_which_never_hold_the_lock(tmp_path):
    """Planted bugs: pool workers that outlive a ``kill -9`` of the main process (the OOM killer's way), finish
    their cell as orphans printing BrokenPipeError tracebacks, and hold the run folder's lock (inherited
    through fork), so the rerun is refused until they are done."""
    out = tmp_path / "run"
    main = subprocess.Popen(_cli("reproduce", "--only", "revalidation_outcomes", "--repetitions", "100", "--jobs", "2",
                                 "--workloads", "refund", "--out", str(out)),
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert _wait_for(lambda: len(_descendants(main.pid)) >= 2 and (out / "run.json").exists(), 60), "workers started"
        workers = _descendants(main.pid)
        os.kill(main.pid, signal.SIGKILL)  # the main process only, not its group
        main.wait()
        assert _wait_for(lambda: not _alive(workers), 5), f"workers outlived the main process: {_alive(workers)}"
        with RunLock(out):  # the rerun's first act: it is not refused
            pass
        assert "Traceback" not in main.stderr.read()
    finally:
        try:
            os.killpg(main.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# ------------------------------------------------------------------ Ctrl-C
def test_ctrl_c_prints_one_line_and_leaves_no_step_server_or_step_alive(tmp_path):
    """Planted bugs: Ctrl-C printing worker tracebacks under --quiet; a step server (``python -m
    runners.processes``) or one of its forked steps still running after the run has exited."""
    run = subprocess.Popen(_cli("reproduce", "--only", "revalidation_durable", "--jobs", "1", "--out", str(tmp_path / "run")),
                           cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        def step_server() -> bool:
            return any("runners.processes" in " ".join(p.cmdline()) for p in _alive(_descendants(run.pid)))

        assert _wait_for(step_server, 60), "a cell started its step server"
        time.sleep(0.3)
        everyone = _descendants(run.pid)
        os.killpg(run.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: SIGINT to the whole foreground group
        assert run.wait(timeout=30) == 130
        err = run.stderr.read()
        assert "Traceback" not in err and err.count("\n") == 1 and "interrupted" in err, err
        assert _wait_for(lambda: not _alive(everyone), 0.5), f"still alive after the run ended: {_alive(everyone)}"
    finally:
        try:
            os.killpg(run.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# ------------------------------------------------------------------ a dropped PostgreSQL connection
DROPPER = '''import os

import psycopg

from mechanisms.resume.sequencer import Sequencer
from runners.backends import postgres_dsn


class Dropper(Sequencer):
    """Before each resume, while the marker file exists, the server terminates this racer's ledger connection."""

    def resume(self, run_id, value, checkpoint_id=None):
        marker = os.environ["DRIFTLAB_TEST_DROP"]
        if os.path.exists(marker):
            if os.environ.get("DRIFTLAB_TEST_DROP_ONCE"):
                try:
                    os.unlink(marker)
                except FileNotFoundError:
                    pass
            with psycopg.connect(postgres_dsn(), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (self.ledger.sql.conn.info.backend_pid,))
        return super().resume(run_id, value, checkpoint_id)
'''


@pytest.mark.planted("runners.resume.procs:RacerPool._judge", "for a, label in zip(answers, labels):",
                     "return\n    for a, label in zip(answers, labels):")  # a racer without a Status: indeterminate
@pytest.mark.parametrize("once", [True, False], ids=["dropped-once-retried", "dropped-twice-fails"])
def test_a_dropped_postgres_connection_in_a_concurrency_cell_is_never_a_result(tmp_path, monkeypatch, pg_dsn, once):
    """Planted bug: a racer whose PostgreSQL connection the server terminated is recorded as an ``indeterminate``
    racer and the cell as finished, so a fault of the lab's own store becomes a published row.  It must fail the
    cell: retried once (a clean second attempt gives the cell's records, with no indeterminate racer), then one
    line naming the cell."""
    from runners.resume.concurrency import ResumeConcurrency

    (tmp_path / "drop_plugin.py").write_text(DROPPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    marker = tmp_path / "drop"
    marker.write_text("x")
    monkeypatch.setenv("DRIFTLAB_TEST_DROP", str(marker))
    if once:
        monkeypatch.setenv("DRIFTLAB_TEST_DROP_ONCE", "1")
    cell = Cell("resume_concurrency", (("runtime", "drop_plugin:Dropper"), ("backend", "postgres"), ("k", 2),
                                       ("jitter_ms", 0.0)), 1, 7)
    _, output = compute(ResumeConcurrency(), cell, Options())
    if once:
        assert isinstance(output, CellOutput), output
        assert output.records["indeterminate"] == [0] and output.records["served"] == [1]
        assert not any(op.status == "indeterminate" for op in output.history.operations)
    else:
        assert isinstance(output, str) and "PostgreSQL connection" in output and "retried once" in output, output
        assert "\n" not in output


# ------------------------------------------------------------------ determinism of the resume witnesses
@pytest.mark.planted("analysis.resume.checkers:CheckpointValidity.judge", "f\"checkpoint {cp.value.get('checkpoint')} of",
                     "f\"checkpoint {__import__('uuid').uuid4().hex} of")  # a witness quoting a uuid4
def test_resume_witnesses_in_tables_quote_no_checkpoint_uuid_and_repeat_with_the_seed(tmp_path):
    """Planted bug: a witness quoting the runtime's uuid4 checkpoint ids, so that two runs with one seed differ
    in the ``witness`` column of the fault matrix."""
    from runners.resume.common import run_fault_cell

    def witnesses() -> list[str]:
        options = Options(run_dir=tmp_path)
        records, _ = run_fault_cell("resume_faults", "naive", "invalid_state", 1, 20260901, options)
        return records["witness"]

    first, second = witnesses(), witnesses()
    assert any("checkpoint cp" in w for w in first), f"naive persists an invalid checkpoint; its witness names it: {first}"
    assert first == second
    assert not any(re.search(r"[0-9a-f]{32}", w) for w in first), first


# ------------------------------------------------------------------ Dask scratch folders
@pytest.mark.planted("runners.dask_executor:remove_orphan_scratch",  # no later run removes it
                     "if path.is_dir() and orphaned(SCRATCH_PREFIX, path.name):", "if False:")
@pytest.mark.planted("runners.backends:orphaned", " and not psutil.pid_exists(int(m.group(2)))", "")  # a live cell's
@pytest.mark.planted("runners.backends:orphaned", "m.group(1) == host_id() and ", "")  # another host's
def test_dask_cell_scratch_folders_of_dead_processes_on_this_host_are_removed_and_no_others(tmp_path):
    """Planted bug: a Dask worker killed mid-cell leaves a ``driftlab-cell-*`` folder in the system temp that no
    later run removes; or the clean-up removes a live cell's folder, or one of another host sharing the folder."""
    tmp_path = fresh(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = tmp_path / schema_name(SCRATCH_PREFIX, pid=dead.pid)
    live = tmp_path / schema_name(SCRATCH_PREFIX)
    other_host = tmp_path / f"{SCRATCH_PREFIX}{'0' * 8 if host_id() != '0' * 8 else '1' * 8}_{dead.pid}_abcdef01"
    for folder in (orphan, live, other_host):
        folder.mkdir()
        (folder / "cell.sqlite").write_text("x")
    assert remove_orphan_scratch(tmp_path) == [orphan]
    assert live.exists() and other_host.exists() and not orphan.exists()


def _keyed(t):
    time.sleep(t[1])
    return t[0], os.getpid()


@pytest.mark.planted("runners.workers:run_workers", "                if keyed:", "                if False:")  # ignored
@pytest.mark.planted("runners.workers:run_workers", "if keys[queue[j]] not in held), at)", "), at)")  # 2nd worker
def test_tasks_of_one_key_stay_in_one_worker_where_they_can():
    """A task's key names what it keeps warm in its worker (a framework's env server).  Planted bugs: keys ignored,
    so a worker freed early takes the next task in order, of another key, and every worker starts every
    framework's server; a second worker that takes the first task whatever its key, starting a second copy of the
    first worker's server while another key waits."""
    # two workers start on two keys, not both on the first one
    firsts: dict[int, str] = {}
    for _, (key, pid) in run_workers(_keyed, [("a", 0.2), ("a", 0.2), ("b", 0.2), ("b", 0.2)], 2, 30,
                                     keys=["a", "a", "b", "b"]):
        firsts.setdefault(pid, key)
    assert sorted(firsts.values()) == ["a", "b"]
    # the worker freed early keeps to its key (b), not the next task in order (a)
    tasks = [("a0", 0.8), ("b1", 0.0), ("a2", 0.8), ("b3", 0.0)]
    ran = dict(r for _, r in run_workers(_keyed, tasks, 2, 30, keys=[t[0][0] for t in tasks]))
    assert ran["b1"] == ran["b3"] != ran["a0"]
    # without keys, tasks go out in order
    assert [k for _, (k, _) in run_workers(_keyed, [(str(n), 0.0) for n in range(5)], 1, 30)] == list("01234")
