"""The rule language's refusals, each one line naming the column, the token found and what was expected.

Bug class: a parser or type checker that refuses with the wrong problem (another column, another token, a
vague message), or accepts what it must refuse (a list item that is a field, a list without commas, a
keyword as a bare name, a comparison that reads no field); a quoting rule that writes a keyword bare.
"""
from __future__ import annotations

import pytest

from scenarios.revalidation import rules

TYPES = {"o.n": "number", "o.m": "number", "o.s": "string", "o.b": "bool", "o.l": "list[number]", "o.e": "list[]",
         "o.d": "date"}
EXPECTED_FIELD = ("expected a field (object.field), a number, a quoted string, true, false, a list [...], "
                  "unchanged(object.field) or '('")


@pytest.mark.parametrize("text,message", [
    ("o.n = 5", "rule 'o.n = 5': unexpected character '=' at column 5"),
    ("o.n == 5 and", f"rule 'o.n == 5 and': {EXPECTED_FIELD} at column 13, found the end of the rule"),
    ("o.n == 5 o.m == 7", "rule 'o.n == 5 o.m == 7': unexpected 'o' at column 10: expected 'and', 'or' or the end "
                          "of the rule"),
    ("o.n < o.m < 9", "rule 'o.n < o.m < 9': unexpected '<' at column 11: expected 'and', 'or' or the end of the rule "
                      "(chained comparisons are not allowed; join them with 'and')"),
    ("(o.n == 5", "rule '(o.n == 5': expected ')' at column 10, found the end of the rule"),
    ("o.n in [1, o.m]", "rule 'o.n in [1, o.m]': expected a literal (number, quoted string, true or false) or ']' in "
                        "the list at column 12, found 'o'"),
    ("o.n in [1 2]", "rule 'o.n in [1 2]': expected ',' or ']' in the list at column 11, found '2'"),
    ("o", "rule 'o': expected '.' and a field name after the object 'o' (fields are written object.field) at "
          "column 2, found the end of the rule"),
    ("", "empty rule"),
    ("   ", "empty rule"),
    ("unchanged o.n", "rule 'unchanged o.n': expected '(' after 'unchanged' at column 11, found 'o'"),
    ("unchanged(o.n", "rule 'unchanged(o.n': expected ')' closing unchanged(...) at column 14, found the end of the "
                      "rule"),
    ("o.and == 1", "rule 'o.and == 1': expected a field name (the keyword 'and' as a name must be quoted: `and`) at "
                   "column 3, found 'and'"),
    ("o.(x) == 1", "rule 'o.(x) == 1': expected a field name (a name that is not a plain identifier is quoted with "
                   "backticks, e.g. `my-object`) at column 3, found '('"),
    ("o.`x", "rule 'o.`x': unexpected character '`' at column 3"),
    ("o.5 == 1", "rule 'o.5 == 1': expected '.' and a field name after the object 'o' (fields are written "
                 "object.field) at column 2, found '.5'"),
    ("'abc", "rule \"'abc\": unexpected character \"'\" at column 1"),
    ("o.n ]", "rule 'o.n ]': unexpected ']' at column 5: expected 'and', 'or' or the end of the rule"),
    ("o.n in [true, ]]", "rule 'o.n in [true, ]]': unexpected ']' at column 16: expected 'and', 'or' or the end of "
                         "the rule"),
    ("or o.b", f"rule 'or o.b': {EXPECTED_FIELD} at column 1, found 'or'"),
])
def test_parse_errors_name_column_token_and_expectation(text, message):
    with pytest.raises(rules.RuleError) as err:
        rules.parse_rule(text)
    assert str(err.value) == message


@pytest.mark.parametrize("text,message", [
    ("o.n == 'five'", "o.n (number) == 'five' (string) compares values of different types"),
    ("o.n < o.s", "o.n (number) < o.s (string) compares values of different types"),
    ("o.b < true", "o.b < True: bool values have no order (< takes numbers, strings, dates or times)"),
    ("o.l < o.l", "o.l < o.l: list[number] values have no order (< takes numbers, strings, dates or times)"),
    ("o.s in o.s", "'in' needs a list on its right, but o.s is a string"),
    ("o.s not in o.n", "'not in' needs a list on its right, but o.n is a number"),
    ("o.s in ['a', 1]", "the list ['a', 1] mixes types"),
    ("o.n", "o.n is a number, not a condition (true/false) for the rule"),
    ("o.b and o.n", "o.n is a number, not a condition (true/false) for 'and'"),
    ("o.n or o.b", "o.n is a number, not a condition (true/false) for 'or'"),
    ("not o.s", "o.s is a string, not a condition (true/false) for 'not'"),
    ("not [1]", "[1] is a list[number], not a condition (true/false) for 'not'"),
    ("5 == 5", "5 == 5 compares two literals; a comparison must read a field"),
    ("[1] == [1]", "[1] == [1] compares two literals; a comparison must read a field"),
    ("true", "the rule reads no field"),
    ("o.nope == 1", "'o.nope' is not a field of any object"),
    ("unchanged(o.nope)", "'o.nope' is not a field of any object"),
    ("o.s in [1]", "o.s (string) in [1] (list[number]): the value and the list's items have different types"),
    ("o.l == o.s", "o.l (list[number]) == o.s (string) compares values of different types"),
    ("(o.n == 1) == 2", "a condition (bool) == 2 (number) compares values of different types"),
])
def test_type_errors_name_the_operands_and_their_types(text, message):
    with pytest.raises(rules.RuleError) as err:
        rules.check_types(rules.parse_rule(text), TYPES)
    assert str(err.value) == message
    with pytest.raises(rules.RuleError, match="^rule "):
        rules.compile_rule(text, TYPES)


@pytest.mark.parametrize("text", ["o.n in o.e", "o.l == [1]", "o.e == o.l", "o.d < o.d", "(o.n == 1) == true",
                                  "o.n in [1,]", "o.s in []", "o.n != -2.5e-1", "unchanged(o.l)"])
def test_well_typed_rules(text):
    rules.check_types(rules.parse_rule(text), TYPES)


def test_compile_rule_without_types_still_needs_a_field():
    with pytest.raises(rules.RuleError, match="^rule 'true': the rule reads no field$"):
        rules.compile_rule("true")
    check, evidence = rules.compile_rule("o.n == 1 or unchanged(o.s) and o.n == 2")
    assert evidence == ("o.n", "o.s")


@pytest.mark.parametrize("value,kind", [
    (True, "bool"), (3, "number"), (2.5, "number"), ("x", "string"), ([1, 2], "list[number]"), ([], "list[]"),
    ([1, "a"], "list[mixed]"), ({}, "table"), (("a",), "list[string]"), (None, "NoneType"),
])
def test_type_of(value, kind):
    assert rules.type_of(value) == kind


def test_type_of_dates_and_times():
    import datetime as dt

    assert rules.type_of(dt.date(2026, 1, 1)) == "date"
    assert rules.type_of(dt.time(1, 2)) == "time"
    assert rules.type_of(dt.datetime(2026, 1, 1)) == "local datetime"
    assert rules.type_of(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)) == "datetime"
    assert rules.element_of("list[number]") == "number" and rules.element_of("list[]") == "" \
        and rules.element_of("number") is None
    assert rules.compatible("list[]", "list[number]") and rules.compatible("list[string]", "list[]")
    assert not rules.compatible("list[string]", "list[number]") and not rules.compatible("number", "list[]")


@pytest.mark.parametrize("name,written", [("order", "order"), ("and", "`and`"), ("unchanged", "`unchanged`"),
                                          ("vendor-account", "`vendor-account`"), ("_x1", "_x1"), ("1st", "`1st`")])
def test_quote_name(name, written):
    assert rules.quote_name(name) == written


@pytest.mark.parametrize("text,value", [("o.n == 12", 12), ("o.n == -3", -3), ("o.n == 1.", 1.0), ("o.n == .5", 0.5),
                                        ("o.n == 2e3", 2000.0), ("o.s == 'a\\'b'", "a'b"), ('o.s == "a\\nb"', "a\nb"),
                                        ("o.s == 'a\\tb\\\\c'", "a\tb\\c"), ("o.b == false", False)])
def test_literals(text, value):
    tree = rules.parse_rule(text)
    assert tree.right == rules.Literal(value) and type(tree.right.value) is type(value)


def test_refs_of_in_order_of_first_appearance():
    tree = rules.parse_rule("not (o.s in ['a'] and unchanged(o.n)) or o.m > o.n and o.b")
    assert rules.refs_of(tree) == ("o.s", "o.n", "o.m", "o.b")


@pytest.mark.parametrize("text", [pytest.param("(o.n == 5]", marks=pytest.mark.planted(
    "scenarios.revalidation.rules:_Parser.expect", "if not self.at(kind, text):", "if not self.at(kind):")),
    "unchanged[o.n]", "unchanged(o.n]", "o.n in (1, 2)"])
def test_a_bracket_of_the_wrong_kind_is_refused(text):
    """Bug class: a parser that accepts any punctuation where one bracket is expected."""
    with pytest.raises(rules.RuleError):
        rules.parse_rule(text)


STATES = [{"o.n": n, "o.m": m, "o.s": s, "o.b": b, "o.l": [1, 3], "o.e": [], "o.d": 0}
          for n, m, s, b in ((1, 3, "a", True), (3, 1, "b", False), (2, 2, "c", True), (0, -1, "a", False))]


@pytest.mark.parametrize("text,meaning", [
    pytest.param("5 > o.n", lambda s: 5 > s["o.n"],                        # a literal on the left
                 marks=pytest.mark.planted("scenarios.revalidation.rules:compile_tree",  # its operands swapped
                                           "op(value, current(ref))", "op(current(ref), value)")),
    ("2 <= o.m and 'a' == o.s", lambda s: 2 <= s["o.m"] and s["o.s"] == "a"),
    ("o.n < o.m", lambda s: s["o.n"] < s["o.m"]),                          # two fields
    ("o.n in o.l", lambda s: s["o.n"] in s["o.l"]),                        # membership in a list-valued field
    ("o.n not in o.l", lambda s: s["o.n"] not in s["o.l"]),
    ("o.n in [1, 2.0]", lambda s: s["o.n"] in (1, 2)),
    ("o.b in [false]", lambda s: s["o.b"] is False),
    ("(o.n == 1) == true", lambda s: s["o.n"] == 1),                       # a condition used as a value
    ("(o.n < o.m) != o.b", lambda s: (s["o.n"] < s["o.m"]) != s["o.b"]),
    ("o.l == [1, 3]", lambda s: True),
    ("[] == o.e", lambda s: True),
    ("o.n == 1E0 or o.n == 3e0", lambda s: s["o.n"] in (1, 3)),
])
def test_every_compiled_shape_means_what_it_says(text, meaning):
    """Bug class: a compiled comparison shape (literal on the left, two fields, a list-valued field, a condition
    used as a value) that drops or swaps an operand; checked against the oracle's own reading too (planted on the
    first row: the operands of a literal on the left swapped)."""
    from scenarios.revalidation.oracle import holds

    check, _ = rules.compile_rule(text, TYPES)
    for s in STATES:
        assert check(s.__getitem__, s) == meaning(s) == holds(text, s, s), (text, s)


@pytest.mark.parametrize("text,message", [
    pytest.param("unchanged[o.n)", "rule 'unchanged[o.n)': expected '(' after 'unchanged' at column 10, found '['",
                 marks=pytest.mark.planted("scenarios.revalidation.rules:_Parser.expect",
                                           "if not self.at(kind, text):", "if not self.at(kind):")),
    ("o,n == 1", "rule 'o,n == 1': expected '.' and a field name after the object 'o' (fields are written "
                 "object.field) at column 2, found ','"),
    ("o.n in [,]", "rule 'o.n in [,]': expected a literal (number, quoted string, true or false) or ']' in the list "
                   "at column 9, found ','"),
    ("(" * 400 + "o.b" + ")" * 400, "rule '" + "(" * 400 + "o.b" + ")" * 400 + "': nested too deeply"),
    ("`o`.`n` not in [1] and o.n in ]", "rule '`o`.`n` not in [1] and o.n in ]': expected a field (object.field), a "
                                        "number, a quoted string, true, false, a list [...], unchanged(object.field) "
                                        "or '(' at column 31, found ']'"),
])
def test_more_refusals(text, message):
    """Bug class: a parser that takes any punctuation for the one it expects (a ',' for the '.' of a field, a '['
    for the '(' of unchanged)."""
    with pytest.raises(rules.RuleError) as err:
        rules.parse_rule(text)
    assert str(err.value) == message


def test_quoted_names_before_not_in_and_mixed_list_fields():
    tree = rules.parse_rule("`o`.`n` not in [1]")
    assert tree == rules.Compare("not in", rules.Field("o.n"), rules.ListLiteral((1,)))
    with pytest.raises(rules.RuleError, match=r"^o.x mixes types, so 'in' cannot be checked$"):
        rules.check_types(rules.parse_rule("o.n in o.x"), {**TYPES, "o.x": "list[mixed]"})
    assert rules.type_of(object()) == "object"


@pytest.mark.planted("scenarios.revalidation.rules:compile_tree",
                     "op(get_left(current, observed), get_right(current, observed))",
                     "op(get_left(current, {}), get_right(current, {}))")
def test_a_condition_with_unchanged_used_as_a_value():
    """Bug class: the observed values not passed into a condition used as a comparison operand (planted)."""
    from scenarios.revalidation.oracle import holds

    observed, moved = {"o.n": 1}, {"o.n": 2}
    for text in ("(unchanged(o.n)) == false", "false == (unchanged(o.n))"):
        check, _ = rules.compile_rule(text, {"o.n": "number"})
        assert check(moved.__getitem__, observed) is True and check(observed.__getitem__, observed) is False
        assert holds(text, moved, observed) is True and holds(text, observed, observed) is False
