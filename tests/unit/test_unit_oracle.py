"""The reference evaluator (the oracle) on its own: comparisons, dominance, change groups, the s7 prelude.

Bug classes: an oracle whose comparison operators, dominance order or change application differ from the rule
language's meaning (the mechanisms would then be judged against a wrong oracle); a string escape or a nested
``unchanged`` read wrongly by the oracle's own reading of the text.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from scenarios.revalidation.oracle import DOMINANCE, Reference, dominant_name, holds, prelude_class, reference_of
from vocabulary.revalidation import Change, Outcome

OPS = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
       ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("a,b", [(1, 2), (2, 1), (2, 2), ("a", "b"), ("b", "a")])
def test_each_comparison(op, a, b):
    state = {"o.a": a, "o.b": b}
    assert holds(f"o.a {op} o.b", state, state) is OPS[op](a, b)


@pytest.mark.parametrize("text,expect", [("o.a in [1, 2]", True), ("o.a not in [1, 2]", False), ("o.a in []", False),
                                         ("o.a not in []", True), ("o.a in o.l", False), ("o.l == [3, 4]", True)])
def test_membership_and_lists(text, expect):
    state = {"o.a": 1, "o.l": [3, 4]}
    assert holds(text, state, state) is expect


def test_unchanged_nested_and_escapes():
    """``unchanged`` compares with the observed value, also inside a condition used as a value; escapes decode."""
    observed = {"o.a": 1, "o.s": "ab\n"}
    moved = {"o.a": 2, "o.s": "ab\n"}
    assert holds("unchanged(o.a)", observed, observed) and not holds("unchanged(o.a)", moved, observed)
    assert holds("(unchanged(o.a)) == false", moved, observed)
    assert holds("o.s == 'ab\\n'", moved, observed) and holds('o.s == "a\\b\\n"', moved, observed)
    assert holds("o.s != 'ab\\t'", moved, observed)


def test_dominance_and_prelude():
    """The dominance order by name, and schedule s7's prelude class."""
    assert DOMINANCE == ("BLOCK", "REPLAN", "REFRESH", "KEEP")
    assert dominant_name([]) == "KEEP" and dominant_name(["REFRESH", "BLOCK", "REPLAN"]) == "BLOCK"
    assert dominant_name(iter(["REFRESH", "REPLAN"])) == "REPLAN" and dominant_name(["REFRESH"]) == "REFRESH"
    assert prelude_class(Outcome.KEEP) == "irrelevant" and prelude_class("KEEP") == "irrelevant"
    assert prelude_class(Outcome.REFRESH) == "presentation" and prelude_class("BLOCK") == "presentation"


@pytest.mark.planted("scenarios.revalidation.oracle:Reference.state",
                     'for group in changes:',
                     'for group in reversed(changes):')
def test_reference_applies_change_groups_in_order():
    """Bug class: change groups applied out of order, or a group of Change objects ignored."""
    ref = Reference((("limit", "o.amount <= o.limit", "BLOCK"), ("name", "unchanged(o.name)", "REFRESH"),
                     ("flag", "o.flag", "REPLAN")), {"o.amount": 80, "o.limit": 100, "o.name": "A", "o.flag": True})
    assert ref.judge().outcome == "KEEP" and ref.judge().failed == ()
    assert ref.judge({"o.name": "B"}).failed == ("name",)
    got = ref.judge({"o.limit": 50}, [Change("o.limit", 90), Change("o.name", "B")])
    assert (got.outcome, got.failed) == ("REFRESH", ("name",))  # the later group wins
    both = ref.judge({"o.flag": False, "o.limit": 10})
    assert (both.outcome, both.failed) == ("BLOCK", ("limit", "flag"))  # declaration order
    assert ref.outcome({"o.flag": False}) is Outcome.REPLAN
    assert ref.state({"o.limit": 1})["o.limit"] == 1 and ref.initial["o.limit"] == 100


def test_reference_of_a_loaded_workload():
    from scenarios.revalidation.workload import parse_workload

    refund = parse_workload(Path(__file__).resolve().parents[2] / "scenarios/revalidation/workloads/refund.toml")
    ref = reference_of(refund)
    assert [p[0] for p in ref.premises] == [p.id for p in refund.premises]
    assert ref.judge({"policy.refund_limit": 50}).outcome == "BLOCK"
    assert ref.judge({"customer.display_name": "X"}).failed == ("customer_name_current",)


@pytest.mark.parametrize("text,message", [
    ("o.a < o.b < o.c", "rule 'o.a < o.b < o.c': a chained comparison"),
    ("o.a ==", "rule 'o.a ==': not an expression (invalid syntax)"),
])
def test_reading_errors_name_the_rule(text, message):
    from scenarios.revalidation.oracle import ReadingError, read_rule

    with pytest.raises(ReadingError) as err:
        read_rule(text)
    assert str(err.value) == message
    assert read_rule("o.a == 1").text == "o.a == 1"
