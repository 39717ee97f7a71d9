"""Workloads as data: loading and validating scenario files (ATR paper, §4 "Workloads").

A workload is one TOML file in ``scenarios/workloads/`` (or in a folder named by
``--scenario-dir`` / ``DRIFTLAB_SCENARIOS``): the objects the agent reads, the
typed premises that justify its decision, the intent it will release, and one
mutation per class with the oracle outcome the business rule gives.  The
README documents the format.  A file is validated completely on load; the first
problem is raised as a :class:`ScenarioError` whose message is one line naming
the file, the field and the problem.  Adding a workload is adding a file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from scenarios.rules import RuleError, compile_rule
from vocabulary.revalidation import MUTATION_CLASSES, Change, Intent, Outcome, Premise, Ref, object_of, reverse_index

BUILTIN_DIR = Path(__file__).parent / "workloads"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_TOP_KEYS = {"family", "name", "description", "source", "reads", "objects", "premises", "intent", "mutations"}


from scenarios import ScenarioError, load_scenarios, read_toml  # noqa: E402 - the lab-wide loader and its error


@dataclass(frozen=True)
class Mutation:
    mutation_class: str
    description: str
    oracle: Outcome
    variants: tuple[tuple[Change, ...], ...]  # a repetition picks one variant by its seed


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    objects: dict[str, dict[str, Any]]
    reads: tuple[Ref, ...]
    premises: tuple[Premise, ...]
    intent: Intent
    mutations: dict[str, Mutation]
    path: Path

    def initial_state(self) -> dict[Ref, Any]:
        return dict(self._state)

    @cached_property
    def _state(self) -> dict[Ref, Any]:
        return {f"{obj}.{f}": v for obj, fields in self.objects.items() for f, v in fields.items()}

    @cached_property
    def read_objects(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(object_of(ref) for ref in self.reads))

    @cached_property
    def dependencies(self) -> dict[Ref, tuple[int, ...]]:
        """The complete reverse index of the premises (shared, never mutated)."""
        return reverse_index(self.premises)


def _fail(path: Path, where: str, problem: str) -> ScenarioError:
    return ScenarioError(f"{path}: {where}: {problem}")


def parse_workload(path: Path) -> Workload:
    """Load and validate one scenario file."""
    path = Path(path)
    return parse_scenario(path, read_toml(path))


def parse_scenario(path: Path, raw: dict[str, Any]) -> Workload:
    """Validate one revalidation scenario file's TOML (the loader in ``scenarios`` dispatches here)."""

    def need(table: dict, key: str, kind: type, where: str) -> Any:
        if key not in table:
            raise _fail(path, where + key, "missing")
        if not isinstance(table[key], kind):
            raise _fail(path, where + key, f"must be a {kind.__name__}, got {type(table[key]).__name__}")
        return table[key]

    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise _fail(path, sorted(unknown)[0], f"unknown key (expected {', '.join(sorted(_TOP_KEYS))})")
    name = need(raw, "name", str, "")
    if not _NAME.match(name):
        raise _fail(path, "name", f"{name!r} must be lower_snake_case")
    objects = need(raw, "objects", dict, "")
    if not objects or not all(isinstance(v, dict) and v for v in objects.values()):
        raise _fail(path, "objects", "must hold at least one object, each a table of fields")
    state = {f"{o}.{f}": v for o, fields in objects.items() for f, v in fields.items()}

    reads = need(raw, "reads", list, "")
    for i, ref in enumerate(reads):
        if ref not in state:
            raise _fail(path, f"reads[{i}]", f"{ref!r} is not a field of any object")
    if len(set(reads)) != len(reads):
        raise _fail(path, "reads", "lists a field twice")

    premises: list[Premise] = []
    for i, p in enumerate(need(raw, "premises", list, "")):
        where = f"premises[{i}]"
        pid = need(p, "id", str, where + ".")
        try:
            check, evidence = compile_rule(need(p, "rule", str, where + "."))
            severity = Outcome.parse(need(p, "severity", str, where + "."))
        except (RuleError, ValueError) as exc:
            raise _fail(path, f"{where} ({pid})", str(exc)) from None
        if severity is Outcome.KEEP:
            raise _fail(path, f"{where}.severity", "a failing premise cannot KEEP (use REFRESH, REPLAN or BLOCK)")
        for ref in evidence:
            if ref not in reads:
                raise _fail(path, f"{where}.rule", f"uses {ref!r}, which is not in reads")
        premise = Premise(pid, evidence, check, severity, int(p.get("validator_version", 1)), p["rule"])
        if not premise.holds(state.__getitem__, state):
            raise _fail(path, f"{where} ({pid})", "does not hold in the initial objects, so the decision was never justified")
        premises.append(premise)
    if not premises:
        raise _fail(path, "premises", "at least one premise is needed")
    if len({p.id for p in premises}) != len(premises):
        raise _fail(path, "premises", "two premises share an id")

    it = need(raw, "intent", dict, "")
    target = need(it, "target", str, "intent.")
    if target not in objects:
        raise _fail(path, "intent.target", f"{target!r} is not an object")
    payload = need(it, "payload", dict, "intent.")
    for key, ref in payload.items():
        if ref not in reads:
            raise _fail(path, f"intent.payload.{key}", f"{ref!r} is not in reads")
    effect = need(it, "effect", dict, "intent.")
    for ref in effect:
        if ref not in state or object_of(ref) != target:
            raise _fail(path, "intent.effect", f"{ref!r} is not a field of the target {target!r}")
    intent = Intent(need(it, "action", str, "intent."), target, dict(payload), dict(effect))

    evidence_of = {ref for p in premises for ref in p.evidence}
    refresh_evidence = {ref for p in premises if p.severity is Outcome.REFRESH for ref in p.evidence}
    mutations: dict[str, Mutation] = {}
    table = need(raw, "mutations", dict, "")
    if set(table) != set(MUTATION_CLASSES):
        missing, extra = set(MUTATION_CLASSES) - set(table), set(table) - set(MUTATION_CLASSES)
        problem = f"missing class {sorted(missing)[0]!r}" if missing else f"unknown class {sorted(extra)[0]!r}"
        raise _fail(path, "mutations", problem + f" (one mutation per class: {', '.join(MUTATION_CLASSES)})")
    for cls, m in table.items():
        where = f"mutations.{cls}"
        oracle = Outcome.parse(need(m, "oracle", str, where + "."))
        if oracle is not MUTATION_CLASSES[cls]:
            raise _fail(path, f"{where}.oracle", f"{cls} changes have oracle {MUTATION_CLASSES[cls].name}, not {oracle.name}")
        variants = []
        for j, v in enumerate(need(m, "variants", list, where + ".")):
            if not isinstance(v, dict) or not v:
                raise _fail(path, f"{where}.variants[{j}]", "must be a non-empty table of field = new value")
            for ref, value in v.items():
                if ref not in state:
                    raise _fail(path, f"{where}.variants[{j}]", f"{ref!r} is not a field of any object")
                if value == state[ref]:
                    raise _fail(path, f"{where}.variants[{j}]", f"{ref!r} already holds {value!r}: not a change")
                if cls == "irrelevant" and (ref not in reads or ref in evidence_of):
                    raise _fail(path, f"{where}.variants[{j}]", f"{ref!r} must be a read field that no premise uses")
                if cls == "presentation" and ref not in refresh_evidence:
                    raise _fail(path, f"{where}.variants[{j}]", f"{ref!r} is evidence of no REFRESH premise")
            variants.append(tuple(Change(ref, value) for ref, value in v.items()))
        if not variants:
            raise _fail(path, f"{where}.variants", "at least one variant is needed")
        mutations[cls] = Mutation(cls, str(m.get("description", "")), oracle, tuple(variants))

    return Workload(name, str(raw.get("description", "")), objects, tuple(reads), tuple(premises), intent,
                    {c: mutations[c] for c in MUTATION_CLASSES}, path)


def load_workloads(extra_dirs: tuple[Path, ...] = ()) -> dict[str, Workload]:
    """Every revalidation workload in the built-in folder and the user's folders, by name."""
    return load_scenarios(tuple(extra_dirs), family="revalidation")["revalidation"]
