"""Isolation scenario files: a registry, a workflow program and its deployment schedule, as data.

A scenario (``scenarios/isolation/*.toml``, or a user's folder) declares
``family = "isolation"`` and:

```toml
family = "isolation"
name = "context_escape"
description = "a child resolves the new model its parent's manifest does not bind"
anomaly = "context_escape"          # optional: the anomaly this program is a witness of
contracts = ["index:docs@1 requires model:embed@1"]
late = ["tool:rank"]                # optional: discovered mid-run (outside a lockfile taken at start)
opaque = []                         # optional: cannot be versioned
steps = [                           # a literal interleaving, one step per line
  "T1 start",
  "T1 resolve model:embed",
  "deploy model:embed@2",           # the deployer publishes @2 and moves the live alias
  "T1 child T1.c",                  # also: retry R, fork A B, merge A B, pause, resume, end, discover X
  "T1.c resolve model:embed",
]

[registry]                          # identity -> published versions and the live one at start
"model:embed" = { versions = [1], live = 1 }
```

(``steps`` and the other top-level keys come before ``[registry]``, as TOML
requires.)  The loader checks every identity, ref and contract, that
each workflow acts only after it was started or spawned, that a paused
workflow only resumes, that a merge names forks of the merging workflow,
and that a deployment publishes a version greater than the versions known
or moves the alias to a published one.  Errors are one line,
``<file>: <field>: <problem>``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scenarios import ScenarioError
from vocabulary.isolation import ANOMALIES, Contract, Contracts, IsolationError, Registry, check_identity, parse_ref

VERBS = ("start", "resolve", "discover", "pause", "resume", "child", "retry", "fork", "merge", "end")
NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
ACTOR_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")


@dataclass(frozen=True)
class Step:
    actor: str  # a workflow id, or "deployer"
    verb: str
    args: tuple


@dataclass(frozen=True)
class IsolationScenario:
    name: str
    description: str
    anomaly: str | None
    versions: dict[str, tuple[int, ...]]
    live: dict[str, int]
    contracts: tuple[Contract, ...]
    late: frozenset[str]
    opaque: frozenset[str]
    steps: tuple[Step, ...]
    path: str = ""

    def registry(self, contracts=None) -> Registry:
        """A fresh registry at the scenario's start (deployments mutate it)."""
        return Registry({x: list(v) for x, v in self.versions.items()}, dict(self.live),
                        Contracts(self.contracts if contracts is None else contracts), self.late, self.opaque)


def parse_step(text: Any) -> Step:
    if not isinstance(text, str) or not text.split():
        raise ValueError(f"{text!r} is not a step (expected '<workflow> <verb> ...' or 'deploy kind:name@N')")
    words = text.split()
    if words[0] == "deploy":
        if len(words) != 2:
            raise ValueError(f"{text!r}: a deployment is 'deploy kind:name@N'")
        return Step("deployer", "deploy", parse_ref(words[1]))
    if len(words) < 2 or words[1] not in VERBS:
        raise ValueError(f"{text!r}: the verb must be one of {', '.join(VERBS)} (or the step 'deploy kind:name@N')")
    actor, verb, args = words[0], words[1], tuple(words[2:])
    if not ACTOR_RE.match(actor):
        raise ValueError(f"{text!r}: {actor!r} is not a workflow id")
    need = {"resolve": 1, "discover": 1, "child": 1, "retry": 1}
    if verb in need and len(args) != need[verb]:
        raise ValueError(f"{text!r}: {verb} takes exactly one argument")
    if verb in ("fork", "merge") and len(args) < 1:
        raise ValueError(f"{text!r}: {verb} names at least one branch")
    if verb in ("start", "pause", "resume", "end") and args:
        raise ValueError(f"{text!r}: {verb} takes no argument")
    if verb in ("resolve", "discover"):
        check_identity(args[0])
    return Step(actor, verb, args)


def _check_program(steps: list[Step], versions: dict[str, list[int]], live: dict[str, int]) -> None:
    """Replay the program's control flow (not its resolutions) and refuse impossible steps."""
    state: dict[str, str] = {}
    forks: dict[str, set] = {}
    versions = {x: list(v) for x, v in versions.items()}
    for n, s in enumerate(steps):
        where = f"step {n + 1} ({s.actor} {s.verb}{' ' if s.args else ''}{' '.join(map(str, s.args))})"
        if s.verb == "deploy":
            x, v = s.args
            if x not in versions:
                raise ValueError(f"{where}: {x} is not in [registry]")
            if v not in versions[x] and v <= max(versions[x]):
                raise ValueError(f"{where}: a new version must be greater than {max(versions[x])}")
            versions[x].append(v)
            continue
        if s.verb == "start":
            if s.actor in state:
                raise ValueError(f"{where}: {s.actor} already exists")
            state[s.actor] = "running"
            continue
        if s.actor not in state:
            raise ValueError(f"{where}: {s.actor} acts before it was started or spawned")
        if s.verb == "resume":
            if state[s.actor] != "paused":
                raise ValueError(f"{where}: {s.actor} is not paused")
            state[s.actor] = "running"
            continue
        if state[s.actor] != "running":
            raise ValueError(f"{where}: {s.actor} is {state[s.actor]}")
        if s.verb in ("resolve", "discover") and s.args[0] not in versions:
            raise ValueError(f"{where}: {s.args[0]} is not in [registry]")
        if s.verb in ("child", "retry", "fork"):
            for c in s.args:
                if c in state:
                    raise ValueError(f"{where}: {c} already exists")
                state[c] = "running"
                if s.verb == "fork":
                    forks.setdefault(s.actor, set()).add(c)
        elif s.verb == "merge":
            strangers = [b for b in s.args if b not in forks.get(s.actor, ())]
            if strangers:
                raise ValueError(f"{where}: {', '.join(strangers)} is not a fork of {s.actor}")
            for b in s.args:
                state[b] = "merged"
                forks[s.actor].discard(b)
        elif s.verb == "pause":
            state[s.actor] = "paused"
        elif s.verb == "end":
            state[s.actor] = "ended"


def parse_scenario(path: Path, raw: dict[str, Any]) -> IsolationScenario:
    def fail(fld: str, problem: str):
        raise ScenarioError(f"{path}: {fld}: {problem}")

    name = raw.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        fail("name", f"{name!r} must be lower_snake_case")
    known = {"family", "name", "description", "anomaly", "contracts", "late", "opaque", "registry", "steps"}
    for key in raw:
        if key not in known:
            fail(key, f"unknown field (known: {', '.join(sorted(known))})")
    anomaly = raw.get("anomaly")
    if anomaly is not None and anomaly not in ANOMALIES:
        fail("anomaly", f"{anomaly!r} is not one of {', '.join(ANOMALIES)}")
    reg = raw.get("registry")
    if not isinstance(reg, dict) or not reg:
        fail("registry", "missing or empty (identity = { versions = [1, 2], live = 1 })")
    versions: dict[str, tuple[int, ...]] = {}
    live: dict[str, int] = {}
    for x, spec in reg.items():
        try:
            check_identity(x)
        except IsolationError as exc:
            fail(f"registry.{x}", str(exc))
        if not isinstance(spec, dict) or set(spec) - {"versions", "live"}:
            fail(f"registry.{x}", "expected { versions = [1, 2], live = 1 }")
        vs = spec.get("versions")
        if not isinstance(vs, list) or not vs or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in vs) \
                or len(set(vs)) != len(vs):
            fail(f"registry.{x}.versions", "a non-empty list of distinct positive integers")
        lv = spec.get("live", max(vs))
        if lv not in vs:
            fail(f"registry.{x}.live", f"{lv!r} is not one of the versions {vs}")
        versions[x], live[x] = tuple(sorted(vs)), lv
    contracts = []
    for i, text in enumerate(raw.get("contracts", [])):
        try:
            c = Contract.parse(text) if isinstance(text, str) else Contract.parse(repr(text))
        except IsolationError as exc:
            fail(f"contracts[{i}]", str(exc))
        for x in (c.subject, c.required):
            if x not in versions:
                fail(f"contracts[{i}]", f"{x} is not in [registry]")
        contracts.append(c)
    sets = {}
    for key in ("late", "opaque"):
        vals = raw.get(key, [])
        if not isinstance(vals, list) or any(v not in versions for v in vals):
            fail(key, "a list of identities declared in [registry]")
        sets[key] = frozenset(vals)
    raw_steps = raw.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        fail("steps", "missing or empty (a list of '<workflow> <verb> ...' strings)")
    steps = []
    for i, text in enumerate(raw_steps):
        try:
            steps.append(parse_step(text))
        except (ValueError, IsolationError) as exc:
            fail(f"steps[{i}]", str(exc))
    try:
        _check_program(steps, {x: list(v) for x, v in versions.items()}, live)
    except ValueError as exc:
        fail("steps", str(exc))
    description = raw.get("description", "")
    if not isinstance(description, str):
        fail("description", "must be a string")
    return IsolationScenario(name, description, anomaly, versions, live, tuple(contracts), sets["late"],
                             sets["opaque"], tuple(steps), str(path))
