"""Race pairs and cross-resource histories on a real database (ATR paper §5, "Races and failure modes").

Paper: "Across 7,000 SQLite race pairs, exactly one update committed per
pair, while checked policy tokens rejected all 100 cross-resource invalid
effects.  The target-only compare-and-set committed all 100 effects after
the policy limit became false."

Part A, **race pairs**: the literal interleaving ``race_pair``
(``faults/revalidation/races.py``) — two worker processes, each with its own connection,
read the same target version, validate, and commit the same refund at the
same instant under the version-token compare-and-set (``target_cas``).  A
small number of pairs run the broken ``unchecked`` commit as a negative
control: it must refund twice.

Part B, **cross-resource histories**: the four literal histories in which
the policy (another table) becomes false between the agent's validation and
its commit, each run under ``target_cas`` (commits: a false allow) and
``policy_token`` (rejects).

Grid: backend (``--backend``, one per run) × history × binding × chunk of
executions, so cells run in parallel and an interrupted run resumes.  Each
cell owns a fresh database (a SQLite file under the run's ``scratch/``, or a
PostgreSQL schema created and dropped by the cell, :mod:`runners.revalidation.race_store`).

**History.**  Every operation of every actor (actor, name, start, end,
status, value with ``group`` = the execution's repetition) goes to the
cell's history (``histories/revalidation_races/<cell>.jsonl``).  An actor
that went silent (its store never answered) leaves an ``indeterminate``
operation: it is kept, never folded into an error count, and the
execution's verdict is then ``unknown`` unless a violation is proven
anyway.  An actor whose process ended by itself fails the cell: nothing in
a race kills one, so that is the lab's failure, never a result.

**Records.**  One per execution: the effects counted from the target row
afterwards (the audit read), the commit answers, the checkers' verdict on
the execution's history (:mod:`analysis.revalidation.checkers`:
``one_commit_per_pair`` for race pairs, ``rule_holds_at_commit`` for every
refund history; the worst prevails; the witnesses, which carry times, stay
in the history, where ``driftlab check`` prints them), whether every
inline expectation held, and for race pairs the timing of the overlap:
``overlap_us`` is how long both transactions were open together *after both
had read their token* (from the later read's end to the earlier commit's
end; positive by construction of the Hermitage-style pair, measured from the
actors' own clocks), ``start_skew_us`` how far apart the two guarded updates
started, ``lock_retries`` how many of the pair's updates SQLite refused with
``SQLITE_BUSY``/``SQLITE_BUSY_SNAPSHOT`` and retried in a write transaction
with the same token, and ``refused_by_cas`` how many commits the
compare-and-set (or the policy token) refused.  ``--repetitions N`` sets the
executions of every history and binding.
"""
from __future__ import annotations

import math
from dataclasses import replace

from faults.revalidation.races import CROSS_RESOURCE, RACE_PAIR, Interleaving, expected_commits
from runners.backends import check_postgres
from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, artifact, derive_seed
from runners.interleaving import Execution, Interpreter
from runners.revalidation.race_actor import REPLY_TIMEOUT_S, RaceDomain
from runners.backends import postgres_dsn
from runners.revalidation.race_store import open_store
from vocabulary import INDETERMINATE, OK, History, Verdict

HISTORIES = {h.name: h for h in (RACE_PAIR, *CROSS_RESOURCE)}
#: (history, binding) -> executions per profile
PLAN = {
    (RACE_PAIR.name, "target_cas"): {"quick": 200, "paper": 7000},
    (RACE_PAIR.name, "unchecked"): {"quick": 20, "paper": 100},  # the negative control (not in the paper)
    **{(h.name, b): {"quick": 5, "paper": 25} for h in CROSS_RESOURCE for b in ("target_cas", "policy_token")},
}
CHUNK = {"quick": 100, "paper": 500}  # executions per cell
NAN = float("nan")


def timing(x: Execution) -> dict:
    """Overlap of a race pair, from the actors' own clocks (µs; NaN when the execution is not a pair)."""
    commits = [op for op in x.operations if op.name == "commit" and "together" in op.value]
    if len({op.actor for op in commits}) != 2:
        return {"overlap_us": NAN, "start_skew_us": NAN}
    a, b = commits
    reads = {w: max((op.end for op in x.operations if op.actor == w and op.name == "read_target"
                     and op.end is not None and op.end <= (c.start or 0)), default=None) for w, c in
             ((a.actor, a), (b.actor, b))}
    ends = [op.end for op in commits]
    overlap = NAN
    if None not in ends and None not in reads.values():
        overlap = (min(ends) - max(reads.values())) * 1e6
    return {"overlap_us": overlap, "start_skew_us": abs(a.start - b.start) * 1e6}


def record(x: Execution, history: Interleaving, binding: str, seed: int) -> dict:
    """One execution's record, its verdict taken from the checkers on its own history."""
    from analysis.revalidation.checkers import verdicts_by_group

    judged = verdicts_by_group(History("revalidation", tuple(x.operations))).get(x.case)
    verdict = judged.verdict if judged else Verdict.VALID
    commits = [op for op in x.operations if op.name == "commit"]
    return {
        "repetition": x.case, "seed": seed,
        "oracle_commits": history.oracle_commits, "expected_commits": expected_commits(history, binding),
        "commits": int(x.audit["refunds"]), "commits_reported": sum(op.status == OK for op in commits),
        "rejections": sum(op.value.get("result") == "rejected" for op in commits),
        "refused_by_cas": sum(bool(op.value.get("refused_by")) for op in commits),
        "lock_retries": sum(bool(op.value.get("retried_after")) for op in commits),
        "indeterminate": sum(op.status == INDETERMINATE for op in x.operations),
        "verdict": verdict.value,  # its witness (with times) is in the history: `driftlab check` prints it
        "as_expected": x.as_expected, "mismatch": x.mismatch, "errors": "; ".join(x.errors),
        **timing(x), "wall_us": x.wall_ns / 1000,
    }


class RevalidationRaces(Experiment):
    name = "revalidation_races"
    family = "revalidation"
    description = "race pairs under version-token CAS; cross-resource histories: target-only CAS vs policy token"
    uses_user_scenarios = False
    seconds_per_execution = 0.02
    uses_backend = True
    uses_mechanisms = False
    artifacts = (artifact("revalidation_races"),)

    def check(self, options: Options) -> None:
        if options.backend not in ("sqlite", "postgres"):
            raise DriftlabError(f"--backend {options.backend!r}: expected sqlite or postgres")
        if options.backend == "postgres":
            why = check_postgres(postgres_dsn())
            if why:
                raise DriftlabError(f"--backend postgres: cannot connect ({why}); set DRIFTLAB_POSTGRES_DSN")

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        cells = []
        for (history, binding), sizes in PLAN.items():
            n = options.extra.get("repetitions") or sizes[profile]
            part = "pairs" if history == RACE_PAIR.name else "cross_resource"
            for chunk in range(math.ceil(n / CHUNK[profile])):
                size = min(CHUNK[profile], n - chunk * CHUNK[profile])
                params = (("backend", options.backend), ("part", part), ("history", history),
                          ("binding", binding), ("first", chunk * CHUNK[profile]))
                cells.append(Cell(self.name, params, size, seed))
        return cells

    def run_cell(self, cell: Cell, options: Options) -> CellOutput:
        p = cell.p
        history = HISTORIES[p["history"]]
        if p["binding"] not in history.bindings:
            raise ValueError(f"history {history.name} declares no results for binding {p['binding']!r}")
        rows, operations = [], []
        store = open_store(p["backend"], scratch=options.scratch)
        try:
            with Interpreter(RaceDomain(store, p["binding"]), p["binding"], reply_timeout_s=REPLY_TIMEOUT_S) as run:
                for i in range(cell.repetitions):
                    rep = p["first"] + i
                    x = run.run(history, case=rep)
                    rows.append(record(x, history, p["binding"], derive_seed(cell.seed, p["history"], p["binding"], rep)))
                    operations += [replace(op, index=len(operations) + n) for n, op in enumerate(x.operations)]
        finally:
            store.drop()
        meta = {"experiment": self.name, "cell": cell.id, **p, "seed": cell.seed,
                "model": "one commit per race pair; no refund while the rule is false at commit"}
        return CellOutput({k: [r[k] for r in rows] for k in rows[0]},
                          History("revalidation", tuple(operations), meta))
