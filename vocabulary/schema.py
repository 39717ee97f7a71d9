"""What a history of a family may hold, declared once: operation names, value keys, meta keys.

A history is the lab's public interface (people export their own), so
``driftlab check`` validates every line before any checker sees it (Elle
does the same: a malformed history is an error, never a verdict).  Each
family declares its operations in its vocabulary module as one
:class:`HistorySchema` (``vocabulary.<family>.HISTORY``); from that one
declaration come

- the validator (:meth:`HistorySchema.validator`): per operation, the common
  fields (``index`` an integer, strictly increasing; ``actor``, ``op``,
  ``status``; ``start``/``end`` finite numbers or null with ``end >= start``;
  ``value`` an object) and the family's value keys with their types; the
  header's ``meta`` keys a checker reads;
- the README's per-family table (:meth:`HistorySchema.markdown`), which a
  test compares with the README, so the documentation and the check cannot
  drift apart;
- the **partition** of a history (Porcupine's ``Partition``): the value keys
  whose values tie operations together (``group``; for resume also ``run``).
  Operations that share a value of one of these keys are in one partition;
  each partition is judged on its own.

Every problem is a :class:`~vocabulary.HistoryError` whose message is one
line naming the line number and the field.  Pure: nothing here does I/O.
"""
from __future__ import annotations

import copy
import math
from collections import deque
from dataclasses import dataclass
from itertools import repeat
from operator import ge, gt, itemgetter
from typing import Any, Callable, Mapping

from vocabulary import FAIL, OK, STATUSES, HistoryError, Operation

def _NUMBER(v: Any) -> bool:
    return (type(v) is int or type(v) is float) and math.isfinite(v)


#: JSON types a value key may have ("key": what a partition key may hold, a string or an integer); a boolean is
#: never an integer, a number is finite.
TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int,
    "number": _NUMBER,
    "boolean": lambda v: type(v) is bool,
    "object": lambda v: type(v) is dict,
    "list": lambda v: type(v) is list,
    "key": lambda v: type(v) is str or type(v) is int,
    "any": lambda v: True,
}

#: When a key must be present (and not null): in every operation, unless indeterminate, only when ok, or never.
ALWAYS, ANSWERED, WHEN_OK, OPTIONAL = "always", "unless indeterminate", "when ok", "optional"
_REQUIRED_FOR = {ALWAYS: frozenset(STATUSES), ANSWERED: frozenset({OK, FAIL}), WHEN_OK: frozenset({OK}),
                 OPTIONAL: frozenset()}


@dataclass(frozen=True)
class Key:
    """One ``value`` key: its type, when it is required, whether null is allowed where it is, its allowed values."""

    name: str
    type: str = "any"  # one of TYPES, or several joined by "|" ("integer|string")
    required: str = OPTIONAL  # ALWAYS | ANSWERED | WHEN_OK | OPTIONAL
    nullable: bool = False  # null allowed even where the key is required (where it is not, null is always allowed)
    choices: tuple = ()
    items: str = ""  # for a list: the type of every item (one of TYPES)
    doc: str = ""

    def __post_init__(self):
        for t in self.type.split("|"):
            if t not in TYPES:
                raise ValueError(f"key {self.name}: unknown type {t!r}")
        if self.required not in _REQUIRED_FOR:
            raise ValueError(f"key {self.name}: required must be one of {', '.join(_REQUIRED_FOR)}")

    def problem(self, value: dict, status: str) -> str | None:
        """Why ``value`` breaks this key's declaration (None if it does not)."""
        v = value.get(self.name)
        if v is None:
            if status in _REQUIRED_FOR[self.required] and not (self.nullable and self.name in value):
                when = "" if self.required == ALWAYS else f" (status {status})"
                return f"missing{when}" if self.name not in value else f"is null{when}, expected {self.kind}"
            return None
        if not any(TYPES[t](v) for t in self.type.split("|")):
            return f"must be {self.kind} (got {_shown(v)})"
        if self.choices and v not in self.choices:
            return f"{_shown(v)} is not one of {', '.join(map(str, self.choices))}"
        if self.items and type(v) is list:
            for i, x in enumerate(v):
                if not TYPES[self.items](x):
                    return f"item {i} must be a {self.items} (got {_shown(x)})"
        return None

    @property
    def kind(self) -> str:
        names = [n for t in self.type.split("|") for n in ({"key": ("string", "integer")}.get(t) or (t,))]
        return " or ".join(("an " if t[0] in "aeiou" else "a ") + t for t in names)


@dataclass(frozen=True)
class OpSpec:
    """One operation name of a family, what it means, and its value keys."""

    name: str
    doc: str
    keys: tuple[Key, ...] = ()


@dataclass(frozen=True)
class MetaKey:
    """One header ``meta`` key a checker reads: ``check(value)`` returns a problem (one phrase) or None."""

    name: str
    doc: str
    check: Callable[[Any], str | None]


@dataclass(frozen=True)
class HistorySchema:
    """A family's history format: its operations, the meta keys its checkers read, its partition keys.

    ``separable``: the family's checkers judge each partition independently
    even when several share one history (they split by ``value.group``
    themselves), so partitions may be judged together in batches; otherwise
    each partition is judged as a history of its own.
    """

    family: str
    operations: tuple[OpSpec, ...]
    meta: tuple[MetaKey, ...] = ()
    partition: tuple[str, ...] = ()
    separable: bool = False
    common: tuple[Key, ...] = ()  # value keys every operation may carry (e.g. group)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(op.name for op in self.operations)

    def check_meta(self, meta: Any) -> None:
        """Raise a HistoryError (``meta.<key>: <problem>``) if a meta key a checker reads has the wrong shape."""
        if not isinstance(meta, dict):
            raise HistoryError(f"meta: must be an object (got {_shown(meta)})")
        for m in self.meta:
            if m.name in meta:
                problem = m.check(meta[m.name])
                if problem:
                    raise HistoryError(f"meta.{m.name}: {problem}")

    def markdown(self) -> str:
        """The README's table of this family's operations (generated; a test keeps the README equal to it)."""
        rows = ["| operation | value keys (type; required unless it says when) | meaning |", "|---|---|---|"]
        for op in self.operations:
            rows.append(f"| `{op.name}` | {', '.join(_key_doc(k) for k in op.keys) or '—'} | {op.doc} |")
        notes = []
        if self.common:
            notes.append(f"Every operation may carry {', '.join(_key_doc(k) for k in self.common)}.")
        if self.partition:
            notes.append(f"Partitioned by {' and '.join(f'`value.{k}`' for k in self.partition)}.")
        if self.meta:
            notes.append("Header `meta` keys the checkers read: "
                         + "; ".join(f"`{m.name}` ({m.doc})" for m in self.meta) + ".")
        return "\n".join(rows + (["", " ".join(notes)] if notes else []))


def _key_doc(k: Key) -> str:
    kinds = [{"key": "string or integer"}.get(t, t) for t in k.type.split("|")] + (["null"] if k.nullable else [])
    when = {ALWAYS: "", ANSWERED: ", unless indeterminate", WHEN_OK: ", when ok", OPTIONAL: ", optional"}[k.required]
    choices = f": {' / '.join(map(str, k.choices))}" if k.choices else ""
    kinds = [f"list of {k.items}s" if t == "list" and k.items else t for t in kinds]
    return f"`{k.name}` ({' or '.join(kinds)}{when}{choices})"


def _got(obj: dict, key: str) -> str:
    return "missing" if key not in obj else f"got {_shown(obj[key])}"


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


_PY_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "object": (dict,),
             "list": (list,), "key": (str, int), "any": None}
_STATUS_SET = frozenset(STATUSES)
_NONE = type(None)
_DICT, _INT, _STR, _NULL = {dict}, {int}, {str}, {None}
_TIME = frozenset({int, float, _NONE})  # the types start and end may have
#: An operation line's fields, fetched at once by Validator.check (a KeyError if one is missing).
_FIELDS = itemgetter("index", "actor", "op", "status", "start", "end", "value")


def _compiled(keys: tuple[Key, ...]) -> list[tuple]:
    """One operation's keys as (name, Python types or None for any, the statuses that require it, nullable,
    choices or None, the items' test or None), leaving out the keys that accept anything."""
    checks = []
    for k in keys:
        kinds = [_PY_TYPES[t] for t in k.type.split("|")]
        types = None if None in kinds else frozenset(t for ts in kinds for t in ts)
        if types is None and k.required == OPTIONAL and not k.choices:
            continue  # anything goes
        checks.append((k.name, types, _REQUIRED_FOR[k.required], k.nullable, frozenset(k.choices) or None,
                       TYPES[k.items] if k.items else None))
    return checks


def _fast(keys: tuple[Key, ...]) -> Callable[[dict, str], bool]:
    """One operation's keys compiled into a quick yes/no (the hot path; :meth:`Key.problem` explains a no)."""
    checks = _compiled(keys)

    def ok(value: dict, status: str) -> bool:
        for name, types, required, nullable, choices, items in checks:
            v = value.get(name)
            if v is None:
                if status in required and not (nullable and name in value):
                    return False
                continue
            t = type(v)
            if types is not None and t not in types:
                return False
            if t is float and not math.isfinite(v):
                return False
            if choices is not None and v not in choices:
                return False
            if items is not None and t is list and not all(map(items, v)):
                return False
        return True
    return ok


def _values_pass(values, checks: list[tuple], fetched: dict | None = None) -> bool:
    """Whether every value passes the compiled ``checks`` whatever its status (one pass per key over all values);
    False also when a required key is missing or null somewhere (the per-line test then decides by status).
    ``fetched``: where to leave each key's values (a list, None where absent) for the caller's own use."""
    for key, types, required, _, choices, items in checks:
        got = list(map(dict.get, values, repeat(key)))
        if fetched is not None:
            fetched[key] = got
        kinds = set(map(type, got))
        if (_NONE in kinds and required) or (items is not None and list in kinds):
            return False
        kinds.discard(_NONE)
        if types is not None and not kinds <= types:
            return False
        if choices is not None and not set(got) - _NULL <= choices:
            return False
    return True


class Validator:
    """Checks each parsed line of a history against a family's declaration; every problem a one-line HistoryError.

    Keeps the previous index (indices must increase) and counts the
    operations of undeclared names it was told to accept.  Messages read
    ``line N: <field>: <problem>``.
    """

    def __init__(self, schema: HistorySchema, others: Mapping[str, HistorySchema], allow_unknown: bool):
        self.schema, self.allow_unknown = schema, allow_unknown
        self.keys = {op.name: op.keys + schema.common for op in schema.operations}
        self.fast = {name: _fast(keys) for name, keys in self.keys.items()}
        # for check_many: the keys every operation may carry, checked over all lines at once, and each name's others
        self.common = _compiled(schema.common)
        self.own = {name: [c for c in _compiled(keys) if c not in self.common] for name, keys in self.keys.items()}
        self.needy = frozenset(name for name, checks in self.own.items() if checks)
        self.owner: dict[str, list[str]] = {}  # undeclared here, declared by other families
        for fam, other in others.items():
            for name in sorted(other.names - set(self.keys)) if fam != schema.family else ():
                self.owner.setdefault(name, []).append(fam)
        self.unknown: dict[str, int] = {}  # accepted undeclared operation names -> how many
        self.previous = -math.inf
        self.partition = schema.partition

    def fresh(self) -> Validator:
        """A validator of the same declaration that has seen no line yet (sharing the compiled checks)."""
        other = copy.copy(self)
        other.unknown, other.previous = {}, -math.inf
        return other

    def check(self, obj: Any, n: int) -> dict:
        """Validate one parsed operation line (line ``n``); returns its ``value``.

        The quick test assumes finite numbers (JSON has no NaN or Infinity, and
        orjson refuses them); a line parsed by a laxer reader goes through
        :meth:`strict` instead.
        """
        if type(obj) is dict:
            try:  # one C call for the seven fields (the common line has them all); else one .get each
                index, actor, name, status, start, end, value = _FIELDS(obj)
            except KeyError:
                index, actor, name, status = obj.get("index"), obj.get("actor"), obj.get("op"), obj.get("status")
                start, end, value = obj.get("start"), obj.get("end"), obj.get("value")
            if (type(index) is int and index > self.previous and type(actor) is str
                    and type(value) is dict and type(status) is str and status in _STATUS_SET
                    and (start is None or type(start) is float or type(start) is int)
                    and (end is None or type(end) is float or type(end) is int)
                    and (start is None or end is None or end >= start)):
                fast = self.fast.get(name) if type(name) is str else None
                if fast is not None and fast(value, status):
                    self.previous = index
                    return value
        self._explain(obj, n)
        self.previous = obj["index"]
        return obj["value"]

    def check_many(self, objs: list, fetched: dict | None = None) -> tuple | None:
        """The quick test of :meth:`check` over a chunk's lines at once, a field at a time (one C-level pass per
        field instead of a Python call per line): (the values, each declared operation name's line positions in
        file order, the set of statuses) if every line passes it, else None, and the caller validates the lines one
        by one (:meth:`check`), which either accepts them after all or names the first bad line exactly as it
        always does.

        The lines are sorted by operation name in the pass that refuses an undeclared name, and the keys a name
        declares are tested on its lines (``driftlab check`` picks the lines its checkers read from the same
        lists).  ``objs`` are the lines as orjson parsed them (so no NaN or Infinity: floats are finite).  Nothing
        is changed unless every line passes (``previous`` then becomes the last index).  ``fetched``, if given, is
        left holding the values of each common key (``driftlab check`` reads a partition key's from there).
        """
        if not objs:
            return (), {}, set()
        try:  # a KeyError (a field missing, an undeclared name), a TypeError (a line not an object; an unhashable
            # status, name or choice): line by line
            return self._check_many(objs, {} if fetched is None else fetched)
        except (KeyError, TypeError):
            return None

    def _check_many(self, objs: list, fetched: dict) -> tuple | None:
        index, actor, name, status, start, end, value = zip(*map(_FIELDS, objs))
        kinds = set(status)
        if (set(map(type, index)) != _INT or index[0] <= self.previous or not all(map(gt, index[1:], index))
                or set(map(type, actor)) != _STR or set(map(type, value)) != _DICT or not kinds <= _STATUS_SET):
            return None
        starts, ends = set(map(type, start)), set(map(type, end))
        if not starts <= _TIME or not ends <= _TIME:
            return None
        if _NONE in starts or _NONE in ends:
            if not all(e >= s for s, e in zip(start, end) if s is not None and e is not None):
                return None
        elif not all(map(ge, end, start)):
            return None
        if not _values_pass(value, self.common, fetched):  # the keys every operation may carry, over all lines at once
            return None
        by_name: dict[str, list[int]] = {n: [] for n in self.fast}  # a name it does not hold: KeyError
        deque(map(list.append, map(by_name.__getitem__, name), range(len(name))), 0)
        for op_name in self.needy:  # each name that declares keys of its own: them, over its lines
            at = by_name[op_name]
            if at:
                values = list(map(value.__getitem__, at))
                # whether a missing or null key is allowed depends on each line's status: then the per-line test
                if not _values_pass(values, self.own[op_name]) and not all(
                        map(self.fast[op_name], values, map(status.__getitem__, at))):
                    return None
        self.previous = index[-1]
        return value, by_name, kinds

    def strict(self, obj: Any, n: int) -> dict:
        """:meth:`check` without the quick test (for lines that may hold NaN or Infinity)."""
        self._explain(obj, n)
        self.previous = obj["index"]
        return obj["value"]

    def _explain(self, obj: Any, n: int) -> None:
        """Raise the one-line error for a line the quick check refused (returns if the line is fine after all)."""
        where = f"line {n}"
        if type(obj) is not dict:
            raise HistoryError(f"{where}: expected a JSON object (got {_shown(obj)})")
        index = obj.get("index")
        if type(index) is not int:
            raise HistoryError(f"{where}: index: must be an integer ({_got(obj, 'index')})")
        if index <= self.previous:
            raise HistoryError(f"{where}: index: {index} does not increase (the operation before has index "
                               f"{self.previous}; indices are unique and increasing)")
        actor, name, status = obj.get("actor"), obj.get("op"), obj.get("status")
        if type(actor) is not str:
            raise HistoryError(f"{where}: actor: must be a string ({_got(obj, 'actor')})")
        if type(name) is not str:
            raise HistoryError(f"{where}: op: must be a string ({_got(obj, 'op')})")
        if type(status) is not str or status not in STATUSES:
            raise HistoryError(f"{where}: status: must be one of {', '.join(STATUSES)} ({_got(obj, 'status')})")
        start, end = obj.get("start"), obj.get("end")
        for key, t in (("start", start), ("end", end)):
            if t is not None and not _NUMBER(t):
                raise HistoryError(f"{where}: {key}: must be a finite number or null (got {_shown(t)})")
        if start is not None and end is not None and end < start:
            raise HistoryError(f"{where}: end: {end} is before start {start}")
        value = obj.get("value")
        if type(value) is not dict:
            raise HistoryError(f"{where}: value: must be an object ({_got(obj, 'value')})")
        keys = self.keys.get(name)
        if keys is None:
            keys = self._undeclared(name, where)
        for k in keys:
            problem = k.problem(value, status)
            if problem:
                raise HistoryError(f"{where}: value.{k.name}: {problem}")

    def _undeclared(self, name: str, where: str) -> tuple[Key, ...]:
        if name in self.owner:
            owners = self.owner[name]
            raise HistoryError(f"{where}: op: {name!r} is an operation of the {' and '.join(owners)} "
                               f"famil{'ies' if len(owners) > 1 else 'y'}, but the header says family "
                               f"{self.schema.family!r}")
        if not self.allow_unknown:
            raise HistoryError(f"{where}: op: {name!r} is not an operation of the {self.schema.family} family "
                               f"({', '.join(sorted(self.keys))}; --allow-unknown-ops accepts extra ones)")
        self.unknown[name] = self.unknown.get(name, 0) + 1
        return self.schema.common

    def partition_keys(self, value: dict, n: int) -> list[tuple[str, Any]]:
        """The (key, value) pairs that tie an operation to its partition ([]: the partition of those with none)."""
        out = []
        for k in self.partition:
            v = value.get(k)
            if v is not None:
                if type(v) is not str and type(v) is not int:
                    raise HistoryError(f"line {n}: value.{k}: a partition key must be a string or an integer "
                                       f"(got {_shown(v)})")
                out.append((k, v))
        return out


def operation(obj: dict, _new=object.__new__, _set=object.__setattr__) -> Operation:
    """An :class:`Operation` from a line :meth:`Validator.check` accepted.

    Equal to ``Operation(index, actor, op, ...)``; the frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__``, and giving
    the instance its ``__dict__`` whole is three times as fast (``driftlab
    check`` builds hundreds of thousands of them for a million-operation
    history).
    """
    op = _new(Operation)
    _set(op, "__dict__", {"index": obj["index"], "actor": obj["actor"], "name": obj["op"], "status": obj["status"],
                          "start": obj.get("start"), "end": obj.get("end"), "value": obj["value"]})
    return op


def header(obj: Any, where: str) -> tuple[str, dict]:
    """The family and meta of a header line ``{"history": 1, "family": "...", "meta": {...}}``."""
    from vocabulary import HISTORY_FORMAT

    if type(obj) is not dict or obj.get("history") != HISTORY_FORMAT or type(obj.get("family")) is not str:
        raise HistoryError(f"{where}: the header must be "
                           f'{{"history": {HISTORY_FORMAT}, "family": "<family>", "meta": {{...}}}}')
    meta = obj.get("meta", {})
    if meta is None:
        meta = {}
    return obj["family"], meta


# ------------------------------------------------------------------ small checks for meta keys
def list_of(item: Callable[[Any], str | None], what: str) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if not isinstance(v, list):
            return f"must be a list of {what} (got {_shown(v)})"
        for i, x in enumerate(v):
            problem = item(x)
            if problem:
                return f"item {i}: {problem}"
        return None
    return check


def mapping_of(item: Callable[[Any], str | None], what: str) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if not isinstance(v, dict):
            return f"must be an object of {what} (got {_shown(v)})"
        for k, x in v.items():
            problem = item(x)
            if problem:
                return f"{k}: {problem}"
        return None
    return check


def of_type(t: str) -> Callable[[Any], str | None]:
    return lambda v: None if TYPES[t](v) else f"must be a {t} (got {_shown(v)})"


# ------------------------------------------------------------------ the README's tables, generated from the declarations
def _markers(family: str) -> tuple[str, str]:
    return f"<!-- history:{family} (generated from vocabulary.{family}.HISTORY) -->", f"<!-- /history:{family} -->"


def readme_block(text: str, family: str) -> str | None:
    """The table the README holds for ``family`` (None if it has no marked block)."""
    start, end = _markers(family)
    if start not in text or end not in text:
        return None
    return text.split(start, 1)[1].split(end, 1)[0].strip("\n")


def with_tables(text: str, schemas: Mapping[str, HistorySchema]) -> str:
    """``text`` with every family's marked block replaced by the table generated from its declaration."""
    for family, schema in schemas.items():
        start, end = _markers(family)
        if start in text and end in text:
            before, rest = text.split(start, 1)
            text = before + start + "\n" + schema.markdown() + "\n" + end + rest.split(end, 1)[1]
    return text
