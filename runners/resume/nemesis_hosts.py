"""``resume_hosts``: k racers on k hosts beside k racers on one host, against the lab's private store (issue 25).

Serves issue 25 §6.  The concurrency experiment's racers are processes of one
machine talking to a server over loopback; a deployment's approval workers
are on separate hosts.  Per cell (runtime x placement x k) the lab makes the
hosts (``runners/resume/hosts.py``: ``k_hosts`` = one network namespace and
veth link per racer; ``one_host`` = every racer in one namespace, over one
link) and its private PostgreSQL cluster (``runners/resume/pgcluster.py``).
Per race the driver starts a run that parks; k resumer processes, each forked
and moved into its host, connect and stop at a start line; once all stand
there the parent lets them go at once (a write on each one's pipe), and each
resumes.  No fault is injected: what differs between the placements is only
where the racers are.  Recorded per race: the gated effect's count
(saturation = effects / k), served / refused / indeterminate racers, the
spread of the racers' start times, and the checkers' CO, EO and liveness
verdicts on the race's history.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path

from faults.resume import concurrent_resume
from faults.resume.nemesis import SUBJECTS
from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, artifact
from runners.resume import hosts as hostlib
from runners.resume import pgcluster
from runners.resume.cells import Recorder, setup_backend
from runners.resume.nemesis import CALL_S, READY, QUICK_SUBJECTS, _Call, _record, _say_swept, requirements
from runners.resume.procs import build
from vocabulary import History
from vocabulary.resume import CHECKPOINT, DEFAULT_GRAPH, DONE, EFFECT, PARKED, REFUSED, STORES_READ, TRACE, Backend

PLACEMENTS = ("one_host", "k_hosts")
RACES = {"quick": 3, "paper": 10}


def race_cell(runtime: str, placement: str, k: int, races: int, scratch: Path) -> tuple[list[dict], History]:
    """``races`` races of k racers placed as ``placement`` (module docstring): one record per race."""
    from analysis.resume.checkers import check_all

    graph = DEFAULT_GRAPH
    gated = graph.task(graph.names.index(graph.gated_node))
    rec = Recorder(graph, {"experiment": "resume_hosts", "runtime": runtime, "placement": placement, "k": k,
                           "backend": "postgres"})
    rows = []
    with hostlib.Hosts(k if placement == "k_hosts" else 1) as hs, \
            pgcluster.Cluster(scratch, [h.store_addr for h in hs.hosts], uuid.uuid4().hex[:6]) as pg:
        local = Backend("postgres", pg.dsn(), "hst")
        setup_backend(runtime, local, graph)
        for rep in range(races):
            run = f"hosts-{placement}-{k}-{rep}"
            first = len(rec.ops)
            driver = build(runtime, local, graph)
            t0 = time.time()
            try:
                st = driver.start(run, f"order-{rep}")
            finally:
                driver.close()
            rec.add("driver", "start", "ok" if st.state == PARKED else "fail", t0, time.time(),
                    {"run": run, "op": f"{run}/start", "state": st.state, "group": run})
            calls = []
            try:
                for i in range(k):
                    h = hs[i if placement == "k_hosts" else 0]
                    calls.append(_Call(h.netns, runtime, Backend("postgres", pg.dsn(h.store_addr), "hst"), graph,
                                       "resume", run, f"{run}/resume@h{h.index}#{i + 1}", (READY, "")))
                for c in calls:
                    if c.wait_at(CALL_S) is None:
                        raise DriftlabError(f"resume_hosts: {runtime}: racer {c.label} never reached its start line"
                                            f" ({c.answer})")
                for c in calls:
                    c.go()
                for c in calls:
                    if c.result(CALL_S) is None:
                        raise DriftlabError(f"resume_hosts: {runtime}: racer {c.label} gave no answer in {CALL_S:g} s")
                errors = [c for c in calls if "error" in c.answer]
                if errors:
                    raise DriftlabError(f"resume_hosts: {runtime}: {errors[0].label} raised "
                                        f"{errors[0].answer['error']} (the runtime's own code failed: never an outcome)")
                for c in calls:
                    _record(rec, c, run)
            finally:
                for c in calls:
                    c.close()
            reader = build(runtime, local, graph)
            try:
                now = time.time()
                for cp in reader.checkpoints(run):
                    rec.add("store", CHECKPOINT, "ok", now, now, cp.to_dict())
                effects = reader.ledger.effects(run)
                for e in effects:
                    rec.add("ledger", EFFECT, "ok", e.at, e.at, e.to_dict())
                for t in reader.ledger.traces(run):
                    rec.add("ledger", TRACE, "ok", t.at, t.at, t.to_dict())
            finally:
                reader.close()
            rec.meta[STORES_READ] = True
            results = check_all(History(rec.history().family, tuple(rec.ops[first:]), rec.history().meta))
            starts = [c.answer["start"] for c in calls]
            states = [c.answer.get("status", {}).get("state") for c in calls]
            fired = sum(1 for e in effects if e.task == gated)
            rows.append({"repetition": rep, "effects_fired": fired,
                         "saturation": concurrent_resume.saturation(fired, k),
                         "served": sum(s in (PARKED, DONE) for s in states), "refused": states.count(REFUSED),
                         "indeterminate": sum("indeterminate" in c.answer for c in calls),
                         "failed": sum(s not in (PARKED, DONE, REFUSED) and "indeterminate" not in c.answer
                                       for s, c in zip(states, calls)),
                         "start_skew_ms": (max(starts) - min(starts)) * 1000,
                         "hosts": len(hs.hosts), "co_verdict": results["CO"].verdict.value,
                         "eo_verdict": results["EO"].verdict.value,
                         "liveness_verdict": results["liveness"].verdict.value})
    return rows, rec.history()


class ResumeHosts(Experiment):
    name = "resume_hosts"
    family = "resume"
    description = "k racers on k hosts (network namespaces) beside k racers on one host: saturation, served/refused"
    artifacts = (artifact("resume_hosts"),)
    seconds_per_execution = 0.6
    profile_repetitions = RACES

    def check(self, options: Options) -> None:
        self.skipped(options, requirements(), "network namespaces and a private PostgreSQL")

    def prepare(self, options: Options) -> None:
        if not requirements():
            _say_swept()

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        if requirements():
            return []  # said in check(): skipped in a larger selection, refused when named
        races = options.extra.get("repetitions") or RACES[profile]
        if races < 1:
            raise DriftlabError(f"--repetitions must be at least 1, got {races}")
        subjects = options.mechanisms_for("resume") or (QUICK_SUBJECTS if profile == "quick" else SUBJECTS)
        ks = (2,) if profile == "quick" else (2, 4, 8)
        return [Cell(self.name, (("runtime", rt), ("placement", pl), ("k", k)), races, seed)
                for rt in subjects for k in ks for pl in PLACEMENTS]

    def run_cell(self, cell: Cell, options: Options) -> CellOutput:
        p = cell.p
        scratch = Path(options.run_dir or "/tmp") / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            rows, history = race_cell(p["runtime"], p["placement"], int(p["k"]), cell.repetitions, scratch)
        except (hostlib.HostsError, pgcluster.ClusterError) as exc:
            raise DriftlabError(f"resume_hosts: the lab's set-up failed: {exc}") from None
        return CellOutput({key: [r[key] for r in rows] for key in rows[0]}, history)
