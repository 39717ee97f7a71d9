"""Race pairs and cross-resource histories on a real database (ATR paper §5, "Races and failure modes").

Paper: "Across 7,000 SQLite race pairs, exactly one update committed per
pair, while checked policy tokens rejected all 100 cross-resource invalid
effects.  The target-only compare-and-set committed all 100 effects after
the policy limit became false."

Part A, **race pairs**: the literal interleaving ``race_pair``
(``faults/races.py``) — two worker processes, each with its own connection,
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
cell owns a fresh database (a SQLite file, or a PostgreSQL schema created
and dropped by the cell).  A record is one execution: the effects counted
from the target row afterwards, the commit answers, whether every inline
expectation held, and for race pairs how far the two commit attempts
overlapped in time.  ``--repetitions N`` sets the executions of every
history and binding.
"""
from __future__ import annotations

import math

from faults.races import CROSS_RESOURCE, RACE_PAIR, expected_commits
from runners.experiment import Cell, DriftlabError, Experiment, Options, derive_seed
from runners.interleaving import Interpreter
from runners.race_store import open_store, postgres_dsn

HISTORIES = {h.name: h for h in (RACE_PAIR, *CROSS_RESOURCE)}
#: (history, binding) -> executions per profile
PLAN = {
    (RACE_PAIR.name, "target_cas"): {"quick": 200, "paper": 7000},
    (RACE_PAIR.name, "unchecked"): {"quick": 20, "paper": 100},  # the negative control (not in the paper)
    **{(h.name, b): {"quick": 5, "paper": 25} for h in CROSS_RESOURCE for b in ("target_cas", "policy_token")},
}
CHUNK = {"quick": 100, "paper": 500}  # executions per cell


class RevalidationRaces(Experiment):
    name = "revalidation_races"
    family = "revalidation"
    description = "race pairs under version-token CAS; cross-resource histories: target-only CAS vs policy token"

    def check(self, options: Options) -> None:
        if options.backend not in ("sqlite", "postgres"):
            raise DriftlabError(f"--backend {options.backend!r}: expected sqlite or postgres")
        if options.backend == "postgres":
            try:
                import psycopg

                with psycopg.connect(postgres_dsn()) as conn:
                    conn.execute("select 1")
            except Exception as exc:  # noqa: BLE001 - any failure means the backend cannot be used
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise DriftlabError(f"--backend postgres: cannot connect ({first}); set DRIFTLAB_POSTGRES_DSN") from None

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

    def run_cell(self, cell: Cell, options: Options) -> dict[str, list]:
        p = cell.p
        history = HISTORIES[p["history"]]
        rows = []
        store = open_store(p["backend"], scratch=options.scratch)
        try:
            with Interpreter(store, p["binding"]) as interpreter:
                for i in range(cell.repetitions):
                    rep = p["first"] + i
                    x = interpreter.run(history, case=rep)
                    race = next((s.members for s in x.steps if s.op == "together"), ())
                    skew = overlap = float("nan")
                    if len(race) == 2:
                        a, b = race
                        skew = abs(a.start_ns - b.start_ns) / 1000
                        overlap = (min(a.end_ns, b.end_ns) - max(a.start_ns, b.start_ns)) / 1000
                    rows.append({
                        "repetition": rep, "seed": derive_seed(cell.seed, p["history"], p["binding"], rep),
                        "oracle_commits": history.oracle_commits,
                        "expected_commits": expected_commits(history, p["binding"]),
                        "commits": x.effects, "commits_reported": x.commits_reported, "rejections": x.rejections,
                        "as_expected": x.as_expected, "mismatch": x.mismatch, "errors": "; ".join(x.errors),
                        "start_skew_us": skew, "overlap_us": overlap, "wall_us": x.wall_ns / 1000,
                    })
        finally:
            store.drop()
        return {k: [r[k] for r in rows] for k in rows[0]}
