"""``agent_matrix``: the refund agent under every mechanism stack, every scenario case, SQLite and PostgreSQL.

Serves issue 15: stock LangGraph shows every failure, each layer of the guard
removes exactly its own (independence), all three together show none.  A
cell is (stack, backend, scenario, case); each repetition is one execution in
real processes (:mod:`runners.agent.execution`) on fresh stores, judged at
once by the checkers of all three families and the agent's own
(:mod:`analysis.agent.checkers`).  One record per execution: the cell's
parameters, the oracle and the outcome the ``act`` node decided, and per
failure its verdict and witness.  The cell's history (one group per
execution) is kept for ``driftlab check``.

Both backends always run (whatever ``--backend`` says); PostgreSQL cells are
skipped with a one-line note only if the server does not answer.
"""
from __future__ import annotations

import sys
import time

from analysis.artifact import Artifact
from runners import backends
from runners.agent import execution
from runners.agent.stores import fresh
from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, derive_seed, lazy
from scenarios import load_scenarios
from vocabulary import History
from vocabulary.agent import FAILURES, FAMILY, STACKS

BACKENDS = ("sqlite", "postgres")


def agent_scenarios(options: Options) -> dict:
    return load_scenarios(tuple(options.scenario_dirs), family=FAMILY)[FAMILY]


def stacks(options: Options) -> list[str]:
    from mechanisms.agent.stacks import stack

    named = options.mechanisms_for(FAMILY)
    if named is None:
        return list(STACKS)
    out = []
    for name in named:
        try:
            out.append(stack(name).name)
        except ValueError as exc:
            raise DriftlabError(f"agent: {exc}") from None
    return list(dict.fromkeys(out))


def run_executions(experiment: str, scenario, case_name: str, stack_name: str, backend: str, repetitions: int,
                   seed: int, options: Options, planted=()) -> CellOutput:
    """``repetitions`` executions of one scenario case under one stack on one backend."""
    from analysis.agent.checkers import failures, judge
    from mechanisms.agent.stacks import stack

    st = stack(stack_name, planted)
    case = scenario.case(case_name)
    rows, ops, groups = [], [], {}
    for rep in range(repetitions):
        t0 = time.perf_counter()
        with fresh(backend, options.scratch, durable_ledger=False) as stores:
            execution.setup(st, scenario, stores)
            history = execution.execute(scenario, case, st, stores, f"r{rep}", str(rep))
        wall = (time.perf_counter() - t0) * 1e6
        found = failures(history, judge(history))
        release = next((op for op in history.operations if op.name == "release"), None)
        calls = [op for op in history.operations if op.name in ("start", "resume", "recover")]
        row = {"change": case.change, "deployment": case.deployment, "approvers": case.approvers,
               "crash": case.crash, "durability": scenario.durability(case), "repetition": rep,
               "seed": derive_seed(seed, experiment, stack_name, backend, case_name, rep),
               "oracle": scenario.oracle(case.change), "outcome": release.value["outcome"] if release else "-",
               "premises_evaluated": int(release.value.get("evaluated", 0)) if release else 0,
               "processes": len(calls), "sigkills": sum(op.indeterminate for op in calls), "wall_us": wall}
        for f in FAILURES:
            row[f] = found[f]["verdict"]
            row[f"{f}_witness"] = found[f]["witness"]
        rows.append(row)
        base = len(ops)
        ops += [op.__class__(base + i, op.actor, op.name, op.status, op.start, op.end, op.value)
                for i, op in enumerate(history.operations)]
        groups[str(rep)] = {"stack": st.name, "backend": backend}
        meta = history.meta
    history = History(FAMILY, tuple(ops), {**meta, "groups": groups, "repetitions": repetitions})
    return CellOutput({k: [r[k] for r in rows] for k in rows[0]}, history)


class AgentMatrix(Experiment):
    name = "agent_matrix"
    family = FAMILY
    description = ("the refund agent (LangGraph) under stock and every stack of the guard's layers: stack x failure "
                   "on SQLite and PostgreSQL, real SIGKILL and concurrent approvers, judged by all families' checkers")
    artifacts = (Artifact("agent_matrix", table=lazy("analysis.agent.matrix:table"),
                          report=lazy("analysis.agent.matrix:report"), draw=lazy("figures.agent.matrix:draw")),)
    compare = True
    seconds_per_execution = 0.5

    def listing(self) -> list[tuple[str, str]]:
        from mechanisms.agent.stacks import stack
        return [(name, stack(name).describe()) for name in STACKS]

    def compare_table(self, table):
        """Stacks side by side: per backend and stack, the failing executions of each failure."""
        wide = table.pivot_table(index=["backend", "stack"], columns="failure", values="count", aggfunc="sum",
                                 sort=False)
        return wide.reindex(columns=[f for f in FAILURES if f in wide.columns]).reset_index()

    def check(self, options: Options) -> None:
        if not agent_scenarios(options):
            raise DriftlabError("agent_matrix: no scenario of family 'agent' (scenarios/agent/refund_agent.toml)")
        stacks(options)

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        chosen = list(BACKENDS)
        why = backends.check_postgres()
        if why:
            print(f"agent_matrix: PostgreSQL unreachable ({why}): postgres cells skipped", file=sys.stderr)
            chosen.remove("postgres")
        out = []
        for sc in agent_scenarios(options).values():
            reps = options.extra.get("repetitions") or sc.repetitions[profile]
            if reps < 1:
                raise DriftlabError(f"--repetitions must be at least 1, got {reps}")
            out += [Cell(self.name, (("stack", s), ("backend", b), ("scenario", sc.name), ("case", c.name)), reps, seed)
                    for s in stacks(options) for b in chosen for c in sc.cases if profile in c.profiles]
        return out

    def run_cell(self, cell: Cell, options: Options) -> CellOutput:
        p = cell.p
        scenario = agent_scenarios(options)[p["scenario"]]
        return run_executions(self.name, scenario, p["case"], p["stack"], p["backend"], cell.repetitions, cell.seed,
                              options)
