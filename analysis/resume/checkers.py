"""The resume contract's six properties and liveness, as checkers over a resume history.

Serves "Resume Means Resume" (arXiv 2608.03836): PC, EO, FD, CV, CO, RD and
the liveness obligation, judged on what the stores hold — never on what a
runtime says about itself.  A resume history (family ``resume``) holds:

- the **calls** the harness made (ops ``start``/``resume``/``fork``/``recover``;
  ``value``: ``run``, ``op`` = the call's label, ``resume``, ``checkpoint``
  (the id a resume addressed, if any), ``state``, ``group``; forks also
  ``from_run``, ``from_checkpoint``), ``indeterminate`` when the process was killed;
- the **ledger** afterwards: one ``effect`` entry per firing and one ``trace``
  entry per node run / consumption / memo replay (``value``: ``run``, ``step``,
  ``node``, ``kind``, ``resume``, ``op``, ``at``);
- the **checkpoints** of every run (``checkpoint`` entries: ``run``, ``step``,
  ``values``, ``created``, ``parked``);
- ``meta["graph"]``: the graph (``GraphSpec.to_dict``), so the checkers know
  the schema, the interrupt and the gated node.

All times are ``time.time()`` of one machine.  A property with nothing to
judge (no fork for FD, no two recoveries from one frontier for RD) is valid
and its summary says it was vacuous.  A history with no ledger or checkpoint
entries at all makes the properties that need them ``unknown``, unless its
meta says ``stores_read: true`` (the harness read the stores after the calls
and they held nothing: a run killed before anything of it was durable).

Definitions (each checker's docstring has its own):

- the **frontier** of run R at time t is the highest step among R's
  checkpoints created before t;
- a call's **own** ledger rows are those stamped with its label.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from vocabulary import CheckResult, History, Operation, Verdict, Witness
from vocabulary.resume import (CALLS, CHECKPOINT, CO, CONSUME, CV, EFFECT, EO, FAILED, FAMILY, FD, FORK, LIVENESS,
                               MEMO, NODE_RUN, PC, RD, RECOVER, REFUSED, RESUME, STORES_READ, TRACE, GraphSpec)
from vocabulary.resume import HISTORY  # noqa: F401 - the declared history format `driftlab check` validates


@dataclass
class View:
    """A resume history split into what the checkers read."""

    history: History
    graph: GraphSpec | None
    calls: list[Operation] = field(default_factory=list)
    effects: list[Operation] = field(default_factory=list)
    traces: list[Operation] = field(default_factory=list)
    checkpoints: list[Operation] = field(default_factory=list)
    stores_read: bool = False  # meta ``stores_read`` is exactly true

    @classmethod
    def of(cls, history: History) -> "View":
        raw = history.meta.get("graph")
        graph = GraphSpec.from_dict(raw) if isinstance(raw, dict) else None
        v = cls(history, graph, stores_read=history.meta.get(STORES_READ) is True)
        for op in history.operations:
            if op.name in CALLS:
                v.calls.append(op)
            elif op.name == EFFECT:
                v.effects.append(op)
            elif op.name == TRACE:
                v.traces.append(op)
            elif op.name == CHECKPOINT:
                v.checkpoints.append(op)
        return v

    @property
    def has_stores(self) -> bool:
        """Entries of the stores, or the harness's word that it read them and they held nothing of these runs."""
        return bool(self.effects or self.traces or self.checkpoints) or self.stores_read

    def runs(self) -> list[str]:
        seen: dict[str, None] = {}
        for op in self.calls + self.checkpoints + self.effects + self.traces:
            if op.value.get("run") is not None:
                seen.setdefault(op.value["run"], None)
        return list(seen)

    def checkpoints_of(self, run: str) -> list[Operation]:
        return sorted((c for c in self.checkpoints if c.value.get("run") == run),
                      key=lambda c: (c.value.get("created") or 0, c.index))

    def frontier(self, run: str, t: float | None) -> int:
        """The highest step among ``run``'s checkpoints created before ``t`` (-1 if none)."""
        steps = [c.value["step"] for c in self.checkpoints_of(run)
                 if t is None or (c.value.get("created") or 0) < t]
        return max(steps, default=-1)

    def head(self, run: str) -> Operation | None:
        cps = self.checkpoints_of(run)
        return cps[-1] if cps else None

    def done(self, run: str) -> bool:
        head = self.head(run)
        return bool(head and self.graph and head.value["step"] >= len(self.graph.nodes))

    def own(self, rows: list[Operation], call: Operation) -> list[Operation]:
        label = call.value.get("op")
        return [r for r in rows if label and r.value.get("op") == label and r.value.get("run") == call.value.get("run")]


def _missing(name: str, v: View, need_stores: bool = True) -> CheckResult | None:
    if v.graph is None:
        return CheckResult(name, Verdict.UNKNOWN, summary="the history's meta has no 'graph': nothing to judge against")
    if need_stores and not v.has_stores:
        return CheckResult(name, Verdict.UNKNOWN, summary="the history holds no ledger or checkpoint entries")
    return None


def _result(name: str, witnesses: list[Witness], summary: str) -> CheckResult:
    return CheckResult(name, Verdict.INVALID if witnesses else Verdict.VALID, tuple(witnesses[:5]),
                       summary + (f"; {len(witnesses)} violation(s)" if witnesses else ""))


class _Base:
    family = FAMILY
    name = ""

    def check(self, history: History) -> CheckResult:
        v = View.of(history)
        return _missing(self.name, v) or self.judge(v)

    def judge(self, v: View) -> CheckResult:
        raise NotImplementedError


class PrefixConsistency(_Base):
    """PC: no call runs (or memo-replays) a node of run R at a step below R's frontier when the call began."""

    name = PC

    def judge(self, v: View) -> CheckResult:
        out, judged = [], 0
        for call in v.calls:
            if call.name not in (RESUME, RECOVER):
                continue
            judged += 1
            run = call.value.get("run")
            f = v.frontier(run, call.start)
            for row in v.own(v.traces, call):
                if row.value.get("kind") in (NODE_RUN, MEMO) and row.value.get("step", 0) < f:
                    out.append(Witness((call.index, row.index), (
                        f"{call.name} {call.value.get('op')} of run {run} began when the run's durable frontier was step {f}, "
                        f"then {'replayed' if row.value['kind'] == MEMO else 'ran'} node {row.value.get('node')} "
                        f"at step {row.value.get('step')}, at or before that frontier.")))
                    break
        return _result(self.name, out, f"{judged} resume/recover calls")


class EffectExactlyOnce(_Base):
    """EO: each (run, task, effect key) fires at most once; a run that is done fired each of its effects once."""

    name = EO

    def judge(self, v: View) -> CheckResult:
        out = []
        by_key: dict[tuple, list[Operation]] = defaultdict(list)
        for e in v.effects:
            by_key[(e.value.get("run"), e.value.get("task"), e.value.get("effect"))].append(e)
        for (run, task, key), rows in by_key.items():
            if len(rows) > 1:
                ops = ", ".join(sorted({str(r.value.get("op")) for r in rows}))
                out.append(Witness(tuple(r.index for r in rows), (
                    f"effect {key} of task {task} in run {run} fired {len(rows)} times (during {ops}); "
                    f"exactly-once allows one.")))
        runs = v.runs()
        for run in runs:
            if not v.done(run):
                continue
            first = v.checkpoints_of(run)[0].value.get("step", 0)
            for task, key in v.graph.effect_keys():
                if int(task.split(":")[0]) >= first and (run, task, key) not in by_key:
                    out.append(Witness((v.head(run).index,), (
                        f"run {run} is done but effect {key} of task {task} never fired.")))
        return _result(self.name, out, f"{len(v.effects)} firings over {len(runs)} runs")


class ForkDeterminism(_Base):
    """FD: a fork resumed with value v and done holds what the graph computes from the forked checkpoint and v."""

    name = FD

    def judge(self, v: View) -> CheckResult:
        out, judged = [], 0
        forks = [c for c in v.calls if c.name == FORK and c.status == "ok"]
        for fork in forks:
            run = fork.value.get("run")
            resumes = [c for c in v.calls if c.name == RESUME and c.value.get("run") == run and c.status == "ok"
                       and c.value.get("state") != REFUSED]
            cps = v.checkpoints_of(run)
            if not resumes or not cps or not v.done(run):
                continue
            judged += 1
            first, value = cps[0].value, resumes[0].value.get("resume")
            want = v.graph.expected(first["values"], first["step"], value)
            got = v.head(run).value.get("values")
            if got != want:
                out.append(Witness((fork.index, resumes[0].index, v.head(run).index), (
                    f"run {run} was forked from checkpoint {fork.value.get('from_checkpoint')} of run "
                    f"{fork.value.get('from_run')} and resumed with {value!r}, but ended with approval "
                    f"{(got or {}).get('approval')!r} and log {(got or {}).get('log')}; the graph gives "
                    f"approval {want.get('approval')!r} and log {want.get('log')}.")))
        return _result(self.name, out, f"{judged} forks resumed to the end" + ("" if judged else " (vacuous)"))


class CheckpointValidity(_Base):
    """CV: every persisted checkpoint satisfies the graph's state schema."""

    name = CV

    def judge(self, v: View) -> CheckResult:
        out = []
        for cp in v.checkpoints:
            problems = v.graph.problems(cp.value.get("values") or {})
            if problems:
                out.append(Witness((cp.index,), (
                    f"checkpoint {cp.value.get('checkpoint')} of run {cp.value.get('run')} (step {cp.value.get('step')}) "
                    f"was persisted with a schema-invalid state: {'; '.join(problems)}.")))
        return _result(self.name, out, f"{len(v.checkpoints)} checkpoints")


class ConsumeOnce(_Base):
    """CO: per run, the interrupt's value is consumed at most once; no resume that did not consume it fires its
    gated effects; and a completed resume that did not consume it, while it was consumed, must have been refused
    or have failed (the framework's error reaches the caller: loud, not silently accepted)."""

    name = CO
    #: the lab's reading: a completed resume of a consumed interrupt must be refused (REMIT's reading: no)
    refusal_required = True

    def judge(self, v: View) -> CheckResult:
        out = []
        gate = v.graph.interrupt_step
        gated = v.graph.gated_node
        gated_task = v.graph.task(v.graph.names.index(gated)) if gated else None
        consumes: dict[str, list[Operation]] = defaultdict(list)
        for t in v.traces:
            if t.value.get("kind") == CONSUME and t.value.get("step") == gate:
                consumes[t.value.get("run")].append(t)
        for run, rows in consumes.items():
            if len(rows) > 1:
                out.append(Witness(tuple(r.index for r in rows), (
                    f"the interrupt of run {run} consumed {len(rows)} resume values "
                    f"({', '.join(repr(r.value.get('resume')) for r in rows)}); consume-once allows one.")))
        for call in v.calls:
            if call.name != RESUME or call.indeterminate:
                continue
            run = call.value.get("run")
            mine = [t for t in v.own(v.traces, call) if t.value.get("kind") == CONSUME]
            if mine:
                continue
            fired = [e for e in v.own(v.effects, call) if e.value.get("task") == gated_task]
            if fired:
                out.append(Witness((call.index, *(e.index for e in fired)), (
                    f"resume {call.value.get('op')} of run {run} with {call.value.get('resume')!r} consumed nothing, "
                    f"yet fired the interrupt's gated effect {fired[0].value.get('effect')} again.")))
                continue
            earlier = [t for t in consumes.get(run, []) if t.value.get("op") != call.value.get("op")
                       and (call.end is None or (t.value.get("at") or 0) <= call.end)]
            if earlier and call.value.get("state") not in (REFUSED, FAILED) and self.refusal_required:
                out.append(Witness((earlier[0].index, call.index), (
                    f"the interrupt of run {run} was consumed by {earlier[0].value.get('op')} "
                    f"(value {earlier[0].value.get('resume')!r}); resume {call.value.get('op')} with "
                    f"{call.value.get('resume')!r} was then answered '{call.value.get('state')}' instead of being "
                    f"refused: its value was silently accepted and never consulted.")))
        return _result(self.name, out, f"{sum(len(r) for r in consumes.values())} consumptions over {len(consumes)} runs")


class ConsumeOnceInert(ConsumeOnce):
    """CO as REMIT reads it (remit-contract 0.1.2): the interrupt's value is consumed at most once and no resume that
    did not consume it fires its gated effects; a later resume that is accepted with no effect ("inert") conforms.
    Kept beside the lab's CO (records' ``co_inert``), never instead of it: where the two differ, the report shows
    both readings."""

    name = "CO (inert)"
    refusal_required = False


#: REMIT's reading of consume-once (not one of the contract's checkers: it is never part of check_all)
CO_INERT = ConsumeOnceInert()


def _signature(v: View, call: Operation) -> str:
    effects = sorted((e.value.get("task"), e.value.get("effect")) for e in v.own(v.effects, call))
    trace = sorted((t.value.get("step"), t.value.get("kind")) for t in v.own(v.traces, call))
    return json.dumps({"state": call.value.get("state"), "values": call.value.get("values"), "effects": effects,
                       "trace": trace}, sort_keys=True, default=str)


class RecoveryDeterminism(_Base):
    """RD: completed recoveries of one group that began from the same durable frontier (same checkpoint step and
    state, same effects already in the ledger, same consumptions) end alike: same outcome, same final state,
    same effects fired and same nodes run."""

    name = RD

    def judge(self, v: View) -> CheckResult:
        out, compared = [], 0
        classes: dict[tuple, list[Operation]] = defaultdict(list)
        for call in v.calls:
            if call.name != RECOVER or call.indeterminate:
                continue
            run = call.value.get("run")
            f = v.frontier(run, call.start)
            at = [c for c in v.checkpoints_of(run) if (c.value.get("created") or 0) < (call.start or 0)
                  and c.value.get("step") == f]
            state = json.dumps(at[-1].value.get("values") if at else None, sort_keys=True)
            t0 = call.start or 0
            fired = sorted((e.value.get("task"), e.value.get("effect")) for e in v.effects
                           if e.value.get("run") == run and (e.value.get("at") or 0) < t0)
            consumed = sum(1 for t in v.traces if t.value.get("run") == run and t.value.get("kind") == CONSUME
                           and (t.value.get("at") or 0) < t0)
            classes[(call.value.get("group"), call.value.get("ordinal", 0), f, state, json.dumps(fired),
                     consumed)].append(call)
        for (group, _, f, *_), calls in classes.items():
            if len(calls) < 2:
                continue
            compared += len(calls) - 1
            sigs = Counter(_signature(v, c) for c in calls)
            if len(sigs) > 1:
                a = calls[0]
                b = next(c for c in calls if _signature(v, c) != _signature(v, a))
                out.append(Witness((a.index, b.index), (
                    f"recoveries {a.value.get('op')} (run {a.value.get('run')}) and {b.value.get('op')} "
                    f"(run {b.value.get('run')}) both began at frontier step {f} with the same state, but one "
                    f"fired {len(v.own(v.effects, a))} effects and ran {len(v.own(v.traces, a))} trace rows, "
                    f"the other {len(v.own(v.effects, b))} and {len(v.own(v.traces, b))}: recovery is not "
                    f"deterministic.")))
        return _result(self.name, out, f"{compared} recovery pairs compared" + ("" if compared else " (vacuous)"))


class Liveness(_Base):
    """Liveness: refusing every resume, or failing every recovery, is not conformance.

    - a run that never reached done, was served once, and whose every later call was refused or failed
      (:meth:`stuck`; judged before the two rules below, one witness per run);

    - a run that parked and was resumed (by calls that completed) had at least one resume served;
    - a run a crash killed (an indeterminate call), with something of it durable when it was first recovered (a
      checkpoint created before that recovery started) and unfinished in the end (its head short of the last
      node), and recovered after the kill, is continued by at least one of the calls that completed after the
      kill (a recovery, or a resume): a framework that refuses to restore it (pydantic-graph's
      ``GraphRuntimeError`` for a node left running) leaves a run that can never finish.  A run killed before
      anything of it was durable is not judged.
    """

    name = LIVENESS

    def judge(self, v: View) -> CheckResult:
        out, resumed, recovered = [], 0, 0
        for run in v.runs():
            judged = len(out)
            calls = [c for c in v.calls if c.value.get("run") == run]
            kills = [c.index for c in calls if c.indeterminate]
            after = [c for c in calls if kills and c.index > kills[-1] and not c.indeterminate]  # completed calls
            recoveries = [c for c in after if c.name == RECOVER]
            durable = bool(recoveries) and any((c.value.get("created") or 0) < (recoveries[0].start or 0)
                                               for c in v.checkpoints_of(run))  # at the first recovery, not after
            if durable and not v.done(run):
                recovered += 1
                if all(c.status == "fail" for c in after):
                    out.append(Witness((kills[-1], *(c.index for c in after)), (
                        f"run {run} was killed (#{kills[-1]}) short of its last node with checkpoints in its store, "
                        f"and every one of the {len(after)} calls after the kill failed (first: "
                        f"{after[0].value.get('reason') or 'no reason given'}): a run that cannot be continued "
                        f"after a crash is not conformance.")))
            stuck = self.stuck(v, run, calls) if len(out) == judged else None  # one witness per run
            if stuck is not None:
                out.append(stuck)
                continue
            if not any(c.value.get("parked") for c in v.checkpoints_of(run)):
                continue
            resumes = [c for c in calls if c.name == RESUME and not c.indeterminate]
            if not resumes:
                continue
            resumed += 1
            consumed = any(t.value.get("kind") == CONSUME and t.value.get("run") == run for t in v.traces)
            if not consumed and all(c.value.get("state") == REFUSED for c in resumes):
                out.append(Witness(tuple(c.index for c in resumes), (
                    f"run {run} parked at its interrupt and every one of its {len(resumes)} resumes was refused "
                    f"(first: {resumes[0].value.get('reason') or 'no reason given'}): refusing everything is not "
                    f"conformance.")))
        return _result(self.name, out, f"{resumed} parked runs resumed, {recovered} crashed runs recovered")

    @staticmethod
    def stuck(v: View, run: str, calls: list[Operation]) -> Witness | None:
        """A run that never reached done although it was served once (it parked or progressed), and every call
        that began after its last served call ended was refused or failed (issue 24 §3: the same rule for every
        framework; a thread whose later calls all fail after an invalid value is a liveness violation as well as
        a CV one: the framework persisted a state it cannot load again).  A graph that cannot finish without a
        schema-invalid state is not judged by this rule unless such a state was persisted (refusing to persist it
        is CV's conformance).  Calls racing the served one (begun before it ended) are not "later"."""
        if v.done(run):
            return None
        if v.graph and any(n.invalid for n in v.graph.nodes) and not any(
                v.graph.problems(cp.value.get("values") or {}) for cp in v.checkpoints_of(run)):
            return None  # the graph cannot finish without a schema-invalid state, and none was persisted: refusing
            #              to persist it is CV's conformance, not a stuck run
        served = [c for c in calls if not c.indeterminate and c.status == "ok"]
        if not served:
            return None
        last = max(served, key=lambda c: (c.end or c.start or 0, c.index))
        after = [c for c in calls if not c.indeterminate and (c.start or 0) > (last.end or last.start or 0)
                 and c.index != last.index]
        if not after or any(c.status == "ok" for c in after):
            return None
        return Witness((last.index, *(c.index for c in after)), (
            f"run {run} never reached done: after {last.value.get('op') or last.name} (#{last.index}, "
            f"{last.value.get('state') or 'served'}) every one of its {len(after)} later calls was refused or failed "
            f"(first: {after[0].value.get('reason') or after[0].value.get('note') or 'no reason given'}): a run "
            "that can never continue is not conformance."))


CHECKERS = {c.name: c for c in (PrefixConsistency(), EffectExactlyOnce(), ForkDeterminism(), CheckpointValidity(),
                                ConsumeOnce(), RecoveryDeterminism(), Liveness())}


def check_all(history: History) -> dict[str, CheckResult]:
    """Every resume checker on one history, by property name."""
    return {name: c.check(history) for name, c in CHECKERS.items()}


def verdicts(history: History) -> dict[str, Any]:
    return {name: r.verdict for name, r in check_all(history).items()}
