"""The four semantic-isolation anomalies as checkers over histories (paper §2; Elle-style prose witnesses).

Each checker reads an isolation history (``runners/isolation/workflow_runtime.py``
documents the format; a user's own runtime can export it) and returns
valid, invalid (with witnesses naming the steps) or unknown.  They share no
code with the mechanisms: the oracle is the declared contracts in the
history's header (``meta["contracts"]``), never a mechanism's decision.

The checkers replay the history per group (one execution each) and keep,
per workflow, its **view**: the versions it resolved itself (latest per
identity) over the view it inherited from its parent at the spawn (children,
forks and retries are new workflow ids; a resume continues the same id).

- **semantic read skew**: one workflow has two successful resolutions of
  one identity that returned different versions.
- **compatibility skew**: a successful resolution ``x@v`` in a workflow
  whose view (before the step) binds ``y@u`` while a declared contract says
  ``x@v requires y@w`` or ``y@u requires x@w`` with ``w`` different.
- **context escape**: a continuation resolves an identity its inherited view
  binds to a different version.
- **merge skew**: an admitted merge (status ok) whose branch views and the
  parent's view have no admissible common extension (``vocabulary.isolation``
  defines it): two versions of one identity, a violated contract, or a
  required version the registry no longer has (``meta["versions"]``).

Unknown: a relevant operation is indeterminate (its outcome is not known),
or the header lacks the ``contracts`` a contract-based check needs, and
nothing invalid was found.  Refused operations (status fail) bind nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vocabulary import CheckResult, History, Operation, Verdict, Witness
from vocabulary.isolation import (ANOMALIES, COMPATIBILITY_SKEW, CONTEXT_ESCAPE, MERGE_SKEW, READ_SKEW, Contract,
                                  IsolationError)
from vocabulary.isolation import HISTORY  # noqa: F401 - the declared history format `driftlab check` validates

FAMILY = "isolation"


@dataclass
class _Flow:
    parent: str | None
    relation: str
    inherited: dict[str, tuple[int, int]]  # identity -> (version, step that bound it)
    own: dict[str, tuple[int, int]] = field(default_factory=dict)
    spawned_at: int = 0

    def view(self) -> dict[str, tuple[int, int]]:
        return {**self.inherited, **self.own}


def _contracts(history: History) -> list[Contract] | None:
    raw = history.meta.get("contracts")
    if raw is None:
        return None
    return [Contract.parse(c) for c in raw]


def _deploys_between(ops: list[Operation], identity: str, lo: int, hi: int) -> list[Operation]:
    return [o for o in ops if o.name == "deploy" and o.status == "ok" and o.value.get("identity") == identity
            and lo < o.index < hi]


def _deploy_phrase(ops, identity, lo, hi) -> str:
    d = _deploys_between(ops, identity, lo, hi)
    if not d:
        return ""
    return ", then " + ", ".join(f"deployment at step {o.index} made @{o.value.get('version')} live" for o in d)


def _replay(ops: list[Operation]):
    """Yield (op, flows) in order, with flows updated *after* each op (views as the checkers need them)."""
    flows: dict[str, _Flow] = {}
    for op in ops:
        w = op.value.get("workflow", op.actor)
        if op.name == "start":
            flows.setdefault(w, _Flow(None, "root", {}))
        elif op.name == "spawn" and op.status == "ok":
            parent = flows.setdefault(w, _Flow(None, "root", {}))
            flows[op.value["child"]] = _Flow(w, op.value.get("relation", "child"), parent.view(), spawned_at=op.index)
        yield op, flows
        if op.name == "resolve" and op.status == "ok" and op.value.get("version") is not None:
            flows.setdefault(w, _Flow(None, "root", {})).own[op.value["identity"]] = (int(op.value["version"]), op.index)
        elif op.name == "merge" and op.status == "ok":
            parent = flows.setdefault(w, _Flow(None, "root", {}))
            for b in op.value.get("branches", []):
                for x, vs in flows.get(b, _Flow(None, "fork", {})).own.items():
                    parent.own[x] = vs


class _Base:
    family = FAMILY
    name = ""
    needs_contracts = False

    def check(self, history: History) -> CheckResult:
        contracts = None
        if self.needs_contracts:
            try:
                contracts = _contracts(history)
            except IsolationError as exc:
                return CheckResult(self.name, Verdict.UNKNOWN, (), f"meta.contracts is malformed: {exc}")
        witnesses: list[Witness] = []
        groups = history.groups()
        indeterminate = any(op.indeterminate and op.name in ("resolve", "merge", "spawn") for op in history.operations)
        per_group = history.meta.get("groups") or {}
        for g, ops in groups.items():
            own = per_group.get(str(g))
            if own is not None:  # a cell's history: each execution (group) carries its own contracts and versions
                try:
                    gc = [Contract.parse(c) for c in own.get("contracts", [])] if self.needs_contracts else None
                except IsolationError as exc:
                    return CheckResult(self.name, Verdict.UNKNOWN, (), f"meta.groups[{g}].contracts is malformed: {exc}")
                witnesses += self.scan(ops, gc, {**history.meta, **own})
            else:
                witnesses += self.scan(ops, contracts, history.meta)
        executions = len(groups)
        if witnesses:
            return CheckResult(self.name, Verdict.INVALID, tuple(witnesses),
                               f"{len(witnesses)} witness(es) in {executions} execution(s)")
        if indeterminate:
            return CheckResult(self.name, Verdict.UNKNOWN, (), "an operation's outcome is indeterminate")
        if self.needs_contracts and contracts is None:
            return CheckResult(self.name, Verdict.UNKNOWN, (), "the history's meta has no 'contracts' to judge by")
        return CheckResult(self.name, Verdict.VALID, (), f"{executions} execution(s), none with {self.name.replace('_', ' ')}")

    def scan(self, ops, contracts, meta) -> list[Witness]:
        raise NotImplementedError


class ReadSkew(_Base):
    """Semantic read skew: one workflow resolves one identity to two versions."""

    name = READ_SKEW

    def scan(self, ops, contracts, meta):
        seen: dict[tuple[str, str], tuple[int, int]] = {}
        out = []
        for op in ops:
            if op.name != "resolve" or op.status != "ok" or op.value.get("version") is None:
                continue
            key = (op.value.get("workflow", op.actor), op.value["identity"])
            v = int(op.value["version"])
            if key in seen and seen[key][0] != v:
                v0, s0 = seen[key]
                w, x = key
                resumes = [o.index for o in ops if o.name == "resume" and o.value.get("workflow") == w and s0 < o.index < op.index]
                out.append(Witness(tuple(sorted({s0, *[o.index for o in _deploys_between(ops, x, s0, op.index)], *resumes, op.index})),
                                   f"{w} resolved {x}@{v0} at step {s0}{_deploy_phrase(ops, x, s0, op.index)}"
                                   + (f", then {w} resumed at step {resumes[0]}" if resumes else "")
                                   + f", then {w} resolved {x}@{v} at step {op.index}: one workflow saw two versions "
                                   f"of {x}, semantic read skew."))
            seen.setdefault(key, (v, op.index))
        return out


class CompatibilitySkew(_Base):
    """Compatibility skew: a workflow binds a combination of versions that violates a declared contract."""

    name = COMPATIBILITY_SKEW
    needs_contracts = True

    def scan(self, ops, contracts, meta):
        if not contracts:
            return []
        req: dict[tuple[str, int], list[Contract]] = {}
        dep: dict[str, list[Contract]] = {}
        for c in contracts:
            req.setdefault((c.subject, c.subject_version), []).append(c)
            dep.setdefault(c.required, []).append(c)
        out = []
        for op, flows in _replay(ops):
            if op.name != "resolve" or op.status != "ok" or op.value.get("version") is None:
                continue
            w, x, v = op.value.get("workflow", op.actor), op.value["identity"], int(op.value["version"])
            view = flows[w].view() if w in flows else {}
            for c in req.get((x, v), ()):
                have = view.get(c.required)
                if have is not None and c.required != x and have[0] != c.required_version:
                    out.append(self._witness(w, c, (c.required, have), (x, v, op.index), ops))
            for c in dep.get(x, ()):
                have = view.get(c.subject)
                if have is not None and c.subject != x and have[0] == c.subject_version and c.required_version != v:
                    out.append(self._witness(w, c, (c.subject, have), (x, v, op.index), ops))
        return out

    @staticmethod
    def _witness(w, c, bound, new, ops) -> Witness:
        (y, (u, s0)), (x, v, s1) = bound, new
        return Witness(tuple(sorted({s0, *[o.index for o in _deploys_between(ops, x, s0, s1)], s1})),
                       f"{w} had {y}@{u} bound at step {s0}{_deploy_phrase(ops, x, s0, s1)}, then resolved "
                       f"{x}@{v} at step {s1}, but the declared contract '{c}' says otherwise: compatibility skew.")


class ContextEscape(_Base):
    """Context escape: a child, fork or retry resolves an identity differently from the manifest it inherited."""

    name = CONTEXT_ESCAPE

    def scan(self, ops, contracts, meta):
        out = []
        for op, flows in _replay(ops):
            if op.name != "resolve" or op.status != "ok" or op.value.get("version") is None:
                continue
            w, x, v = op.value.get("workflow", op.actor), op.value["identity"], int(op.value["version"])
            f = flows.get(w)
            if f is None or f.parent is None or x not in f.inherited:
                continue
            u, s0 = f.inherited[x]
            if u != v:
                out.append(Witness(tuple(sorted({s0, f.spawned_at, *[o.index for o in _deploys_between(ops, x, s0, op.index)], op.index})),
                                   f"{f.parent} resolved {x}@{u} at step {s0}"
                                   f"{_deploy_phrase(ops, x, s0, op.index)}, then {f.parent}'s {f.relation} {w} "
                                   f"(spawned at step {f.spawned_at}) resolved {x}@{v} at step {op.index}: the "
                                   f"continuation left the manifest it inherits, context escape."))
        return out


class MergeSkew(_Base):
    """Merge skew: a merge admitted although the branch manifests have no admissible common extension."""

    name = MERGE_SKEW
    needs_contracts = True

    def scan(self, ops, contracts, meta):
        versions = {x: set(vs) for x, vs in (meta.get("versions") or {}).items()}
        out = []
        for op, flows in _replay(ops):
            if op.name != "merge" or op.status != "ok":
                continue
            w = op.value.get("workflow", op.actor)
            parts = [(w, flows[w].view() if w in flows else {})]
            parts += [(b, flows[b].view() if b in flows else {}) for b in op.value.get("branches", [])]
            problem = no_admissible_extension(parts, contracts or [], versions)
            if problem:
                steps, why = problem
                out.append(Witness(tuple(sorted({*steps, op.index})), f"{w} merged {', '.join(op.value.get('branches', []))} at "
                                   f"step {op.index}, but {why}: the branch manifests have no admissible common "
                                   f"extension, merge skew."))
        return out


def no_admissible_extension(parts: list[tuple[str, dict]], contracts: list[Contract],
                            versions: dict[str, set]) -> tuple[tuple[int, ...], str] | None:
    """Why the union of the views in ``parts`` has no admissible common extension (None if it has one).

    The union must be single-valued; then it is closed under the contracts'
    requirements (adding each required binding that is absent, if that
    version exists), and every contract must hold on the closure.
    """
    union: dict[str, tuple[int, int, str]] = {}
    clashes: list[tuple[tuple[int, int], str]] = []
    for who, view in parts:
        for x, (v, step) in view.items():
            if x in union and union[x][0] != v:
                u, s, other = union[x]
                clashes.append(((s, step), f"{other} bound {x}@{u} (step {s}) and {who} bound {x}@{v} (step {step})"))
            union.setdefault(x, (v, step, who))
    if clashes:
        return tuple(sorted({i for steps, _ in clashes for i in steps})), "; ".join(why for _, why in clashes)
    req: dict[tuple[str, int], list[Contract]] = {}
    for c in contracts:
        req.setdefault((c.subject, c.subject_version), []).append(c)
    closed = {x: v for x, (v, _, _) in union.items()}
    work = list(closed.items())
    while work:
        x, v = work.pop()
        for c in req.get((x, v), ()):
            have = closed.get(c.required)
            if have is None:
                if versions and c.required_version not in versions.get(c.required, set()):
                    return (union[x][1],) if x in union else (), \
                        f"'{c}' needs {c.required}@{c.required_version}, which no branch bound and the registry does not have"
                closed[c.required] = c.required_version
                work.append((c.required, c.required_version))
            elif have != c.required_version:
                steps = tuple(union[k][1] for k in (x, c.required) if k in union)
                return steps, f"the merged bindings hold {x}@{v} and {c.required}@{have}, violating '{c}'"
    return None


CHECKERS: dict[str, Any] = {c.name: c for c in (ReadSkew(), CompatibilitySkew(), ContextEscape(), MergeSkew())}
assert tuple(CHECKERS) == ANOMALIES
