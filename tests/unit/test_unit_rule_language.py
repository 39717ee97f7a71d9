"""The rule parser against a second formulation of the rule language, on generated rules (hypothesis).

Bug class (issue 16 §7): operator precedence in the rule language (``or`` binding tighter than ``and``, ``not``
binding looser than a comparison or than ``and``, a dropped operand of a chain); and, with it, a parser bug that
the mechanisms and an oracle walking the same tree would agree on.  Here a rule is generated as a tree, its
truth is computed from the tree directly (the grammar's meaning, no parser involved), and the tree is written
as text with only the parentheses the documented precedence needs (``or`` < ``and`` < ``not`` < one
comparison): the parser's compiled check and the oracle's own reading of the text (Python's expression
grammar, :func:`scenarios.revalidation.oracle.read_rule`) must both give that truth.  And with a planted
parser bug the loader's proof fires.
"""
from __future__ import annotations

import operator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scenarios import ScenarioError
from scenarios.revalidation import rules
from scenarios.revalidation.oracle import ReadingError, holds, read_rule
from scenarios.revalidation.workload import parse_workload

NUMBERS = ("a.n1", "a.n2")
BOOLS = ("c.f1", "c.f2", "`x-y`.`in`")
TYPES = {"a.n1": "number", "a.n2": "number", "b.s": "string", "c.f1": "bool", "c.f2": "bool", "x-y.in": "bool"}
OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
WORDS = ("red", "it's", "blue")


def ref_of(text: str) -> str:
    return text.replace("`", "")


# a tree: ("field", text) | ("cmp", op, left, right) | ("in", negated, text, items) | ("unchanged", text)
#         | ("not", t) | ("and", (t, ...)) | ("or", (t, ...))
number_operand = st.one_of(st.sampled_from(NUMBERS).map(lambda r: ("ref", r)),
                           st.integers(-3, 3).map(lambda n: ("lit", n)),
                           st.sampled_from([-1.5, 0.5, 2.0]).map(lambda x: ("lit", x)))
atoms = st.one_of(
    st.sampled_from(BOOLS).map(lambda r: ("field", r)),
    st.tuples(st.just("cmp"), st.sampled_from(sorted(OPS)), st.sampled_from(NUMBERS).map(lambda r: ("ref", r)),
              number_operand),
    st.tuples(st.just("cmp"), st.sampled_from(["==", "!="]), st.just(("ref", "b.s")),
              st.sampled_from(WORDS).map(lambda w: ("lit", w))),
    st.tuples(st.just("in"), st.booleans(), st.just("b.s"), st.lists(st.sampled_from(WORDS), max_size=3).map(tuple)),
    st.sampled_from(NUMBERS + ("b.s",)).map(lambda r: ("unchanged", r)),
)
trees = st.recursive(atoms, lambda inner: st.one_of(
    inner.map(lambda t: ("not", t)),
    st.lists(inner, min_size=2, max_size=3).map(lambda ts: ("and", tuple(ts))),
    st.lists(inner, min_size=2, max_size=3).map(lambda ts: ("or", tuple(ts))),
), max_leaves=8)

PREC = {"or": 1, "and": 2, "not": 3}


def literal(v) -> str:
    if isinstance(v, str):
        return "'" + v.replace("'", "\\'") + "'"
    return repr(v)


def text_of(t, need: int = 0, extra=lambda: False) -> str:
    """``t`` as rule text, parenthesised only where the precedence needs it (or where ``extra()`` says so)."""
    kind = t[0]
    if kind == "field":
        s, p = t[1], 4
    elif kind == "cmp":
        side = lambda o: o[1] if o[0] == "ref" else literal(o[1])  # noqa: E731
        s, p = f"{side(t[2])} {t[1]} {side(t[3])}", 4
    elif kind == "in":
        s, p = f"{t[2]} {'not in' if t[1] else 'in'} [{', '.join(literal(w) for w in t[3])}]", 4
    elif kind == "unchanged":
        s, p = f"unchanged({t[1]})", 4
    elif kind == "not":
        s, p = "not " + text_of(t[1], 3, extra), 3
    else:
        p = PREC[kind]
        s = f" {kind} ".join(text_of(o, p + 1, extra) for o in t[1])  # a nested chain of the same kind is grouped
    return f"({s})" if p < need or (p < 4 and extra()) else s


def truth(t, state, observed) -> bool:
    """What the tree means, straight from the grammar's definitions."""
    kind = t[0]
    val = lambda o: state[ref_of(o[1])] if o[0] == "ref" else o[1]  # noqa: E731
    if kind == "field":
        return state[ref_of(t[1])] is True
    if kind == "cmp":
        return OPS[t[1]](val(t[2]), val(t[3]))
    if kind == "in":
        return (state[t[2]] in t[3]) != t[1]
    if kind == "unchanged":
        return state[t[1]] == observed[t[1]]
    if kind == "not":
        return not truth(t[1], state, observed)
    parts = [truth(o, state, observed) for o in t[1]]
    return all(parts) if kind == "and" else any(parts)


states = st.fixed_dictionaries({"a.n1": st.integers(-3, 3), "a.n2": st.sampled_from([-1.5, 0, 0.5, 2]),
                                "b.s": st.sampled_from(WORDS), "c.f1": st.booleans(), "c.f2": st.booleans(),
                                "x-y.in": st.booleans()})


@pytest.mark.planted("scenarios.revalidation.rules:_Parser.or_",  # 'or' read as 'and': caught by any of the 300
                     "else Or(tuple(items))", "else And(tuple(items))")  # rules whose 'or' has a false operand
@settings(max_examples=300, deadline=None)
@given(trees, states, states, st.randoms(use_true_random=False))
def test_parser_and_oracle_agree_with_the_grammar_on_generated_rules(tree, state, observed, rnd):
    """Bug class: operator precedence in the rule language, and a parser bug the oracle would share: the text
    is written with the fewest parentheses the documented precedence allows (or a few more, at random)."""
    text = text_of(tree, 0, lambda: rnd.random() < 0.15)
    expect = truth(tree, state, observed)
    check, _ = rules.compile_rule(text, TYPES)
    assert check(state.__getitem__, observed) is expect or check(state.__getitem__, observed) == expect, text
    assert holds(text, state, observed) == expect, text  # the oracle reads the text on its own


@pytest.mark.parametrize("text,state,expect", [
    ("c.f1 or c.f2 and c.f3", {"c.f1": True, "c.f2": False, "c.f3": False}, True),      # or is loosest
    ("c.f1 and c.f2 or c.f3", {"c.f1": False, "c.f2": False, "c.f3": True}, True),
    ("not c.f1 and c.f2", {"c.f1": True, "c.f2": True}, False),                         # not binds tighter than and
    pytest.param("not c.f1 and c.f2", {"c.f1": False, "c.f2": False}, False,  # ...not (f1 and f2) is true
                 marks=pytest.mark.planted("scenarios.revalidation.rules:_Parser.not_", "return Not(self.not_())",
                                           "return Not(self.and_())")),
    ("not c.f1 or c.f2", {"c.f1": False, "c.f2": False}, True),
    ("not a.n == 1", {"a.n": 2}, True),                                                 # ...looser than ==
    ("not not c.f1", {"c.f1": True}, True),
    ("c.f1 and (c.f2 or c.f3)", {"c.f1": True, "c.f2": False, "c.f3": True}, True),
    ("(c.f1 and c.f2) or c.f3", {"c.f1": False, "c.f2": True, "c.f3": False}, False),
    ("a.n >= -1 and a.n < 2.5 or c.f1", {"a.n": 3, "c.f1": True}, True),
    ("b.s not in ['x', 'y'] and b.s in [\"z\"]", {"b.s": "z"}, True),
])
def test_precedence_cases(text, state, expect):
    """Bug class: operator precedence in the rule language (each case's meaning changes if ``or`` binds tighter
    than ``and``, if ``not`` binds looser than ``and`` or tighter than a comparison, or if parentheses are lost)."""
    types = {k: rules.type_of(v) for k, v in state.items()}
    check, _ = rules.compile_rule(text, types)
    assert check(state.__getitem__, state) is expect
    assert holds(text, state, state) is expect


@pytest.mark.parametrize("text", [pytest.param("a.x < a.y < a.z", marks=pytest.mark.planted(
    "scenarios.revalidation.rules:_Parser.rule", 'if not self.at("end"):', "if False:")), "a.x ==", "(a.x == 1", "a.x == 1)", "a.x = 1", "and a.x",
                                  "a.x in", "a.x or or a.y", "unchanged(a)", "a.`x", "1 == 1", ""])
def test_text_the_grammar_refuses(text):
    """Bug class: a parser that accepts what the grammar does not (a chained comparison read as one, a dangling
    operator dropped): the rule is an error naming the problem, never a literal."""
    with pytest.raises(rules.RuleError):
        rules.compile_rule(text, {"a.x": "number", "a.y": "number", "a.z": "number"})


# ------------------------------------------------------------------ the loader's proof fires on a parser bug
REFUND = Path(__file__).resolve().parents[2] / "scenarios" / "revalidation" / "workloads" / "refund.toml"
# Equivalent to "order.refunded == false" read with the documented precedence (or < and); read with `or` binding
# tighter it also needs the limit above 60, so the blocking variant "limit 50" makes the two readings disagree.
MIXED = "order.refunded == false or order.amount > 1000 and policy.refund_limit > 60"


def planted_or_binds_tighter(monkeypatch):
    """The planted bug: the rule parser with `or` binding tighter than `and`."""
    def or_(self):
        items = [self.and_()]
        while self.keyword("and"):
            self.take()
            items.append(self.and_())
        return items[0] if len(items) == 1 else rules.And(tuple(items))

    def and_(self):
        items = [self.not_()]
        while self.keyword("or"):
            self.take()
            items.append(self.not_())
        return items[0] if len(items) == 1 else rules.Or(tuple(items))

    monkeypatch.setattr(rules._Parser, "or_", or_)
    monkeypatch.setattr(rules._Parser, "and_", and_)


def test_the_loaders_proof_fires_on_a_parser_bug(tmp_path, monkeypatch):
    """Bug class: a parser bug that mechanisms and oracle agree on.  The oracle reads the rule text on its own,
    so with the planted precedence bug the loader refuses the file (the compiled check and the oracle's reading
    disagree on the blocking variant), where before both walked the same wrong tree and the file loaded."""
    path = tmp_path / "refund_mixed.toml"
    path.write_text(REFUND.read_text(encoding="utf-8").replace('rule = "order.refunded == false"',
                                                               f'rule = "{MIXED}"'), encoding="utf-8")
    assert parse_workload(path).name == "refund"  # the correct parser: the file loads
    planted_or_binds_tighter(monkeypatch)
    with pytest.raises(ScenarioError, match=r"mutations\.blocking\.variants\[0\]: premise 'not_already_refunded': "
                                            r"the compiled rule .* disagree on this state: a rule-parser bug"):
        parse_workload(path)


def test_the_oracle_reading_is_independent_of_the_parser(monkeypatch):
    """Bug class: an oracle that reads rules through the parser it is meant to check (with the planted bug, the
    oracle still reads the documented precedence)."""
    planted_or_binds_tighter(monkeypatch)
    state = {"c.f1": True, "c.f2": False, "c.f3": False}
    assert holds("c.f1 or c.f2 and c.f3", state, state) is True
    check, _ = rules.compile_rule("c.f1 or c.f2 and c.f3", {k: "bool" for k in state})
    assert check(state.__getitem__, state) is False  # the planted bug is live in the parser
    assert read_rule("c.f1 or c.f2 and c.f3").tree == ("or", (("field", "c.f1"), ("and", (("field", "c.f2"),
                                                                                              ("field", "c.f3")))))


@pytest.mark.parametrize("text,tree", [
    ("`vendor-account`.country not in ['KP', 'IR']",
     ("cmp", "not in", ("field", "vendor-account.country"), ("list", ("KP", "IR")))),
    ("a.b <= -1.5e3", ("cmp", "<=", ("field", "a.b"), ("lit", -1500.0))),
    ("unchanged(c.`in`)", ("unchanged", "c.in")),
    pytest.param("a.s == 'it\\'s' and a.t != \"x\\ty\"", ("and", (("cmp", "==", ("field", "a.s"), ("lit", "it's")),
                                                                  ("cmp", "!=", ("field", "a.t"), ("lit", "x\ty")))),
                 marks=pytest.mark.planted("scenarios.revalidation.oracle:_decode",  # \t read as a plain t
                                           '{"n": "\\n", "t": "\\t"}.get(body[i + 1], body[i + 1])', "body[i + 1]")),
    ("not a.`class` == true", ("not", ("cmp", "==", ("field", "a.class"), ("lit", True)))),
    ("(a.x == 1) == false", ("cmp", "==", ("cmp", "==", ("field", "a.x"), ("lit", 1)), ("lit", False))),
])
def test_oracle_reading_of_names_literals_and_quoting(text, tree):
    """Bug class: the oracle's own reading mis-spelling a name (backticks, keywords as names), a string escape, a
    negative or exponent number, or a boolean literal (planted on the escapes' row: '\\t' read as a plain 't')."""
    assert read_rule(text).tree == tree


@pytest.mark.parametrize("text", ["a.x < a.y < a.z", "a.x + 1 == 2", "a == 1", "f(a.x)", "a.x == b"])
def test_oracle_reading_refuses_what_is_not_a_rule(text):
    with pytest.raises(ReadingError):
        read_rule(text)
