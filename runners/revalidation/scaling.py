"""Validation latency against recorded reads, measured with pytest-benchmark (ATR paper §5, Figure 2).

The paper's scaling result: as the *unrelated* reads a run recorded grow
from 13 to 4,093 (2^k - 3), ATR's validation stays flat while
FullScan, which rereads everything, grows with them (published values in
data/reference/).  Here a transaction with N recorded reads is the refund workload's real
reads and premises plus N - 9 unrelated reads (fields of an extra object that
no premise uses), followed by one relevant change: the predicate-preserving
limit change 100 -> 90, which ATR traces to one premise.  Only
``mechanism.validate(txn, store)`` is timed; a fresh copy of the recorded
transaction is made outside the timed region before every round, because
validation rebases it.

The measurement itself is ``benchmarks/revalidation/bench_scaling.py``, run by pytest-benchmark
in a subprocess (benchmarks want a quiet machine, so cells run one at a time).
A repetition is one pytest-benchmark benchmark of many rounds; its latency is
the median round.  Repetitions are interleaved over points and mechanisms
(repetition-major), so drift on a shared machine touches every point alike.
The JSON pytest-benchmark writes (machine info, raw round samples) is kept in
the run folder under ``benchmarks/``; the records are read from it.
pytest-benchmark's own storage, its working folder and every temporary file
of the subprocess live under the run folder's ``scratch/`` (never
``$TMPDIR``), so an interrupted run leaves nothing elsewhere and a rerun
wipes what it left.

**The floor.**  Beside the mechanisms, every point also times
:class:`Floor` (records with ``mechanism = "floor"``): the least work any
correct selective validation of this transaction must do — ask the change
log what changed, look each changed field up in the reverse index, reread
it, evaluate the one premise it touches, and build the commit tokens.  It
runs in the same benchmark session, interleaved with the mechanisms, so the
ratio ATR / floor at each read count says how much ATR spends beyond the
unavoidable, independently of the machine (the paper's absolute
microseconds are its own host's).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mechanisms import resolve
from runners.revalidation.agent import decide
from runners.benchmark import run_benchmark
from runners.plugins import call_plugin
from runners.experiment import Cell, DriftlabError, Experiment, Options, Sweep, artifact, derive_seed, points
from runners.revalidation.stores import MemoryStore
from scenarios.revalidation.workload import Workload, load_workloads
from vocabulary.revalidation import AgentTransaction, Outcome, Store, Validation

#: The paper's read counts, 2^k - 3 for k = 4..12.
DEFAULT_READS = tuple(2 ** k - 3 for k in range(4, 13))
QUICK_READS = (13, 253, 4093)
DEFAULT_MECHANISMS = ("ATR", "FullScan")
REPETITIONS = {"quick": 7, "paper": 7}  # the paper: 95% CIs over seven repetitions
ROUNDS = {"quick": 100, "paper": 1000}  # timed validations per repetition (the repetition's latency is their median)
WORKLOAD, CHANGE = "refund", "predicate_preserving"
UNRELATED = "unrelated"  # the object whose fields are the unrelated reads
BENCHMARKS = Path(__file__).resolve().parent.parent.parent / "benchmarks" / "revalidation"
FLOOR = "floor"  # the records' mechanism name of the floor


class Floor:
    """The least work a correct selective validation of one change must do (not a mechanism to deploy).

    Change log -> reverse index -> reread the changed field (value and
    version: the fresh version is the token) -> evaluate the premises it
    touches -> tokens for every bound field.  No sets, no sorting, no
    rebase of the observed values: it is exact only when the log holds
    changes to distinct premises' fields, as in the scaling benchmark (one
    change), which is all a floor needs to be.
    """

    name = FLOOR

    def validate(self, txn: AgentTransaction, store: Store) -> Validation:
        changed, seq = store.changes_since(txn.seq)
        deps, reads, observed, premises = txn.dependencies, txn.reads, txn.observed, txn.premises
        outcome, n, failed = Outcome.KEEP, 0, ()
        for ref in changed:
            ids = deps.get(ref)
            if ids:
                value, reads[ref] = store.read(ref)
                current = lambda r, ref=ref, value=value: value if r == ref else observed[r]  # noqa: E731
                for i in ids:
                    p = premises[i]
                    n += 1
                    if not p.check(current, observed):
                        failed += (p.id,)
                        if p.severity > outcome:
                            outcome = p.severity
        return Validation(outcome, n, tuple([(r, reads[r]) for r in deps]), failed)


def scaled_transaction(workload: Workload, reads: int, change: str = CHANGE) -> tuple[AgentTransaction, MemoryStore]:
    """The workload's transaction padded to ``reads`` recorded reads, after one change of class ``change``.

    The padding is ``reads - len(workload.reads)`` fields of the object
    ``unrelated``: recorded reads that no premise uses.
    """
    extra = reads - len(workload.reads)
    if extra < 0:
        raise DriftlabError(f"{reads} reads: the {workload.name} workload already records {len(workload.reads)}")
    if UNRELATED in workload.objects:
        raise DriftlabError(f"workload {workload.name} has an object named {UNRELATED!r}, which the padding needs")
    padding = [f"{UNRELATED}.read_{i:04d}" for i in range(extra)]
    store = MemoryStore({**workload.initial_state(), **dict.fromkeys(padding, 0)})
    txn = decide(workload, store)
    for ref in padding:
        txn.observed[ref], txn.reads[ref] = store.read(ref)
    if padding:
        txn.object_versions[UNRELATED] = store.version(UNRELATED)
    variant = workload.mutations[change].variants[0]
    store.write({c.ref: c.value for c in variant})
    return txn, store


def fresh_copy(txn: AgentTransaction) -> AgentTransaction:
    """The recorded transaction as it was before any validation rebased it."""
    return AgentTransaction(dict(txn.reads), dict(txn.observed), dict(txn.object_versions), txn.premises,
                            txn.intent, txn.seq, txn.dependencies)


class CountingStore:
    """A store that counts the reads a mechanism makes (its work, apart from premises)."""

    def __init__(self, store: Store):
        self.store, self.reads = store, 0

    def read(self, ref):
        self.reads += 1
        return self.store.read(ref)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def work(mechanism, txn: AgentTransaction, store: Store) -> dict:
    """One untimed validation of a fresh copy: outcome, premises evaluated, reads reread."""
    counting = CountingStore(store)
    v = mechanism.validate(fresh_copy(txn), counting)
    return {"outcome": v.outcome.name, "premises_evaluated": v.premises_evaluated, "reads_reread": counting.reads}


def records_from_json(data: dict, seed: int, json_name: str) -> dict[str, list]:
    """One record per benchmark in pytest-benchmark's JSON: (mechanism, reads, repetition) -> latency."""
    rows = []
    for b in data["benchmarks"]:
        x, s = b["extra_info"], b["stats"]
        rows.append({
            "mechanism": x["mechanism"], "reads": int(x["reads"]), "repetition": int(x["repetition"]),
            # the measurement draws nothing at random; the derived seed keeps the record schema uniform
            "seed": derive_seed(seed, x["mechanism"], x["reads"], x["repetition"]),
            "latency_us": s["median"] * 1e6,
            "outcome": x["outcome"], "premises_evaluated": int(x["premises_evaluated"]),
            "reads_reread": int(x["reads_reread"]), "benchmark": b["name"], "benchmark_json": json_name,
        })
    rows.sort(key=lambda r: (r["mechanism"], r["reads"], r["repetition"]))
    return {k: [r[k] for r in rows] for k in rows[0]}


class RevalidationScaling(Experiment):
    name = "revalidation_scaling"
    family = "revalidation"
    description = "validation latency of ATR and FullScan vs recorded reads 13..4093 (pytest-benchmark)"
    parallel = False  # benchmarks want a quiet machine
    uses_user_scenarios = False
    artifacts = (artifact("revalidation_scaling"),)
    sweeps = {"reads": Sweep("reads", points(int, 1, 2**16, "read counts must be between 1 and 65536 (a transaction of "
                                          "more reads is beyond what one machine's memory holds for every repetition)"),
                             "recorded reads per point, e.g. 13,29,61,125")}

    def points(self, profile: str, options: Options) -> tuple[int, ...]:
        return tuple(options.extra.get("reads") or (DEFAULT_READS if profile == "paper" else QUICK_READS))

    def check(self, options: Options) -> None:
        workload = load_workloads(())[WORKLOAD]
        low = min(options.extra.get("reads") or DEFAULT_READS)
        if low < len(workload.reads):
            raise DriftlabError(f"--reads {low}: the {WORKLOAD} workload's transaction already records "
                                f"{len(workload.reads)} reads; pick counts of at least {len(workload.reads)}")
        for m in options.mechanisms_for("revalidation") or DEFAULT_MECHANISMS:
            resolve(m)

    def seconds(self, cell: Cell, options: Options) -> float:
        """Every timed validation: repetitions x rounds x mechanisms x read points, each costing about a
        microsecond per recorded read (FullScan's slope; ATR's is far less), plus pytest-benchmark's set-up."""
        p = cell.p
        reads = sum(int(r) for r in str(p["reads_points"]).split(","))
        mechanisms = len(str(p["mechanisms"]).split(","))
        return cell.repetitions * (int(p["rounds"]) * mechanisms * (reads * 1e-6 + 1e-5) + 1.0)

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        reps = options.extra.get("repetitions") or REPETITIONS[profile]
        rounds = options.extra.get("rounds") or ROUNDS[profile]
        params = (("workload", WORKLOAD), ("change", CHANGE),
                  ("mechanisms", ",".join(options.mechanisms_for("revalidation") or DEFAULT_MECHANISMS)),
                  ("reads_points", ",".join(map(str, self.points(profile, options)))), ("rounds", rounds))
        return [Cell(self.name, params, reps, seed)]

    def run_cell(self, cell: Cell, options: Options) -> dict[str, list]:
        p = cell.p
        # each mechanism validates once here first, untimed: its own failure (a raise, a wrong return) is then one
        # line naming it, not the exit of the benchmark's child process
        txn, store = scaled_transaction(load_workloads(())[WORKLOAD], min(int(n) for n in p["reads_points"].split(",")))
        for name in p["mechanisms"].split(","):
            call_plugin(name, "validate", resolve(name)().validate, fresh_copy(txn), store, returns=Validation)
        # benchmarks/conftest.py appends DRIFTLAB_PLUGIN_PATH at the *end* of sys.path, so a user's own
        # mechanism (package.module:Class) still resolves from where driftlab was started.
        data, name = run_benchmark("bench_scaling", BENCHMARKS / "bench_scaling.py",
                                   [f"--scaling-reads={p['reads_points']}", f"--scaling-mechanisms={p['mechanisms']}",
                                    f"--scaling-repetitions={cell.repetitions}", f"--scaling-rounds={p['rounds']}"],
                                   options.run_dir, options.scratch, {"DRIFTLAB_PLUGIN_PATH": os.getcwd()})
        return records_from_json(data, cell.seed, name)
