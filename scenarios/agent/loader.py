"""Agent scenario files (``family = "agent"``): the refund agent, the changes that hit it while parked, the oracle.

Serves issue 15's agent family.  A file declares the business state the
agent's decision reads, the premises over it (``left op right``, a severity),
the payload fields, one premise change per class with its expected outcome,
the semantic resources behind aliases with their contracts, the deployments,
the crash points (the resume family's names) and the cases that combine them.

**The oracle** of a premise change is computed here, from the declared
premises, by :func:`oracle` — an evaluator that shares no code with the
guard's revalidation layer — and a file whose declared ``expect`` disagrees is
refused.  The rule: apply the change to the state; if a premise of severity
BLOCK turns false the outcome is BLOCK, else one of severity REPLAN gives
REPLAN, else a changed payload field gives REFRESH, else KEEP.

Every problem is one line, ``<file>: <field>: <problem>``.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scenarios import ScenarioError
from vocabulary.agent import BLOCK, CHANGE_CLASSES, CRASH_POINTS, DURABILITY, KEEP, NODES, OUTCOMES, REFRESH, REPLAN

OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
NONE = "none"


@dataclass(frozen=True)
class Premise:
    name: str
    left: str  # object.field
    op: str
    right: Any  # a literal, or object.field
    severity: str  # BLOCK | REPLAN


@dataclass(frozen=True)
class Change:
    cls: str  # the premise-change class
    field: str  # object.field
    value: Any
    expect: str  # the oracle (checked against the premises at load time)


@dataclass(frozen=True)
class Crash:
    point: str
    node: str
    durability: str


@dataclass(frozen=True)
class AgentCase:
    name: str
    change: str  # a change class or "none"
    deployment: str  # a deployment name or "none"
    approvers: int
    crash: str  # a crash point or "none"
    profiles: tuple[str, ...] = ("quick", "paper")  # the profiles that run this case


@dataclass(frozen=True)
class AgentScenario:
    name: str
    path: str
    description: str
    input: str
    approval: str
    state: dict[str, dict[str, Any]]
    premises: tuple[Premise, ...]
    payload: tuple[str, ...]
    other_reads: tuple[str, ...]
    stock_check: str  # the object whose version the agent without the guard compares before acting
    changes: dict[str, Change]
    resources: dict[str, tuple[int, ...]]
    contracts: tuple[str, ...]
    deployments: dict[str, dict[str, int]]
    crashes: dict[str, Crash]
    cases: tuple[AgentCase, ...]
    repetitions: dict[str, int]

    @property
    def family(self) -> str:
        return "agent"

    def case(self, name: str) -> AgentCase:
        for c in self.cases:
            if c.name == name:
                return c
        raise KeyError(name)

    def durability(self, case: AgentCase) -> str:
        return self.crashes[case.crash].durability if case.crash != NONE else "sync"

    def oracle(self, change: str) -> str:
        """The expected outcome of a change class (KEEP when the case has none)."""
        return KEEP if change == NONE else self.changes[change].expect


# ------------------------------------------------------------------ the oracle's own evaluator
def _get(state: dict, ref: str) -> Any:
    obj, _, fld = ref.partition(".")
    return state[obj][fld]


def _holds(p: Premise, state: dict) -> bool:
    right = _get(state, p.right) if isinstance(p.right, str) and "." in p.right else p.right
    return bool(OPS[p.op](_get(state, p.left), right))


def oracle(premises, payload, state: dict, field: str, value: Any) -> str:
    """The declared rule: what a pending action justified on ``state`` must become after ``field`` := ``value``."""
    after = {o: dict(f) for o, f in state.items()}
    obj, _, fld = field.partition(".")
    after[obj][fld] = value
    broken = [p.severity for p in premises if _holds(p, state) and not _holds(p, after)]
    if BLOCK in broken:
        return BLOCK
    if REPLAN in broken:
        return REPLAN
    if field in payload and _get(state, field) != value:
        return REFRESH
    return KEEP


# ------------------------------------------------------------------ parsing
def _need(path, raw: dict, key: str, kind, where: str = ""):
    if key not in raw:
        raise ScenarioError(f"{path}: {where}{key}: missing")
    if not isinstance(raw[key], kind) or (kind is int and isinstance(raw[key], bool)):
        raise ScenarioError(f"{path}: {where}{key}: expected {getattr(kind, '__name__', kind)}")
    return raw[key]


def _ref(path, state: dict, ref: Any, where: str) -> str:
    if not isinstance(ref, str) or "." not in ref:
        raise ScenarioError(f"{path}: {where}: expected object.field, got {ref!r}")
    obj, _, fld = ref.partition(".")
    if fld not in state.get(obj, {}):
        raise ScenarioError(f"{path}: {where}: {ref!r} is not a field of the declared state")
    return ref


def parse_scenario(path: Path, raw: dict[str, Any]) -> AgentScenario:
    name = _need(path, raw, "name", str)
    state = _need(path, raw, "state", dict)
    for obj, fields in state.items():
        if not isinstance(fields, dict) or not fields:
            raise ScenarioError(f"{path}: state.{obj}: expected a table of fields")
    premises = []
    for i, p in enumerate(_need(path, raw, "premises", list)):
        where = f"premises[{i}]."
        if not isinstance(p, dict):
            raise ScenarioError(f"{path}: premises[{i}]: expected a table")
        op = _need(path, p, "op", str, where)
        if op not in OPS:
            raise ScenarioError(f"{path}: {where}op: {op!r} is not one of {', '.join(OPS)}")
        sev = _need(path, p, "severity", str, where)
        if sev not in (BLOCK, REPLAN):
            raise ScenarioError(f"{path}: {where}severity: {sev!r} (expected BLOCK or REPLAN)")
        if "right" not in p:
            raise ScenarioError(f"{path}: {where}right: missing")
        right = p["right"]
        if isinstance(right, str) and "." in right:
            _ref(path, state, right, where + "right")
        premises.append(Premise(_need(path, p, "name", str, where), _ref(path, state, p.get("left"), where + "left"),
                                op, right, sev))
    for i, p in enumerate(premises):  # a premise over values of types it cannot compare: named, never a traceback
        try:
            _holds(p, state)
        except TypeError:
            right = _get(state, p.right) if isinstance(p.right, str) and "." in p.right else p.right
            raise ScenarioError(f"{path}: premises[{i}]: {p.left} {p.op} {p.right} compares "
                                f"{type(_get(state, p.left)).__name__} {_get(state, p.left)!r} with "
                                f"{type(right).__name__} {right!r}") from None
    payload = tuple(_ref(path, state, r, "payload") for r in _need(path, raw, "payload", list))
    others = tuple(_ref(path, state, r, "other_reads") for r in raw.get("other_reads", []))
    stock_check = _need(path, raw, "stock_check", str)
    if stock_check not in state:
        raise ScenarioError(f"{path}: stock_check: {stock_check!r} is not an object of the declared state")
    changes = {}
    for cls, c in _need(path, raw, "changes", dict).items():
        where = f"changes.{cls}."
        if cls not in CHANGE_CLASSES:
            raise ScenarioError(f"{path}: changes.{cls}: not a premise-change class ({', '.join(CHANGE_CLASSES)})")
        field = _ref(path, state, c.get("field"), where + "field")
        if "value" not in c:
            raise ScenarioError(f"{path}: {where}value: missing")
        expect = _need(path, c, "expect", str, where)
        if expect not in OUTCOMES:
            raise ScenarioError(f"{path}: {where}expect: {expect!r} is not one of {', '.join(OUTCOMES)}")
        try:
            derived = oracle(premises, payload, state, field, c["value"])
        except TypeError:
            raise ScenarioError(f"{path}: {where}value: {c['value']!r} ({type(c['value']).__name__}) cannot be "
                                f"compared by the premises that read {field}") from None
        if derived != expect:
            raise ScenarioError(f"{path}: {where}expect: declared {expect} but the declared premises give {derived}")
        changes[cls] = Change(cls, field, c["value"], expect)
    res = dict(_need(path, raw, "resources", dict))
    contracts = tuple(res.pop("contracts", []))
    resources = {}
    for ident, versions in res.items():
        if ":" not in ident or not isinstance(versions, list) or not versions or \
                not all(isinstance(v, int) and not isinstance(v, bool) for v in versions):
            raise ScenarioError(f"{path}: resources.{ident}: expected kind:name = [version, ...]")
        resources[ident] = tuple(versions)
    for c in contracts:
        left, sep, right = str(c).partition(" requires ")
        refs = [left, right]
        if not sep or any("@" not in r or r.split("@")[0].strip() not in resources for r in refs):
            raise ScenarioError(f"{path}: resources.contracts: {c!r} (expected 'kind:a@N requires kind:b@M' over "
                                f"declared resources)")
    deployments = {}
    for dname, table in raw.get("deployments", {}).items():
        if not isinstance(table, dict) or not table:
            raise ScenarioError(f"{path}: deployments.{dname}: expected identity = version")
        for ident, v in table.items():
            if v not in resources.get(ident, ()):
                raise ScenarioError(f"{path}: deployments.{dname}.{ident}: version {v!r} is not declared in resources")
        deployments[dname] = dict(table)
    crashes = {}
    for point, c in raw.get("crashes", {}).items():
        if point not in CRASH_POINTS:
            raise ScenarioError(f"{path}: crashes.{point}: not a crash point ({', '.join(CRASH_POINTS)})")
        node = _need(path, c, "node", str, f"crashes.{point}.")
        if node not in NODES:
            raise ScenarioError(f"{path}: crashes.{point}.node: {node!r} is not a node ({', '.join(NODES)})")
        dur = _need(path, c, "durability", str, f"crashes.{point}.")
        if dur not in DURABILITY:
            raise ScenarioError(f"{path}: crashes.{point}.durability: {dur!r} is not one of {', '.join(DURABILITY)}")
        crashes[point] = Crash(point, node, dur)
    cases, seen = [], set()
    for i, c in enumerate(_need(path, raw, "cases", list)):
        where = f"cases[{i}]."
        cname = _need(path, c, "name", str, where)
        if cname in seen:
            raise ScenarioError(f"{path}: {where}name: {cname!r} repeats")
        seen.add(cname)
        change, dep, crash = c.get("change", NONE), c.get("deployment", NONE), c.get("crash", NONE)
        if change != NONE and change not in changes:
            raise ScenarioError(f"{path}: {where}change: {change!r} is not a declared change")
        if dep != NONE and dep not in deployments:
            raise ScenarioError(f"{path}: {where}deployment: {dep!r} is not a declared deployment")
        if crash != NONE and crash not in crashes:
            raise ScenarioError(f"{path}: {where}crash: {crash!r} is not a declared crash")
        k = _need(path, c, "approvers", int, where)
        if k not in (1, 2, 4):
            raise ScenarioError(f"{path}: {where}approvers: {k} (expected 1, 2 or 4)")
        if crash != NONE and k != 1:
            raise ScenarioError(f"{path}: {where}crash: a crash needs approvers = 1")
        profiles = c.get("profiles", ["quick", "paper"])
        if not isinstance(profiles, list) or not profiles or not set(profiles) <= {"quick", "paper"}:
            raise ScenarioError(f"{path}: {where}profiles: expected a list of quick and/or paper")
        cases.append(AgentCase(cname, change, dep, k, crash, tuple(profiles)))
    reps = _need(path, raw, "repetitions", dict)
    for prof in ("quick", "paper"):
        if not isinstance(reps.get(prof), int) or reps[prof] < 1:
            raise ScenarioError(f"{path}: repetitions.{prof}: expected a positive integer")
    return AgentScenario(name, str(path), raw.get("description", ""), str(raw.get("input", "order")),
                         str(raw.get("approval", "approve")), {o: dict(f) for o, f in state.items()}, tuple(premises),
                         payload, others, stock_check, changes, resources, contracts, deployments, crashes,
                         tuple(cases), dict(reps))
