"""Worker processes for cells: each knows which cell it runs, has a time limit, and dies with the run.

Models no domain.  :func:`run_workers` runs a list of tasks in ``jobs``
forked worker processes and yields ``(task, result)`` as they finish.  It
exists instead of ``multiprocessing.Pool`` because a pool cannot say which
task a dead worker held: a worker that calls ``os._exit`` loses its task
and ``imap`` waits for it forever, and a task that hangs holds the run with
it.  Here every worker has its own pipe and runs one task at a time, so:

- a worker that dies mid-task (``os._exit``, a signal, the OOM killer) is
  :class:`WorkerDied` naming the task and the exit code: the run stops, it
  never hangs;
- a task running longer than ``timeout_s`` is killed (SIGKILL) and is
  :class:`TaskTimedOut` naming it;
- every worker asks the kernel to SIGKILL it when the main process dies
  (``prctl(PR_SET_PDEATHSIG)``), ignores Ctrl-C (the main process ends the
  workers), and closes the file descriptors registered with
  :func:`keep_from_workers` (the run folder's lock: a worker must never hold
  it after the main process is gone);
- a task that waits for a resource another task holds (e.g. a lock on a
  shared server) calls :func:`pause_clock` before it waits and
  :func:`restart_clock` once it has it: its time limit then counts from that
  moment, so the wait never eats it (the holder has a limit of its own, and
  a killed holder releases the resource).

Tasks are inherited through ``fork`` (never pickled); only results travel
back, over the worker's pipe.  What it trades away: a pool's generality
(no chunks, no ``map`` flavours); each worker serves one task at a time and
gets the next one when it answers.  Even one job runs in a worker, so that a
plug-in calling ``os._exit`` or hanging can never take the main process with
it.
"""
from __future__ import annotations

import math
import os
import signal
import time
from typing import Any, Callable, Iterator, Sequence

from runners.processes import die_with_parent

__all__ = ["WorkerDied", "TaskTimedOut", "keep_from_workers", "pause_clock", "restart_clock", "run_workers"]

_PRIVATE_FDS: set[int] = set()
_CLOCK = "restart-clock"  # a worker's message: its task's time limit counts from now
_PAUSE = "pause-clock"  # a worker's message: its task waits for another's resource; no limit until _CLOCK
_TASK_CONN = None  # in a worker: the pipe to the main process


class WorkerDied(Exception):
    """A worker process ended while it ran a task (``task``: the task; ``code``: its exit code)."""

    def __init__(self, task: Any, code: int | None):
        super().__init__(f"its worker process exited with code {code} mid-cell"
                         + (f" (killed by signal {-code})" if code is not None and code < 0 else ""))
        self.task, self.code = task, code


class TaskTimedOut(Exception):
    """A task ran past its time limit; its worker was killed."""

    def __init__(self, task: Any, timeout_s: float):
        super().__init__(f"still running after its time limit of {timeout_s:g} s (--cell-timeout); it was stopped")
        self.task, self.timeout_s = task, timeout_s


def keep_from_workers(fd: int | None) -> None:
    """Workers forked from now on close ``fd`` first (None: forget every registered descriptor)."""
    if fd is None:
        _PRIVATE_FDS.clear()
    else:
        _PRIVATE_FDS.add(fd)


def pause_clock() -> None:
    """In a worker of :func:`run_workers`: the running task waits for a resource another task holds; its time
    limit is suspended until :func:`restart_clock` (elsewhere: nothing)."""
    if _TASK_CONN is not None:
        _TASK_CONN.send((_PAUSE, None))


def restart_clock() -> None:
    """In a worker of :func:`run_workers`: the running task's time limit counts from now (elsewhere: nothing)."""
    if _TASK_CONN is not None:
        _TASK_CONN.send((_CLOCK, None))


def _worker(parent: int, conn, fn: Callable, tasks: Sequence) -> None:
    global _TASK_CONN
    die_with_parent(parent)
    _TASK_CONN = conn
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for fd in _PRIVATE_FDS:
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        while True:
            i = conn.recv()
            if i is None:
                break
            conn.send((i, fn(tasks[i])))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        pass  # the main process is gone or ending us: leave quietly
    finally:
        os._exit(0)  # never run the main process's atexit handlers or flush its buffers twice


def run_workers(fn: Callable[[Any], Any], tasks: Sequence, jobs: int, timeout_s: float | Sequence[float | None] | None,
                waiting: Sequence[bool] | None = None,
                keys: Sequence[str | None] | None = None,
                waiting_jobs: int | Sequence[int] | None = None) -> Iterator[tuple[Any, Any]]:
    """``fn(task)`` for every task in up to ``jobs`` forked workers; yields ``(task, result)`` in completion order.

    ``fn`` must return normally (catch what a task may raise and return it as
    a value); a worker that ends mid-task raises :class:`WorkerDied`, a task
    past ``timeout_s`` raises :class:`TaskTimedOut` (one limit for every task,
    or a list with each task's own; None: no limit).  Closing the iterator
    (or any error, Ctrl-C included) SIGKILLs every worker and reaps it.

    ``waiting[i]`` true marks a task that spends its time waiting, not
    computing (e.g. for a server's timeout): such tasks get up to
    ``waiting_jobs`` workers of their own (default ``jobs``) beside the
    others, whose workers also take them once nothing else is left; a
    waiting task's worker never takes another.  A list of ``waiting_jobs``
    gives each task its own lane size (tasks of several experiments in one
    pool): a waiting task starts in that lane only while fewer of the lane's
    workers than its size are busy.
    With ``jobs`` = 1 every task runs alone, in order.

    ``keys[i]`` (None: no key) names what task ``i`` keeps warm in its worker
    (a framework's env server: a second worker would start a second one).
    A worker that gets its next task takes, in this order: the first task of
    the key it last ran, the first task of a key no other worker has run
    last, the first task.  Without keys, tasks go out in order.
    """
    import multiprocess
    from multiprocess.connection import wait

    if not tasks:
        return
    ctx = multiprocess.get_context("fork")
    waits = list(waiting) if waiting is not None and jobs > 1 else [False] * len(tasks)  # one job: one at a time
    limits = list(timeout_s) if isinstance(timeout_s, (list, tuple)) else [timeout_s] * len(tasks)
    sizes = list(waiting_jobs) if isinstance(waiting_jobs, (list, tuple)) else [waiting_jobs or jobs] * len(tasks)
    todo = {lane: [i for i in reversed(range(len(tasks))) if waits[i] == lane] for lane in (False, True)}

    keyed = keys is not None and any(k is not None for k in keys)  # no key at all: in order, no search
    last: dict[Any, str | None] = {}  # a worker's end of the pipe -> the key of the task it ran last

    def take(conn, lane: bool) -> int | None:  # the next task for this worker, of its lane
        for queue in (todo[True],) if lane else (todo[False], todo[True]):
            order = range(len(queue) - 1, -1, -1)  # the queue's first task is its last item
            if lane:  # only a task whose lane size leaves room beside the lane's busy workers
                busy = sum(1 for c, s in workers.items() if s[2] and s[1] is not None and c is not conn)
                order = [j for j in order if sizes[queue[j]] > busy]
            if order:
                at = order[0]
                if keyed:
                    mine = last.get(conn)
                    held = {k for c, k in last.items() if c is not conn and k is not None}
                    same = next((j for j in order if keys[queue[j]] == mine), None) if mine is not None else None
                    at = same if same is not None else next((j for j in order if keys[queue[j]] not in held), at)
                    last[conn] = keys[queue[at]]
                return queue.pop(at)
        return None

    workers: dict[Any, list] = {}  # our end of the pipe -> [process, None | (task index, started), waiting lane]
    try:
        lanes = {False: max(1, jobs), True: max([1, *(sizes[i] for i in todo[True])])}
        for lane in [False] * min(lanes[False], len(todo[False])) + [True] * min(lanes[True], len(todo[True])):
            ours, theirs = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(os.getpid(), theirs, fn, tasks), daemon=True)
            proc.start()
            theirs.close()
            workers[ours] = [proc, None, lane]
        for conn, slot in workers.items():
            i = take(conn, slot[2])
            if i is not None:
                conn.send(i)
                slot[1] = (i, time.monotonic())
        while any(slot[1] is not None for slot in workers.values()):
            busy = {conn: slot for conn, slot in workers.items() if slot[1] is not None}
            ends = [started + limits[i] for i, started in (s[1] for s in busy.values()) if limits[i] is not None]
            first = min(ends, default=math.inf)  # the first task to reach its limit (a paused one never does)
            wait_s = None if first == math.inf else max(0.0, first - time.monotonic())
            ready = wait([*busy, *(s[0].sentinel for s in busy.values())], wait_s)
            for conn, slot in busy.items():
                proc, (i, started), lane = slot
                if conn in ready:
                    try:
                        got, result = conn.recv()
                    except EOFError:
                        proc.join()
                        raise WorkerDied(tasks[i], proc.exitcode) from None
                    if got in (_CLOCK, _PAUSE):  # paused: started at infinity, never past its limit
                        slot[1] = (i, time.monotonic() if got == _CLOCK else math.inf)
                        continue
                    slot[1] = None
                    nxt = take(conn, lane)
                    if nxt is not None:
                        conn.send(nxt)
                        slot[1] = (nxt, time.monotonic())
                    yield tasks[got], result
                elif proc.sentinel in ready:
                    proc.join()
                    raise WorkerDied(tasks[i], proc.exitcode)
                elif limits[i] is not None and time.monotonic() - started >= limits[i]:
                    raise TaskTimedOut(tasks[i], limits[i])
    finally:
        for conn, (proc, slot, _) in workers.items():
            if proc.is_alive() and slot is None:
                try:
                    conn.send(None)  # idle: end of tasks, it leaves at once
                except OSError:
                    proc.kill()
            elif proc.is_alive():
                proc.kill()  # busy (an error, Ctrl-C, a closed iterator): its children die with it
        for conn, (proc, _, _) in workers.items():
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join()
            conn.close()
