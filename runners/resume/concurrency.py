"""``resume_concurrency``: k processes resume one parked interrupt at the same instant.

Serves the paper's concurrent-delivery result (arXiv 2608.03836): backend
{sqlite, postgres} x k {2, 3, 4, 8, 16} x start jitter {0, 1, 5, 25} ms = 40
cells per runtime (the grid is ``scenarios/resume/concurrency.toml``).  This
experiment always runs both backends, whatever ``--backend`` says; PostgreSQL
cells are skipped, with a one-line note, only if PostgreSQL is unreachable.

Per cell a warm pool of k resumer processes is forked once
(runners/resume/procs.py ``RacerPool``); per repetition the driver (this
process) starts a run that parks, the k racers meet at one barrier, each
waits its own seeded jitter and resumes.  The record counts the gated
effects the run fired, the racers served (parked or done), refused, failed
(the framework raised: a loud answer, neither served nor refused) and
unanswered, and the checkers' CO and EO verdicts on the race's history.  On
PostgreSQL a race whose racers hold more than :data:`RACE_CONNECTIONS`
connections has the server to itself (:func:`one_big_race_at_a_time`): the
racers' connections must fit its ``max_connections``.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

from analysis.resume.concurrency import RACER_COUNTS, racer_counts
from faults.resume import concurrent_resume
from runners.resume import common as rc
from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, artifact, derive_seed
from runners.resume.cells import Recorder, setup_backend
from runners.resume.procs import build, racers
from scenarios.resume.loader import by_kind
from vocabulary import History
from vocabulary.resume import CHECKPOINT, DONE, EFFECT, PARKED, STORES_READ, TRACE


def grid(options: Options):
    grids = list(by_kind(rc.resume_scenarios(options), "concurrency").values())
    if not grids:
        raise DriftlabError("resume_concurrency: no scenario of kind 'concurrency' (scenarios/resume/concurrency.toml)")
    return grids[0]


#: a race whose racers hold more PostgreSQL connections than this has the server to itself
#: (:func:`one_big_race_at_a_time`): two shared races then hold at most 72 of a stock server's 97 client slots,
#: drivers and the lab's own connections beside them.  Measured peaks of a k = 16 race: 35-36 connections for
#: the lab's runtimes, LangGraph and LlamaIndex (2 per racer), 83 for DBOS (5 per racer)
RACE_CONNECTIONS = 36
RACE_LOCK, INTENT_LOCK = 0x64726674, 0x64726675  # the advisory locks' keys ("drft", "drfu")
POLL_S = 0.1


def _take(conn, sql: str, key: int) -> None:
    """Try the lock until it is granted: a statement waiting for it would hold a snapshot open, and DBOS's
    migration (``CREATE INDEX CONCURRENTLY``, in the holder's cell) waits for every such snapshot: a deadlock."""
    while not conn.execute(sql, (key,)).fetchone()[0]:
        time.sleep(POLL_S)


@contextmanager
def one_big_race_at_a_time(backend_kind: str, k: int, per_racer: int) -> Iterator[None]:
    """A race cell on PostgreSQL holds the server's advisory lock: shared, or exclusive when its k racers hold
    more than :data:`RACE_CONNECTIONS` connections (``per_racer`` each: the runtime's declared
    ``connections_per_racer``).

    Each racer is a process with connections of its own (a framework's pools,
    the lab's ledger): DBOS's k = 16 racers hold 82 of a stock server's 100
    connections, so a big race beside any other race cell of another worker
    can be refused connections, and a racer that cannot connect breaks its
    race.  Small races share the server; a big one first takes the intent
    lock (no race starts after it), then waits until the running ones end.
    Both are tried every :data:`POLL_S` (:func:`_take`), never waited for in
    a statement.  They are released when their connection closes, a killed
    worker's too.  The cell's time limit is paused while it waits and counts
    from when it holds the lock (:func:`runners.workers.pause_clock`,
    :func:`~runners.workers.restart_clock`): the wait never eats it.
    """
    if backend_kind != "postgres":
        yield
        return
    import psycopg

    from runners.backends import postgres_dsn
    from runners.workers import pause_clock, restart_clock

    with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
        pause_clock()
        if k * per_racer > RACE_CONNECTIONS:
            _take(conn, "SELECT pg_try_advisory_lock(%s)", INTENT_LOCK)
            _take(conn, "SELECT pg_try_advisory_lock(%s)", RACE_LOCK)
        else:
            _take(conn, "SELECT pg_try_advisory_lock_shared(%s)", INTENT_LOCK)
            _take(conn, "SELECT pg_try_advisory_lock_shared(%s)", RACE_LOCK)
            conn.execute("SELECT pg_advisory_unlock_shared(%s)", (INTENT_LOCK,))
        restart_clock()
        yield


def race_cell(experiment: str, runtime: str, backend_kind: str, k: int, jitter_ms: float, repetitions: int,
              seed: int, options: Options, per_property: bool = False, fault_cell: str = "") -> CellOutput:
    """``repetitions`` races of k warm resumers on one backend; records per race (or per race x property)."""
    with one_big_race_at_a_time(backend_kind, k, rc.connections_per_racer(runtime)):
        return _races(experiment, runtime, backend_kind, k, jitter_ms, repetitions, seed, options, per_property,
                      fault_cell)


def _races(experiment: str, runtime: str, backend_kind: str, k: int, jitter_ms: float, repetitions: int,
           seed: int, options: Options, per_property: bool, fault_cell: str) -> CellOutput:
    from analysis.resume.checkers import CO_INERT, check_all

    g = grid(options)
    graph = by_kind(rc.resume_scenarios(options), "graph")[g.graph].graph
    gated = graph.task(graph.names.index(graph.gated_node))
    backend = rc.make_backend(backend_kind, options)
    rec = Recorder(graph, {"experiment": experiment, "runtime": runtime, "backend": backend_kind, "k": k,
                           "jitter_ms": jitter_ms})
    rows: list[dict] = []
    try:
        setup_backend(runtime, backend, graph)
        with racers(k, runtime, backend, graph) as pool:
            driver = build(runtime, backend, graph)
            try:
                for rep in range(repetitions):
                    rep_seed = derive_seed(seed, experiment, runtime, backend_kind, k, jitter_ms, rep)
                    run = f"race-{k}-{jitter_ms:g}-{rep}"
                    first = len(rec.ops)
                    t0 = time.time()
                    st = driver.start(run, f"order-{rep}")
                    rec.add("driver", "start", "ok" if st.served else "fail", t0, time.time(),
                            {"run": run, "op": f"{run}/start", "state": st.state, "group": run})
                    labels = [f"{run}/resume#{i}" for i in range(k)]
                    jitters = concurrent_resume.plan(k, jitter_ms, rep_seed)
                    answers = pool.race(run, g.value, labels, jitters)
                    for i, a in enumerate(answers):
                        if a is None or "status" not in a:
                            rec.add(f"racer-{i}", "resume", "indeterminate", None, None,
                                    {"run": run, "op": labels[i], "resume": g.value, "group": run})
                            continue
                        s = a["status"]
                        rec.add(f"racer-{i}", "resume", "ok" if s["state"] in (PARKED, DONE) else "fail",
                                a["start"], a["end"], {"run": run, "op": labels[i], "resume": g.value, "group": run,
                                                       "state": s["state"], "reason": s.get("reason", ""),
                                                       "pid": a["pid"], "jitter_s": jitters[i]})
                    for cp in driver.checkpoints(run):
                        rec.add("store", CHECKPOINT, "ok", time.time(), time.time(), cp.to_dict())
                    effects = driver.ledger.effects(run)
                    for e in effects:
                        rec.add("ledger", EFFECT, "ok", e.at, e.at, e.to_dict())
                    for t in driver.ledger.traces(run):
                        rec.add("ledger", TRACE, "ok", t.at, t.at, t.to_dict())
                    rec.meta[STORES_READ] = True
                    mine = History("resume", tuple(rec.ops[first:]), rec.history().meta)
                    results = check_all(mine)
                    inert = CO_INERT.check(mine).verdict.value
                    got = [a for a in answers if a and "status" in a]
                    starts = [a["start"] for a in got]
                    base = {"repetition": rep, "seed": rep_seed,
                            "effects_fired": sum(1 for e in effects if e.task == gated), **racer_counts(answers),
                            "start_skew_us": (max(starts) - min(starts)) * 1e6 if starts else 0.0}
                    if per_property:
                        for prop, r in results.items():
                            rows.append({"repetition": rep, "seed": rep_seed, "operation": "resume",
                                         "crash_point": "-", "property": prop, "verdict": r.verdict.value,
                                         "effects_fired": base["effects_fired"], "effects_expected": 1,
                                         "witness": rc.stable_witness(r.witnesses[0].explanation, mine)
                                         if r.witnesses else "",
                                         "sigkills": 0, "processes": k + 1, "wall_us": 0.0, "co_inert": inert,
                                         **{c: base[c] for c in RACER_COUNTS}})
                    else:
                        rows.append({**base, "co_verdict": results["CO"].verdict.value, "co_inert_verdict": inert,
                                     "eo_verdict": results["EO"].verdict.value,
                                     "liveness_verdict": results["liveness"].verdict.value})
            finally:
                driver.close()
    finally:
        rc.discard(backend)
    return CellOutput({key: [r[key] for r in rows] for key in rows[0]}, rec.history())


class ResumeConcurrency(Experiment):
    name = "resume_concurrency"
    family = "resume"
    description = "k processes resume one parked interrupt: backend x k x jitter, saturation = effects fired / k"
    artifacts = (artifact("resume_concurrency"),)
    seconds_per_execution = 0.1

    def seconds(self, cell: Cell, options: Options) -> float:
        """Per race: the racers' round trip, plus the graph's declared work (``work_ms``) run once."""
        g = grid(options)
        graph = by_kind(rc.resume_scenarios(options), "graph")[g.graph].graph
        return cell.repetitions * (self.seconds_per_execution + sum(n.work_ms for n in graph.nodes) / 1000)

    def check(self, options: Options) -> None:
        rc.check_backends(options, grid(options).backends)
        rc.runtimes(options)

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        g = grid(options)
        reps = options.extra.get("repetitions") or g.repetitions[profile]
        if reps < 1:
            raise DriftlabError(f"--repetitions must be at least 1, got {reps}")
        backends = list(g.backends)
        if "postgres" in backends and rc.postgres_reachable():
            rc.note(f"resume_concurrency: PostgreSQL unreachable ({rc.postgres_reachable()}): postgres cells skipped")
            backends.remove("postgres")
        elif "postgres" in backends:
            rc.drop_orphan_schemas()
        ks, jitters = g.grid(profile)
        return [Cell(self.name, (("runtime", rt), ("backend", b), ("k", k), ("jitter_ms", j)), reps, seed)
                for rt in rc.runtimes(options) for b in backends for k in ks for j in jitters
                if rt in rc.runtimes(options, b)]

    def run_cell(self, cell: Cell, options: Options) -> CellOutput:
        p = cell.p
        return race_cell(self.name, p["runtime"], p["backend"], int(p["k"]), float(p["jitter_ms"]), cell.repetitions,
                         cell.seed, options)
