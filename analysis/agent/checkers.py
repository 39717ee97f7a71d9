"""The agent family's judgement: one history judged by the checkers of all three families at once.

Serves issue 15: an agent history (family ``agent``) carries the operations of
all three kinds under each family's documented names and value keys — the
revalidation family's ``release`` (``oracle``, ``outcome``, ``released``,
``payload_stale``), the isolation family's ``start`` / ``resolve`` /
``spawn`` / ``deploy`` (``workflow``, ``identity``, ``version``, ``child``)
with the contracts in ``meta["contracts"]``, and the resume family's calls
(``start`` / ``resume`` / ``recover``) and stores (``effect``, ``trace``,
``checkpoint``) with the graph in ``meta["graph"]``.  The checkers are taken
from the shared registry (:func:`analysis.checkers.checkers`), never imported
from another family's module: the composition goes through the core.

The family adds one checker of its own, :class:`Completes`: after the
approvals and the documented recovery (``invoke(None, config)``), every run
that was started reached its last node.  The resume family's ``liveness``
judges only resumes that answered; a resume killed after it consumed the
approval, whose recovery parks the run again, is what this catches.

:func:`failures` maps the verdicts onto ``agent_matrix``'s failure columns
(:data:`vocabulary.agent.JUDGED_BY`); the revalidation family's
``oracle_agreement`` is split by what went wrong: an action released although
the rules say REFRESH / REPLAN / BLOCK is a stale release, a REPLAN or BLOCK
where they say KEEP or REFRESH a needless replan.
"""
from __future__ import annotations

from typing import Any

from analysis.checkers import checkers
from vocabulary import CheckResult, History, Operation, Verdict, Witness
from vocabulary.agent import (FAILURES, FAMILY, JUDGED_BY, NEEDLESS_REPLAN, SAFE, STALE_RELEASE)
from vocabulary.agent import HISTORY  # noqa: F401 - the declared history format `driftlab check` validates

OTHER_FAMILIES = ("revalidation", "isolation", "resume")


class Completes:
    """Every started run is done at the end of its execution (its head checkpoint has run every node)."""

    name = "completes"
    family = FAMILY

    def check(self, history: History) -> CheckResult:
        graph = history.meta.get("graph")
        if not isinstance(graph, dict):
            return CheckResult(self.name, Verdict.UNKNOWN, summary="the history's meta has no 'graph'")
        nodes = len(graph.get("nodes", []))
        calls: dict[str, list[Operation]] = {}
        heads: dict[str, Operation] = {}
        for op in history.operations:
            run = op.value.get("run")
            if op.name in ("start", "resume", "recover") and run is not None:
                calls.setdefault(run, []).append(op)
            elif op.name == "checkpoint" and run is not None:
                if run not in heads or (op.value.get("created") or 0) >= (heads[run].value.get("created") or 0):
                    heads[run] = op
        out, unknown = [], []
        for run, ops in calls.items():
            head = heads.get(run)
            steps = (head.value.get("step") if head else None)
            if isinstance(steps, int) and steps >= nodes:
                continue
            said = ", ".join(f"{o.value.get('op', o.actor)} {o.status if o.indeterminate else o.value.get('state')}"
                             for o in ops)
            if ops[-1].indeterminate:
                unknown.append(run)
                continue
            where = f"its head checkpoint has {steps} of {nodes} nodes done" if head else "it has no checkpoint"
            out.append(Witness(tuple(o.index for o in ops) + ((head.index,) if head else ()), (
                f"run {run}: {said}; {where}: the approval never took effect, the run will not complete "
                f"without a new approval.")))
        if out:
            return CheckResult(self.name, Verdict.INVALID, tuple(out), f"{len(calls)} runs, {len(out)} not done")
        if unknown:
            return CheckResult(self.name, Verdict.UNKNOWN, summary=f"run {unknown[0]}'s last call died")
        return CheckResult(self.name, Verdict.VALID, summary=f"{len(calls)} runs, all done")


def judge(history: History) -> dict[tuple[str, str], CheckResult]:
    """(family, checker) -> its result on ``history``, for every checker of the three families and the agent's."""
    out = {}
    for fam in OTHER_FAMILIES:
        for name, c in checkers(fam).items():
            out[fam, name] = c.check(history)
    out[FAMILY, Completes.name] = Completes().check(history)
    return out


def _release(history: History) -> Operation | None:
    return next((op for op in history.operations if op.name == "release"), None)


def failures(history: History, results: dict[tuple[str, str], CheckResult] | None = None) -> dict[str, dict[str, Any]]:
    """failure -> {"verdict": valid|invalid|unknown, "witness": prose} for one execution's history."""
    results = results if results is not None else judge(history)
    release = _release(history)
    out = {}
    for failure in FAILURES:
        r = results[JUDGED_BY[failure]]
        verdict, witness = r.verdict, (r.witnesses[0].explanation if r.witnesses else "")
        if failure in (STALE_RELEASE, NEEDLESS_REPLAN) and verdict is Verdict.INVALID and release is not None:
            v = release.value
            stale = bool(v.get("released")) and v.get("oracle") != v.get("outcome") and \
                (v.get("oracle") not in SAFE or bool(v.get("payload_stale")))
            needless = v.get("outcome") not in SAFE and v.get("oracle") in SAFE
            mine = stale if failure == STALE_RELEASE else needless
            verdict, witness = (Verdict.INVALID, witness) if mine else (Verdict.VALID, "")
        out[failure] = {"verdict": verdict.value, "witness": witness if verdict is not Verdict.VALID else ""}
    return out


#: what ``driftlab check`` runs on an agent history: every family's checkers (``family/name``) and ``completes``
CHECKERS: dict[str, Any] = {**{f"{fam}/{name}": c for fam in OTHER_FAMILIES for name, c in checkers(fam).items()},
                            Completes.name: Completes()}
