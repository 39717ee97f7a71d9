"""Premise rules: the small, safe language a scenario file uses for validators.

Grammar (the README's "Scenario files" section documents it with examples)::

    rule       := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | comparison
    comparison := operand [ ("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not" "in") operand ]
    operand    := "(" rule ")" | "unchanged" "(" ref ")" | ref | literal | list
    ref        := name "." name          (the field ``name`` of the object ``name``)
    name       := identifier | `any text but a backtick`
    literal    := number | 'string' | "string" | true | false
    list       := "[" [literal ("," literal)* [","]] "]"

A name that is not a plain identifier (``[A-Za-z_][A-Za-z0-9_]*``), for
instance one with a dash, or one that is a keyword (``and or not in true false
unchanged``), is written between backticks: ```payment-policy`.max_amount``.
``unchanged(object.field)`` holds while the field still has the value the
agent observed when it decided (the shape of a refreshable presentation
premise).  A bare reference is a condition only if the field is a boolean.

Nothing is evaluated with ``eval``.  The text is tokenized and parsed by
recursive descent into a small tree (:func:`parse_rule`); anything the grammar
does not accept is a :class:`RuleError`, never a literal.  :func:`check_types`
types the tree against the fields' initial values (a number compared with a
string, ordering booleans, ``in`` against a non-list... are rejected before
anything runs), and :func:`compile_tree` turns it into closures once, at load
time, so the validators the mechanisms run are plain Python calls (ATR paper,
§2: "a deterministic validator").  The brute-force reference evaluator
(:mod:`scenarios.revalidation.oracle`) interprets the same tree on its own.
"""
from __future__ import annotations

import datetime as _dt
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from vocabulary.revalidation import Check, Ref

COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
MEMBERSHIP = ("in", "not in")
KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "unchanged"})
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class RuleError(ValueError):
    """A rule that cannot be parsed or typed; the message is one line naming the problem."""


# ------------------------------------------------------------------ the tree
@dataclass(frozen=True)
class Field:
    ref: Ref  # "object.field"


@dataclass(frozen=True)
class Literal:
    value: Any  # bool, int, float or str


@dataclass(frozen=True)
class ListLiteral:
    items: tuple[Any, ...]  # literal values


@dataclass(frozen=True)
class Unchanged:
    ref: Ref


@dataclass(frozen=True)
class Compare:
    op: str  # one of COMPARISONS or MEMBERSHIP
    left: "Node"
    right: "Node"


@dataclass(frozen=True)
class Not:
    operand: "Node"


@dataclass(frozen=True)
class And:
    operands: tuple["Node", ...]


@dataclass(frozen=True)
class Or:
    operands: tuple["Node", ...]


Node = Field | Literal | ListLiteral | Unchanged | Compare | Not | And | Or


def quote_name(name: str) -> str:
    """How ``name`` is written in rule text: bare if it is a plain identifier, else between backticks."""
    return name if IDENTIFIER.fullmatch(name) and name not in KEYWORDS else f"`{name}`"


def refs_of(node: Node) -> tuple[Ref, ...]:
    """Every field the tree reads, in order of first appearance."""
    out: dict[Ref, None] = {}

    def walk(n: Node) -> None:
        if isinstance(n, (Field, Unchanged)):
            out.setdefault(n.ref)
        elif isinstance(n, Compare):
            walk(n.left)
            walk(n.right)
        elif isinstance(n, Not):
            walk(n.operand)
        elif isinstance(n, (And, Or)):
            for o in n.operands:
                walk(o)

    walk(node)
    return tuple(out)


# ------------------------------------------------------------------ tokens
_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?(?![A-Za-z0-9_.`]))
  | (?P<string>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
  | (?P<quoted>`[^`\n]+`)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|!=|<=|>=|<|>)
  | (?P<punct>[()\[\],.])
""", re.VERBOSE)


@dataclass(frozen=True)
class _Token:
    kind: str  # number string quoted name op punct end
    text: str
    column: int  # 1-based

    def show(self) -> str:
        return "the end of the rule" if self.kind == "end" else repr(self.text)


def _unescape(body: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def tokenize(text: str) -> list[_Token]:
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise RuleError(f"unexpected character {text[pos]!r} at column {pos + 1}")
        if m.lastgroup != "space":
            tokens.append(_Token(m.lastgroup, m.group(), pos + 1))
        pos = m.end()
    tokens.append(_Token("end", "", len(text) + 1))
    return tokens


# ------------------------------------------------------------------ parser
class _Parser:
    def __init__(self, text: str):
        self.tokens = tokenize(text)
        self.i = 0

    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def at(self, kind: str, text: str | None = None) -> bool:
        t = self.tok
        return t.kind == kind and (text is None or t.text == text)

    def keyword(self, word: str) -> bool:
        return self.at("name", word)

    def take(self) -> _Token:
        t = self.tok
        self.i += 1
        return t

    def expect(self, kind: str, text: str, what: str) -> _Token:
        if not self.at(kind, text):
            self.fail(what)
        return self.take()

    def fail(self, expected: str):
        t = self.tok
        raise RuleError(f"expected {expected} at column {t.column}, found {t.show()}")

    def rule(self) -> Node:
        node = self.or_()
        if not self.at("end"):
            t = self.tok
            hint = " (chained comparisons are not allowed; join them with 'and')" if t.kind == "op" else ""
            raise RuleError(f"unexpected {t.show()} at column {t.column}: expected 'and', 'or' or the end of "
                            f"the rule{hint}")
        return node

    def or_(self) -> Node:
        items = [self.and_()]
        while self.keyword("or"):
            self.take()
            items.append(self.and_())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def and_(self) -> Node:
        items = [self.not_()]
        while self.keyword("and"):
            self.take()
            items.append(self.not_())
        return items[0] if len(items) == 1 else And(tuple(items))

    def not_(self) -> Node:
        if self.keyword("not"):
            self.take()
            return Not(self.not_())
        return self.comparison()

    def comparison(self) -> Node:
        left = self.operand()
        if self.at("op"):
            op = self.take().text
        elif self.keyword("in"):
            self.take()
            op = "in"
        elif self.keyword("not") and self.tokens[self.i + 1].kind == "name" and self.tokens[self.i + 1].text == "in":
            self.i += 2
            op = "not in"
        else:
            return left
        return Compare(op, left, self.operand())

    def operand(self) -> Node:
        t = self.tok
        if self.at("punct", "("):
            self.take()
            node = self.or_()
            self.expect("punct", ")", "')'")
            return node
        if self.at("punct", "["):
            return self.list_()
        if t.kind in ("number", "string"):
            return Literal(self.literal())
        if t.kind == "name" and t.text in ("true", "false"):
            return Literal(self.literal())
        if t.kind == "name" and t.text == "unchanged":
            self.take()
            self.expect("punct", "(", "'(' after 'unchanged'")
            ref = self.ref()
            self.expect("punct", ")", "')' closing unchanged(...)")
            return Unchanged(ref)
        if t.kind == "quoted" or (t.kind == "name" and t.text not in KEYWORDS):
            return Field(self.ref())
        self.fail("a field (object.field), a number, a quoted string, true, false, a list [...], "
                  "unchanged(object.field) or '('")

    def name(self, what: str) -> str:
        t = self.tok
        if t.kind == "quoted":
            self.take()
            return t.text[1:-1]
        if t.kind == "name" and t.text not in KEYWORDS:
            self.take()
            return t.text
        if t.kind == "name":
            self.fail(f"{what} (the keyword {t.text!r} as a name must be quoted: `{t.text}`)")
        self.fail(f"{what} (a name that is not a plain identifier is quoted with backticks, e.g. `my-object`)")

    def ref(self) -> Ref:
        obj = self.name("an object name")
        if not self.at("punct", "."):
            self.fail(f"'.' and a field name after the object {obj!r} (fields are written object.field)")
        self.take()
        return f"{obj}.{self.name('a field name')}"

    def literal(self) -> Any:
        t = self.take()
        if t.kind == "number":
            text = t.text
            return float(text) if any(c in text for c in ".eE") else int(text)
        if t.kind == "string":
            return _unescape(t.text[1:-1])
        return t.text == "true"

    def list_(self) -> ListLiteral:
        self.expect("punct", "[", "'['")
        items = []
        while not self.at("punct", "]"):
            t = self.tok
            if not (t.kind in ("number", "string") or (t.kind == "name" and t.text in ("true", "false"))):
                self.fail("a literal (number, quoted string, true or false) or ']' in the list")
            items.append(self.literal())
            if self.at("punct", ","):
                self.take()
            elif not self.at("punct", "]"):
                self.fail("',' or ']' in the list")
        self.take()
        return ListLiteral(tuple(items))


def parse_rule(text: str) -> Node:
    """The rule's tree; a :class:`RuleError` naming the column for anything the grammar does not accept."""
    if not isinstance(text, str) or not text.strip():
        raise RuleError("empty rule")
    try:
        return _Parser(text).rule()
    except RuleError as exc:
        raise RuleError(f"rule {text!r}: {exc}") from None
    except RecursionError:
        raise RuleError(f"rule {text!r}: nested too deeply") from None


# ------------------------------------------------------------------ types
def type_of(value: Any) -> str:
    """The rule language's type of a TOML value: bool, number, string, datetime, local datetime, date,
    time, list[<element>] (list[] when empty), or table."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, _dt.datetime):
        return "datetime" if value.tzinfo is not None else "local datetime"
    if isinstance(value, _dt.date):
        return "date"
    if isinstance(value, _dt.time):
        return "time"
    if isinstance(value, (list, tuple)):
        kinds = list(dict.fromkeys(type_of(v) for v in value))
        if len(kinds) > 1:
            return "list[mixed]"
        return f"list[{kinds[0] if kinds else ''}]"
    if isinstance(value, dict):
        return "table"
    return type(value).__name__


ORDERED = frozenset({"number", "string", "datetime", "local datetime", "date", "time"})


def element_of(kind: str) -> str | None:
    """``list[x]`` -> ``x`` (``""`` for an empty list); None if ``kind`` is not a list."""
    return kind[5:-1] if kind.startswith("list[") else None


def compatible(a: str, b: str) -> bool:
    """Whether values of types a and b may be compared for equality (an empty list fits any list)."""
    if a == b:
        return True
    ea, eb = element_of(a), element_of(b)
    return ea is not None and eb is not None and (ea == "" or eb == "")


def _describe(node: Node) -> str:
    if isinstance(node, Field):
        return node.ref
    if isinstance(node, Literal):
        return repr(node.value)
    if isinstance(node, ListLiteral):
        return repr(list(node.items))
    return "a condition"


def check_types(node: Node, types: Mapping[Ref, str]) -> None:
    """Raise :class:`RuleError` unless the tree is a well-typed condition over fields of ``types``."""

    def kind(n: Node) -> str:
        if isinstance(n, Field):
            if n.ref not in types:
                raise RuleError(f"{n.ref!r} is not a field of any object")
            return types[n.ref]
        if isinstance(n, Literal):
            return type_of(n.value)
        if isinstance(n, ListLiteral):
            t = type_of(list(n.items))
            if t == "list[mixed]":
                raise RuleError(f"the list {list(n.items)!r} mixes types")
            return t
        if isinstance(n, Unchanged):
            if n.ref not in types:
                raise RuleError(f"{n.ref!r} is not a field of any object")
            return "bool"
        if isinstance(n, Not):
            condition(n.operand, "'not'")
            return "bool"
        if isinstance(n, (And, Or)):
            for o in n.operands:
                condition(o, "'and'" if isinstance(n, And) else "'or'")
            return "bool"
        if isinstance(n, Compare):
            left, right = kind(n.left), kind(n.right)
            if not refs_of(n.left) and not refs_of(n.right):
                raise RuleError(f"{_describe(n.left)} {n.op} {_describe(n.right)} compares two literals; "
                                "a comparison must read a field")
            if n.op in MEMBERSHIP:
                element = element_of(right)
                if element is None:
                    raise RuleError(f"{n.op!r} needs a list on its right, but {_describe(n.right)} is a {right}")
                if element == "mixed":
                    raise RuleError(f"{_describe(n.right)} mixes types, so {n.op!r} cannot be checked")
                if element and not compatible(left, element):
                    raise RuleError(f"{_describe(n.left)} ({left}) {n.op} {_describe(n.right)} ({right}): "
                                    "the value and the list's items have different types")
            elif n.op in ("==", "!="):
                if not compatible(left, right):
                    raise RuleError(f"{_describe(n.left)} ({left}) {n.op} {_describe(n.right)} ({right}) "
                                    "compares values of different types")
            else:
                if left != right:
                    raise RuleError(f"{_describe(n.left)} ({left}) {n.op} {_describe(n.right)} ({right}) "
                                    "compares values of different types")
                if left not in ORDERED:
                    raise RuleError(f"{_describe(n.left)} {n.op} {_describe(n.right)}: {left} values have no order "
                                    f"({n.op} takes numbers, strings, dates or times)")
            return "bool"
        raise RuleError(f"unknown node {n!r}")  # pragma: no cover - the parser builds only the nodes above

    def condition(n: Node, where: str) -> None:
        k = kind(n)
        if k != "bool":
            raise RuleError(f"{_describe(n)} is a {k}, not a condition (true/false) for {where}")

    condition(node, "the rule")
    if not refs_of(node):
        raise RuleError("the rule reads no field")


# ------------------------------------------------------------------ compilation to closures
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
}


def _hashable_set(items: tuple[Any, ...]):
    try:
        return frozenset(items)
    except TypeError:  # pragma: no cover - literals are always hashable
        return items


def compile_tree(node: Node) -> Check:
    """Closures for ``check(current_value_of, observed) -> holds``, specialised for the common shapes."""
    if isinstance(node, Unchanged):
        ref = node.ref
        return lambda current, observed: current(ref) == observed[ref]
    if isinstance(node, Field):
        ref = node.ref
        return lambda current, observed: current(ref) is True
    if isinstance(node, Not):
        inner = compile_tree(node.operand)
        return lambda current, observed: not inner(current, observed)
    if isinstance(node, (And, Or)):
        parts = [compile_tree(o) for o in node.operands]
        check = parts[0]
        for nxt in parts[1:]:
            if isinstance(node, And):
                check = (lambda a, b: lambda current, observed: a(current, observed) and b(current, observed))(check, nxt)
            else:
                check = (lambda a, b: lambda current, observed: a(current, observed) or b(current, observed))(check, nxt)
        return check
    if isinstance(node, Literal):  # pragma: no cover - rejected by check_types (reads no field)
        value = node.value
        return lambda current, observed: value
    assert isinstance(node, Compare), node
    op, left, right = _OPS[node.op], node.left, node.right
    if isinstance(right, ListLiteral) and node.op in MEMBERSHIP and isinstance(left, Field):
        members, ref = _hashable_set(right.items), left.ref
        if node.op == "in":
            return lambda current, observed: current(ref) in members
        return lambda current, observed: current(ref) not in members
    if isinstance(left, Field) and isinstance(right, Literal):
        ref, value = left.ref, right.value
        return lambda current, observed: op(current(ref), value)
    if isinstance(left, Field) and isinstance(right, Field):
        lref, rref = left.ref, right.ref
        return lambda current, observed: op(current(lref), current(rref))
    if isinstance(left, Literal) and isinstance(right, Field):
        value, ref = left.value, right.ref
        return lambda current, observed: op(value, current(ref))
    get_left, get_right = _value(left), _value(right)
    return lambda current, observed: op(get_left(current, observed), get_right(current, observed))


def _value(node: Node) -> Callable[[Callable[[Ref], Any], Mapping[Ref, Any]], Any]:
    if isinstance(node, Field):
        ref = node.ref
        return lambda current, observed: current(ref)
    if isinstance(node, Literal):
        value = node.value
        return lambda current, observed: value
    if isinstance(node, ListLiteral):
        items = list(node.items)  # a list, as a list-valued field holds: o.l == [1, 3] compares list with list
        return lambda current, observed: items
    return compile_tree(node)  # a condition used as a boolean value: (a.x == 1) == true


def compile_rule(text: str, types: Mapping[Ref, str] | None = None) -> tuple[Check, tuple[Ref, ...]]:
    """Parse (and, given the fields' types, type-check) ``text``: (check, evidence fields in order of appearance)."""
    tree = parse_rule(text)
    if types is not None:
        try:
            check_types(tree, types)
        except RuleError as exc:
            raise RuleError(f"rule {text!r}: {exc}") from None
    elif not refs_of(tree):
        raise RuleError(f"rule {text!r}: the rule reads no field")
    return compile_tree(tree), refs_of(tree)
