"""Workloads as data: loading and validating scenario files (ATR paper, §4 "Workloads").

A workload is one TOML file (``family = "revalidation"``) in
``scenarios/revalidation/workloads/`` or in a folder named by ``--scenario-dir`` /
``DRIFTLAB_SCENARIOS``: the objects the agent reads, the typed premises that
justify its decision, the intent it will release, and one mutation per class
with the oracle outcome the business rules give.  The README documents the
format and the rule grammar.  A file is validated completely on load:

- every value has the expected TOML type, every field reference names a
  field, every rule parses and is well typed (:mod:`scenarios.revalidation.rules`), and a
  variant's value has the type of the field it replaces;
- every premise holds on the initial objects;
- the declared oracle of every variant is the one its rules imply, as the
  brute-force reference evaluator (:mod:`scenarios.revalidation.oracle`) computes it, alone
  and after schedule s7's prelude change;
- on every state the loader judges, each premise's compiled check (the rule
  parser's tree) agrees with the oracle's own reading of the rule text, so a
  rule-parser bug refuses the file instead of making both agree on it.

The first problem is raised as a :class:`scenarios.ScenarioError` whose
message is one line, ``<file>: <field>: <problem>``.  Adding a workload is
adding a file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from scenarios import ScenarioError, load_scenarios, read_toml
from scenarios.revalidation.oracle import Reference, ReadingError, holds, prelude_class, prelude_variant
from scenarios.revalidation.rules import RuleError, check_types, compatible, compile_tree, parse_rule, refs_of, type_of
from vocabulary.revalidation import MUTATION_CLASSES, Change, Intent, Outcome, Premise, Ref, object_of, reverse_index

__all__ = ["BUILTIN_DIR", "Mutation", "ScenarioError", "Workload", "load_workloads", "parse_scenario",
           "parse_workload"]

BUILTIN_DIR = Path(__file__).parent / "workloads"
FAMILY = "revalidation"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_TOP_KEYS = ("family", "name", "description", "source", "reads", "objects", "premises", "intent", "mutations")
_PREMISE_KEYS = ("id", "rule", "severity", "validator_version", "description")
_INTENT_KEYS = ("action", "target", "payload", "effect")
_MUTATION_KEYS = ("oracle", "description", "variants")
_SCALARS = ("bool", "number", "string", "datetime", "local datetime", "date", "time")


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
    line = f"{path}: {where}: {problem}"
    return ScenarioError(" ".join(line.splitlines()))  # one line, whatever a message quoted


def _kind(value: Any) -> str:
    """A value's TOML type as a user reads it."""
    t = type_of(value)
    return "table" if t == "table" else ("list" if t.startswith("list[") else t)


def parse_workload(path: Path) -> Workload:
    """Load and validate one scenario file."""
    path = Path(path)
    return parse_scenario(path, read_toml(path))


def parse_scenario(path: Path, raw: dict[str, Any]) -> Workload:
    """Validate one revalidation scenario file's TOML (the loader in ``scenarios`` dispatches here)."""
    path = Path(path)

    def fail(where: str, problem: str) -> ScenarioError:
        return _fail(path, where, problem)

    def need(table: dict, key: str, kinds: tuple[type, ...] | type, where: str, what: str) -> Any:
        if key not in table:
            raise fail(where, "missing")
        return typed(table[key], kinds, where, what)

    def typed(value: Any, kinds: tuple[type, ...] | type, where: str, what: str) -> Any:
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            raise fail(where, f"must be {what}, got {_kind(value)} {short(value)}")
        return value

    def keys(table: dict, allowed: tuple[str, ...], where: str) -> None:
        extra = [k for k in table if k not in allowed]
        if extra:
            raise fail(f"{where}{extra[0]}", f"unknown key (expected {', '.join(allowed)})")

    if not isinstance(raw, dict):
        raise fail("toml", "not a table of keys")
    keys(raw, _TOP_KEYS, "")
    if raw.get("family", FAMILY) != FAMILY:
        raise fail("family", f"{raw['family']!r} is not {FAMILY!r}")
    name = need(raw, "name", str, "name", "a string")
    if not _NAME.match(name):
        raise fail("name", f"{name!r} must be lower_snake_case")
    description = typed(raw.get("description", ""), str, "description", "a string")
    typed(raw.get("source", ""), str, "source", "a string")

    # ---------------------------------------------------------------- objects and their fields
    objects = need(raw, "objects", dict, "objects", "a table of objects")
    if not objects:
        raise fail("objects", "must hold at least one object")
    state: dict[Ref, Any] = {}
    types: dict[Ref, str] = {}
    for obj, fields in objects.items():
        where = f"objects.{obj}"
        if not obj or "." in obj or "`" in obj or not obj.isprintable():
            raise fail(where, f"the object name {obj!r} must be non-empty, printable and free of '.' and '`'")
        typed(fields, dict, where, "a table of fields")
        if not fields:
            raise fail(where, "must hold at least one field")
        for f, value in fields.items():
            if not f or "`" in f or not f.isprintable():
                raise fail(f"{where}.{f}", f"the field name {f!r} must be non-empty, printable and free of '`'")
            t = type_of(value)
            element = t[5:-1] if t.startswith("list[") else None
            if t not in _SCALARS and element not in (*_SCALARS, ""):
                problem = ("a list holds values of one type" if element == "mixed" else
                           f"a field holds a boolean, number, string, date/time or a list of one of those, not {t}")
                raise fail(f"{where}.{f}", problem)
            state[f"{obj}.{f}"], types[f"{obj}.{f}"] = value, t

    # ---------------------------------------------------------------- reads
    reads = need(raw, "reads", list, "reads", "a list of field references")
    for i, ref in enumerate(reads):
        typed(ref, str, f"reads[{i}]", "a field reference string 'object.field'")
        if ref not in state:
            raise fail(f"reads[{i}]", f"{ref!r} is not a field of any object")
    if len(set(reads)) != len(reads):
        raise fail("reads", "lists a field twice")

    # ---------------------------------------------------------------- premises
    premises: list[Premise] = []
    for i, p in enumerate(need(raw, "premises", list, "premises", "a list of premise tables ([[premises]])")):
        where = f"premises[{i}]"
        typed(p, dict, where, "a premise table with id, rule and severity")
        keys(p, _PREMISE_KEYS, where + ".")
        pid = need(p, "id", str, where + ".id", "a string")
        if not pid:
            raise fail(where + ".id", "must not be empty")
        if any(q.id == pid for q in premises):
            raise fail(where + ".id", f"{pid!r} is already the id of another premise")
        label = f"{where} ({pid})"
        text = need(p, "rule", str, where + ".rule", "a string")
        try:
            tree = parse_rule(text)
        except RuleError as exc:
            raise fail(label, str(exc)) from None
        for ref in refs_of(tree):
            if ref not in state:
                raise fail(f"{where}.rule", f"uses {ref!r}, which is not a field of any object")
            if ref not in reads:
                raise fail(f"{where}.rule", f"uses {ref!r}, which is not in reads")
        try:
            check_types(tree, types)
        except RuleError as exc:
            raise fail(label, f"rule {text!r}: {exc}") from None
        try:
            severity = Outcome.parse(need(p, "severity", str, where + ".severity", "a string"))
        except ValueError as exc:
            raise fail(label, str(exc)) from None
        if severity is Outcome.KEEP:
            raise fail(f"{where}.severity", "a failing premise cannot KEEP (use REFRESH, REPLAN or BLOCK)")
        version = typed(p.get("validator_version", 1), int, f"{where}.validator_version", "a whole number")
        if version < 1:
            raise fail(f"{where}.validator_version", f"must be 1 or more, got {version}")
        premise = Premise(pid, refs_of(tree), compile_tree(tree), severity, version, text)
        if not premise.holds(state.__getitem__, state):
            raise fail(label, "does not hold in the initial objects, so the decision was never justified")
        premises.append(premise)
    if not premises:
        raise fail("premises", "at least one premise is needed")

    # ---------------------------------------------------------------- intent
    it = need(raw, "intent", dict, "intent", "a table")
    keys(it, _INTENT_KEYS, "intent.")
    action = need(it, "action", str, "intent.action", "a string")
    target = need(it, "target", str, "intent.target", "a string")
    if target not in objects:
        raise fail("intent.target", f"{target!r} is not an object")
    payload = need(it, "payload", dict, "intent.payload", "a table of key = field reference")
    for key, ref in payload.items():
        typed(ref, str, f"intent.payload.{key}", "a field reference string 'object.field'")
        if ref not in reads:
            raise fail(f"intent.payload.{key}", f"{ref!r} is not in reads")
    effect = need(it, "effect", dict, "intent.effect", "a table of field reference = new value")
    if not effect:
        raise fail("intent.effect", "must write at least one field of the target")
    for ref, value in effect.items():
        if ref not in state or object_of(ref) != target:
            raise fail("intent.effect", f"{ref!r} is not a field of the target {target!r}")
        if not compatible(type_of(value), types[ref]):
            raise fail(f"intent.effect.{ref}", f"{ref!r} is a {types[ref]}; the effect writes a {type_of(value)} "
                       f"({short(value)})")
    intent = Intent(action, target, dict(payload), dict(effect))

    # ---------------------------------------------------------------- mutations
    evidence_of = {ref for p in premises for ref in p.evidence}
    refresh_evidence = {ref for p in premises if p.severity is Outcome.REFRESH for ref in p.evidence}
    table = need(raw, "mutations", dict, "mutations", "a table with one mutation per class")
    if set(table) != set(MUTATION_CLASSES):
        missing, extra = set(MUTATION_CLASSES) - set(table), set(table) - set(MUTATION_CLASSES)
        problems = [f"missing class {sorted(missing)[0]!r}"] if missing else []
        problems += [f"unknown class {sorted(map(str, extra))[0]!r}"] if extra else []
        problem = "; ".join(problems)
        raise fail("mutations", problem + f" (one mutation per class: {', '.join(MUTATION_CLASSES)})")
    mutations: dict[str, Mutation] = {}
    for cls in MUTATION_CLASSES:
        where = f"mutations.{cls}"
        m = typed(table[cls], dict, where, "a table with oracle and variants")
        keys(m, _MUTATION_KEYS, where + ".")
        try:
            oracle = Outcome.parse(need(m, "oracle", str, where + ".oracle", "a string"))
        except ValueError as exc:
            raise fail(where + ".oracle", str(exc)) from None
        if oracle is not MUTATION_CLASSES[cls]:
            raise fail(f"{where}.oracle", f"{cls} changes have oracle {MUTATION_CLASSES[cls].name}, not {oracle.name}")
        mdesc = typed(m.get("description", ""), str, where + ".description", "a string")
        variants = []
        for j, v in enumerate(need(m, "variants", list, where + ".variants", "a list of tables")):
            vwhere = f"{where}.variants[{j}]"
            typed(v, dict, vwhere, "a table of field = new value")
            if not v:
                raise fail(vwhere, "must change at least one field")
            for ref, value in v.items():
                if ref not in state:
                    raise fail(vwhere, f"{ref!r} is not a field of any object")
                if not compatible(type_of(value), types[ref]):
                    raise fail(vwhere, f"{ref!r} is a {types[ref]}; the variant sets a {type_of(value)} ({short(value)})")
                if value == state[ref] and type_of(value) == types[ref]:
                    raise fail(vwhere, f"{ref!r} already holds {short(value)}: not a change")
                if cls == "irrelevant" and (ref not in reads or ref in evidence_of):
                    raise fail(vwhere, f"{ref!r} must be a read field that no premise uses")
                if cls == "presentation" and ref not in refresh_evidence:
                    raise fail(vwhere, f"{ref!r} is evidence of no REFRESH premise")
            variants.append(tuple(Change(ref, value) for ref, value in v.items()))
        if not variants:
            raise fail(f"{where}.variants", "at least one variant is needed")
        mutations[cls] = Mutation(cls, mdesc, oracle, tuple(variants))

    # ---------------------------------------------------------------- the oracle follows from the rules
    payload_refs = set(payload.values())
    try:
        reference = Reference(tuple((p.id, p.rule, p.severity.name) for p in premises), dict(state))
    except ReadingError as exc:
        raise fail("premises", f"the oracle cannot read a rule the parser accepted ({exc}): a rule-parser bug") from None

    def because(judgement) -> str:
        return f"failing premises: {', '.join(judgement.failed) or 'none'}"

    def same_reading(where: str, *changes) -> None:
        """The compiled checks (the rule parser's) and the oracle's own reading of the text agree on this state."""
        after = reference.state(*changes)
        for p, (_, reading, _) in zip(premises, reference.premises):
            if p.holds(after.__getitem__, state) != holds(reading, after, state):
                raise fail(where, f"premise {p.id!r}: the compiled rule {p.rule!r} and the oracle's own reading of "
                                  "its text disagree on this state: a rule-parser bug")

    same_reading("premises")
    for cls, m in mutations.items():
        for j, variant in enumerate(m.variants):
            same_reading(f"mutations.{cls}.variants[{j}]", variant)
            got = reference.judge(variant)
            if got.outcome != m.oracle.name:
                raise fail(f"mutations.{cls}.variants[{j}]",
                           f"declares {m.oracle.name} but the rules imply {got.outcome} ({because(got)})")
            stale = [c.ref for c in variant if c.ref in payload_refs]
            if got.outcome == "KEEP" and stale:
                raise fail(f"mutations.{cls}.variants[{j}]",
                           f"changes {stale[0]!r}, which the intent's payload carries, yet the rules imply KEEP, so the "
                           "effect would be released with a stale payload (guard the field with an unchanged(...) "
                           "REFRESH premise)")
    for cls, m in mutations.items():
        first = prelude_class(m.oracle)
        preludes = mutations[first].variants
        for j, variant in enumerate(m.variants):
            k = prelude_variant(j, len(preludes))
            same_reading(f"mutations.{cls}.variants[{j}]", preludes[k], variant)
            got = reference.judge(preludes[k], variant)
            if got.outcome != m.oracle.name:
                raise fail(f"mutations.{cls}.variants[{j}]",
                           f"declares {m.oracle.name} but after schedule s7's first change "
                           f"(mutations.{first}.variants[{k}]) the rules imply {got.outcome} ({because(got)}); "
                           "the oracle must not depend on the schedule")

    return Workload(name, description, objects, tuple(reads), tuple(premises), intent, mutations, path)


def short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_workloads(extra_dirs: tuple[Path, ...] = ()) -> dict[str, Workload]:
    """Every revalidation workload in the built-in folder and the user's folders, by name."""
    return load_scenarios(tuple(extra_dirs), family=FAMILY)["revalidation"]
