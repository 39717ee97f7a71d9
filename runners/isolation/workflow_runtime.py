"""The lab's own durable workflow runtime for the isolation family (paper §4, "SemIso" stand-in).

Workflows are driven step by step, as a literal interleaving (Hermitage
style): a root workflow **starts**, its steps **resolve** identities through
the isolation mechanism under test, it **pauses** (the runtime checkpoints
its semantic manifest as JSON and drops the live object) and **resumes**
(the manifest is restored from the checkpoint, so whatever is not in the
checkpoint is lost), spawns **children**, **retries** and **forks**, and
**merges** its forks after asking the mechanism to admit the merge.  A
**deployment** moves a live alias in the registry between any two steps.

Every step becomes one operation of a :class:`vocabulary.History`
(``family = "isolation"``) on a logical clock (start = end = the step
number), so the same program, registry and mechanism always give the same
history.  Refused resolutions and merges are recorded with status ``fail``;
a workflow whose resolution was refused is aborted and its later steps are
skipped (and counted).

The operations and their ``value`` keys (the format ``driftlab check``
reads; a user's own runtime can export it):

- ``start`` {workflow}; ``end`` {workflow}; ``pause`` {workflow, checkpoint_bytes}; ``resume`` {workflow}
- ``resolve`` {workflow, identity, version, via[, reason]} (fail: refused)
- ``spawn`` {workflow, child, relation: child|fork|retry}
- ``merge`` {workflow, branches, path[, reason]} (fail: refused)
- ``deploy`` (actor ``deployer``) {identity, version, previous}

and the header's ``meta`` holds ``contracts`` (the contracts the checkers
judge by: the oracle, which a fault may hide from the mechanism),
``versions`` and ``opaque``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any, Iterable

from mechanisms.isolation.base import MergeDecision, Resolution
from runners.plugins import expect
from vocabulary import FAIL, OK, History, Operation
from vocabulary.isolation import Manifest, Registry

FAMILY = "isolation"


@dataclass
class Workflow:
    id: str
    manifest: Manifest | None
    parent: str | None = None
    relation: str = "root"
    state: str = "running"  # running | paused | aborted | ended | merged


@dataclass
class Runtime:
    """Runs workflows against a registry under one isolation mechanism, writing a history."""

    registry: Registry
    mechanism: Any
    group: Any = None
    ops: list[Operation] = field(default_factory=list)
    workflows: dict[str, Workflow] = field(default_factory=dict)
    checkpoints: dict[str, str] = field(default_factory=dict)
    skipped: int = 0
    resolutions: int = 0
    refusals: int = 0
    mechanism_ns: int = 0  # time spent inside the mechanism's resolve/admit_merge (the cost of isolation)

    # ------------------------------------------------------------ recording
    def _op(self, actor: str, name: str, status: str = OK, **value) -> Operation:
        i = len(self.ops) + 1
        if self.group is not None:
            value["group"] = self.group
        op = Operation(i, actor, name, status, float(i), float(i), value)
        self.ops.append(op)
        return op

    def _live(self, wid: str) -> Workflow | None:
        w = self.workflows.get(wid)
        if w is None:
            raise ValueError(f"workflow {wid!r} was never started or spawned")
        if w.state != "running":
            self.skipped += 1
            return None
        return w

    # ------------------------------------------------------------ steps
    def start(self, wid: str) -> None:
        if wid in self.workflows:
            raise ValueError(f"workflow {wid!r} already exists")
        self.workflows[wid] = Workflow(wid, expect(None, "begin", self.mechanism.begin(self.registry), Manifest))
        self._op(wid, "start", workflow=wid)

    def resolve(self, wid: str, identity: str) -> int | None:
        w = self._live(wid)
        if w is None:
            return None
        self.resolutions += 1
        t0 = perf_counter_ns()
        r = self.mechanism.resolve(w.manifest, identity, self.registry)
        self.mechanism_ns += perf_counter_ns() - t0
        expect(None, "resolve", r, Resolution)  # a wrong return is the mechanism's error, never an outcome
        if r.version is None:
            self.refusals += 1
            w.state = "aborted"
            self._op(wid, "resolve", FAIL, workflow=wid, identity=identity, version=None, via=r.via, reason=r.reason)
            return None
        self._op(wid, "resolve", workflow=wid, identity=identity, version=r.version, via=r.via)
        return r.version

    def pause(self, wid: str) -> None:
        w = self._live(wid)
        if w is None:
            return
        text = w.manifest.to_json()
        self.checkpoints[wid] = text
        w.manifest, w.state = None, "paused"  # only the checkpoint survives the pause
        self._op(wid, "pause", workflow=wid, checkpoint_bytes=len(text))

    def resume(self, wid: str) -> None:
        w = self.workflows.get(wid)
        if w is None or w.state != "paused":
            self.skipped += 1
            return
        w.manifest, w.state = Manifest.from_json(self.checkpoints.pop(wid)), "running"
        self._op(wid, "resume", workflow=wid)

    def spawn(self, wid: str, child: str, relation: str) -> None:
        w = self._live(wid)
        if w is None:  # the parent was aborted: the continuation never runs, its steps are skipped
            self.workflows.setdefault(child, Workflow(child, None, wid, relation, "aborted"))
            return
        if child in self.workflows:
            raise ValueError(f"workflow {child!r} already exists")
        inherited = expect(None, "inherit", self.mechanism.inherit(w.manifest, relation), Manifest)
        self.workflows[child] = Workflow(child, inherited, wid, relation)
        self._op(wid, "spawn", workflow=wid, child=child, relation=relation)

    def merge(self, wid: str, branches: Iterable[str]) -> bool:
        w = self._live(wid)
        if w is None:
            return False
        branches = list(branches)
        ws = [self.workflows[b] for b in branches]
        if any(b.state != "running" and b.state != "ended" for b in ws):
            down = [b.id for b in ws if b.state not in ("running", "ended")]
            self._op(wid, "merge", FAIL, workflow=wid, branches=branches, path="none",
                     reason=f"branch {', '.join(down)} did not finish")
            return False
        t0 = perf_counter_ns()
        d = self.mechanism.admit_merge(w.manifest, [b.manifest for b in ws], self.registry)
        self.mechanism_ns += perf_counter_ns() - t0
        expect(None, "admit_merge", d, MergeDecision)
        for b in ws:
            b.state = "merged"
        if not d.admitted:
            self._op(wid, "merge", FAIL, workflow=wid, branches=branches, path=d.path, reason=d.reason)
            return False
        for x, v in d.bindings.items():
            w.manifest.bind(x, v)
        self._op(wid, "merge", workflow=wid, branches=branches, path=d.path)
        return True

    def end(self, wid: str) -> None:
        w = self._live(wid)
        if w is None:
            return
        w.state = "ended"
        self._op(wid, "end", workflow=wid)

    def note(self, wid: str, name: str, **value) -> None:
        """An application step of the workflow (e.g. a query), recorded in the history; checkers ignore it."""
        self._op(wid, name, workflow=wid, **value)

    def deploy(self, identity: str, version: int) -> None:
        previous = self.registry.deploy(identity, version)
        self._op("deployer", "deploy", identity=identity, version=version, previous=previous)

    # ------------------------------------------------------------ programs
    def run(self, steps) -> "Runtime":
        """Interpret a scenario's steps (``scenarios.isolation.loader.Step``) in order."""
        for s in steps:
            if s.verb == "deploy":
                self.deploy(*s.args)
            elif s.verb in ("child", "retry"):
                self.spawn(s.actor, s.args[0], s.verb)
            elif s.verb == "fork":
                for b in s.args:
                    self.spawn(s.actor, b, "fork")
            elif s.verb in ("resolve", "discover"):
                self.resolve(s.actor, s.args[0])
            elif s.verb == "merge":
                self.merge(s.actor, s.args)
            else:
                getattr(self, s.verb)(s.actor)
        return self


def history_meta(registry: Registry, contracts=None, **extra) -> dict:
    """The header the checkers read: the contracts they judge by, the versions and the opaque identities."""
    contracts = registry.contracts if contracts is None else contracts
    return {"contracts": [str(c) for c in contracts],
            "versions": {x: list(v) for x, v in sorted(registry.versions.items())},
            "opaque": sorted(registry.opaque), **extra}


def to_history(ops: list[Operation], meta: dict) -> History:
    return History(FAMILY, tuple(ops), meta)


def run_scenario(scenario, mechanism, group=None, declared=None, oracle=None) -> tuple[Runtime, History]:
    """Run a scenario's program under ``mechanism``; the history's meta holds the oracle contracts.

    ``declared`` are the contracts the mechanism sees (default: the scenario's);
    ``oracle`` the contracts the checkers judge by (default: the scenario's).
    """
    reg = scenario.registry(declared)
    rt = Runtime(reg, mechanism, group=group).run(scenario.steps)
    meta = history_meta(reg, scenario.contracts if oracle is None else oracle, scenario=scenario.name,
                        mechanism=getattr(mechanism, "name", type(mechanism).__name__))
    return rt, to_history(rt.ops, meta)


def judge(history: History) -> dict:
    """The four anomaly checkers on one history: anomaly -> CheckResult."""
    from analysis.isolation.checkers import CHECKERS

    return {name: c.check(history) for name, c in CHECKERS.items()}


def verdict_word(result) -> str:
    """``occurs`` (invalid), ``prevented`` (valid) or ``unknown`` -- the Hermitage matrix's words."""
    return {"invalid": "occurs", "valid": "prevented"}.get(result.verdict.value, "unknown")


def combine(histories: list[History], **meta) -> History:
    """One cell's history from its executions' histories (each a group): operations renumbered in order.

    Each group keeps its own contracts and versions in ``meta["groups"]``
    (the checkers read them per group), so executions of different
    scenarios can share one file.
    """
    ops: list[Operation] = []
    groups: dict[str, dict] = {}
    for h in histories:
        for o in h.operations:
            n = len(ops) + 1
            ops.append(Operation(n, o.actor, o.name, o.status, float(n), float(n), o.value))
        g = h.operations[0].value.get("group") if h.operations else None
        groups[str(g)] = {"contracts": h.meta.get("contracts", []), "versions": h.meta.get("versions", {}),
                          "scenario": h.meta.get("scenario")}
    first = histories[0].meta if histories else {}
    return History(FAMILY, tuple(ops), {"contracts": first.get("contracts", []), "versions": first.get("versions", {}),
                                        "opaque": first.get("opaque", []), "groups": groups, **meta})
