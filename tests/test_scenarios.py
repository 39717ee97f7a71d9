"""Scenario files: the rule language, the oracle derived from the rules, one-line errors, users' workloads."""
from __future__ import annotations

import copy
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenarios.revalidation.oracle import DOMINANCE, holds, prelude_class, reference_of
from scenarios.revalidation.rules import RuleError, check_types, compile_rule, parse_rule, type_of
from scenarios.revalidation.workload import BUILTIN_DIR, ScenarioError, load_workloads, parse_scenario, parse_workload
from vocabulary.revalidation import MUTATION_CLASSES, Outcome

DATA = Path(__file__).parent / "data"
REFUND = (BUILTIN_DIR / "refund.toml").read_text()


def driftlab(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runners.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def two_severity_variants(workload) -> list[tuple[str, int]]:
    """(class, variant index) of the variants under which premises of two different severities fail at once."""
    ref, by_id = reference_of(workload), {p.id: p.severity for p in workload.premises}
    return [(cls, j) for cls, m in workload.mutations.items() for j, v in enumerate(m.variants)
            if len({by_id[pid] for pid in ref.judge(v).failed}) >= 2]


# ------------------------------------------------------------------ shipped workloads
def test_builtin_workloads_have_one_mutation_per_class_with_the_rule_oracle():
    workloads = load_workloads()
    assert set(workloads) == {"refund", "cloud_remediation", "procurement"}
    for w in workloads.values():
        assert list(w.mutations) == list(MUTATION_CLASSES)
        ref = reference_of(w)
        for cls, m in w.mutations.items():
            assert m.oracle is MUTATION_CLASSES[cls]
            for v in m.variants:  # the loader proved it; the test says it again, independently of the loader
                assert ref.outcome(v) is m.oracle


def test_every_shipped_workload_has_two_severity_variants_where_dominance_decides():
    for w in load_workloads().values():
        found = dict(two_severity_variants(w))
        assert {"replanning", "blocking"} <= set(found), w.name  # REPLAN over REFRESH, BLOCK over REPLAN
        ref = reference_of(w)
        blocking = ref.judge(w.mutations["blocking"].variants[found["blocking"]])
        severities = {p.id: p.severity.name for p in w.premises}
        assert {severities[i] for i in blocking.failed} == {"BLOCK", "REPLAN"}
        assert blocking.outcome == "BLOCK"


# ------------------------------------------------------------------ the rule language
TYPES = {"o.n": "number", "o.m": "number", "o.s": "string", "o.b": "bool", "o.l": "list[string]",
         "my-obj.my-field": "number", "o.in": "number"}
STATE = {"o.n": 5, "o.m": 7, "o.s": "x", "o.b": True, "o.l": ["x", "y"], "my-obj.my-field": 3, "o.in": 1}


@pytest.mark.parametrize("rule, expected", [
    ("o.n <= o.m", True),
    ("o.n == 5", True),
    ("o.n != 5", False),
    ("o.n > 4.5", True),
    ("o.n >= -1", True),
    ("o.s == 'x'", True),
    ('o.s == "x"', True),
    ("o.s in o.l", True),
    ("o.s not in o.l", False),
    ("o.s in ['a', 'b']", False),
    ("o.n in [1, 5, 9]", True),
    ("o.s not in ['a', 'b',]", True),
    ("o.s == 'x' and o.n == 6", False),   # today's regex read this as one string literal
    ("o.s != 'x' and o.n == 6", False),   # ... and with != accepted it silently
    ("o.s == 'y' or o.n == 5", True),
    ("not (o.s == 'y' or o.n == 6)", True),
    ("not o.s == 'y' and o.b", True),     # not binds looser than ==, tighter than and
    ("o.b", True),
    ("not o.b", False),
    ("o.b == true and (o.n < 3 or o.m > 6)", True),
    ("`my-obj`.`my-field` == 3", True),
    ("`my-obj`.`my-field` < o.n", True),
    ("o.`in` == 1", True),
    ("unchanged(o.s)", True),
    ("unchanged(`my-obj`.`my-field`) and o.n == 5", True),
])
def test_rules_parse_type_check_and_compile(rule, expected):
    check, evidence = compile_rule(rule, TYPES)
    assert evidence and set(evidence) <= set(TYPES)
    assert check(STATE.__getitem__, STATE) is expected
    assert holds(rule, STATE, STATE) is expected  # the reference interpreter (its own reading of the text) agrees


def test_unchanged_compares_with_what_the_agent_observed():
    check, evidence = compile_rule("unchanged(customer.name)")
    assert evidence == ("customer.name",)
    assert check({"customer.name": "A"}.__getitem__, {"customer.name": "A"})
    assert not check({"customer.name": "B"}.__getitem__, {"customer.name": "A"})


@pytest.mark.parametrize("rule, problem", [
    ("__import__('os').system('true')", "expected '.'"),
    ("o.n = 5", "unexpected character '='"),
    ("o.n == 5 and", "expected a field"),
    ("o.n == 5 o.m == 7", "unexpected 'o'"),
    ("o.n < o.m < 9", "chained comparisons are not allowed"),
    ("o.s == 'x", "unexpected character"),
    ("my-obj.f == 1", "unexpected character '-'"),
    ("o.and == 1", "must be quoted"),
    ("(o.n == 5", "expected ')'"),
    ("o.n in [1, o.m]", "a literal"),
    ("o", "'.' and a field name"),
    ("", "empty rule"),
    ("unchanged o.n", "'(' after 'unchanged'"),
    ("(" * 400 + "o.b" + ")" * 400, "nested too deeply"),
])
def test_anything_the_grammar_does_not_parse_is_an_error(rule, problem):
    with pytest.raises(RuleError) as err:
        parse_rule(rule)
    assert problem in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("rule, problem", [
    ("o.n == 'five'", "compares values of different types"),
    ("o.n < o.s", "compares values of different types"),
    ("o.b < true", "bool values have no order"),
    ("o.l < o.l", "have no order"),
    ("o.s in o.s", "'in' needs a list on its right"),
    ("o.n in o.l", "different types"),
    ("o.s in ['a', 1]", "mixes types"),
    ("o.n", "is a number, not a condition"),
    ("o.b and o.n", "o.n is a number, not a condition (true/false) for 'and'"),
    ("not o.s", "o.s is a string, not a condition (true/false) for 'not'"),
    ("5 == 5", "compares two literals"),
    ("true", "reads no field"),
    ("o.nope == 1", "not a field of any object"),
])
def test_rules_are_type_checked_before_anything_runs(rule, problem):
    with pytest.raises(RuleError) as err:
        check_types(parse_rule(rule), TYPES)
    assert problem in str(err.value)


def test_type_names():
    assert [type_of(v) for v in (True, 1, 1.5, "a", [1, 2], [], ["a", 1], {"a": 1})] == \
        ["bool", "number", "number", "string", "list[number]", "list[]", "list[mixed]", "table"]


# ------------------------------------------------------------------ the oracle follows from the rules
def test_the_reference_evaluator_takes_the_dominant_failing_severity_by_name():
    assert DOMINANCE == ("BLOCK", "REPLAN", "REFRESH", "KEEP")
    refund = load_workloads()["refund"]
    ref = reference_of(refund)
    assert ref.judge({"order.shipping_note": "x"}).outcome == "KEEP"
    assert ref.judge({"customer.display_name": "Ada King"}).outcome == "REFRESH"
    both = ref.judge({"policy.refund_limit": 50, "order.defect_confirmed": False})
    assert both.outcome == "BLOCK" and set(both.failed) == {"amount_within_limit", "defect_confirmed"}
    assert ref.judge({"order.defect_confirmed": False}, {"customer.email": "a@b"}).outcome == "REPLAN"
    assert prelude_class(Outcome.KEEP) == "irrelevant" and prelude_class("BLOCK") == "presentation"


CONTRADICTIONS = [
    # a "blocking" variant under which every premise still holds
    ('{ "policy.refund_limit" = 50 }', '{ "policy.refund_limit" = 95 }',
     "mutations.blocking.variants[0]: declares BLOCK but the rules imply KEEP (failing premises: none)"),
    # a "predicate_preserving" variant that breaks a rule
    ('{ "policy.refund_limit" = 80 }', '{ "policy.refund_limit" = 70 }',
     "mutations.predicate_preserving.variants[2]: declares KEEP but the rules imply BLOCK (failing premises: "
     "amount_within_limit)"),
    # a "replanning" variant that also blocks: the dominance says BLOCK
    ('{ "order.defect_confirmed" = false },', '{ "order.defect_confirmed" = false, "order.refunded" = true },',
     "mutations.replanning.variants[0]: declares REPLAN but the rules imply BLOCK"),
]


@pytest.mark.parametrize("old, new, message", CONTRADICTIONS)
def test_a_file_whose_declared_oracle_contradicts_its_rules_is_refused(tmp_path, old, new, message):
    assert old in REFUND
    path = tmp_path / "contradiction.toml"
    path.write_text(REFUND.replace(old, new, 1))
    with pytest.raises(ScenarioError) as err:
        parse_workload(path)
    assert str(err.value) == f"{path}: {message}" or (str(err.value).startswith(f"{path}: {message}"))
    assert "\n" not in str(err.value)


def test_the_oracle_must_not_depend_on_schedule_s7s_first_change(tmp_path):
    """A blocking variant that the presentation prelude would rescue: alone BLOCK, after the prelude REFRESH."""
    text = (REFUND
            .replace('[[premises]]\nid = "not_already_refunded"',
                     '[[premises]]\nid = "vip_or_renamed"\nrule = "customer.vip or customer.display_name == \'Ada King\'"\n'
                     'severity = "BLOCK"\n\n[[premises]]\nid = "not_already_refunded"', 1)
            .replace('email = "ada@example.org"', 'email = "ada@example.org"\nvip = true', 1)
            .replace('"customer.display_name", "customer.email",', '"customer.display_name", "customer.email", "customer.vip",', 1)
            .replace('{ "order.refunded" = true },', '{ "order.refunded" = true },\n  { "customer.vip" = false },', 1))
    path = tmp_path / "schedule_dependent.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as err:
        parse_workload(path)
    assert str(err.value).startswith(f"{path}: mutations.blocking.variants[2]: declares BLOCK but after schedule s7's "
                                     "first change (mutations.presentation.variants[0]) the rules imply REFRESH")


# ------------------------------------------------------------------ the bad-input contract (one table)
def _without_premises(text: str, replacement: str) -> str:
    text = re.sub(r"\[\[premises\]\].*?(?=\[intent\])", "", text, flags=re.S)
    return text.replace('source = "ATR paper §1-2"', 'source = "ATR paper §1-2"\n' + replacement, 1)


def _blocking_is(value: str):
    def edit(text: str) -> str:
        text = re.sub(r"\[mutations\.blocking\].*\Z", "", text, flags=re.S)
        return text.replace("[mutations.irrelevant]", f"[mutations]\nblocking = {value}\n\n[mutations.irrelevant]", 1)
    return edit


def _swap(old: str, new: str):
    def edit(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)
    return edit


BAD_SCENARIOS = [
    # --- the list
    ("not UTF-8", lambda t: t.encode().replace(b"Ada Lovelace", b"Ada \xff\xfe"), "file: not UTF-8"),
    ("oracle MAYBE", _swap('oracle = "BLOCK"', 'oracle = "MAYBE"'), "mutations.blocking.oracle: unknown outcome 'MAYBE'"),
    ("validator_version abc", _swap('severity = "BLOCK"          # authority', 'validator_version = "abc"\nseverity = "BLOCK"  #'),
     "premises[0].validator_version: must be a whole number, got string 'abc'"),
    ("premises = [1, 2]", lambda t: _without_premises(t, "premises = [1, 2]"),
     "premises[0]: must be a premise table with id, rule and severity, got number 1"),
    ("mutations.blocking = 5", _blocking_is("5"), "mutations.blocking: must be a table with oracle and variants, got number 5"),
    ("a list inside reads", _swap('"order.id", "order.amount",', '"order.id", ["order.amount"],'),
     "reads[1]: must be a field reference string 'object.field', got list ['order.amount']"),
    ("number compared with a string", _swap('"order.amount <= policy.refund_limit"', '"order.amount == \'eighty\'"'),
     "premises[0] (amount_within_limit): rule \"order.amount == 'eighty'\": order.amount (number) == 'eighty' (string) "
     "compares values of different types"),
    # --- rules
    ("ordering booleans", _swap('"order.refunded == false"', '"order.refunded < true"'), "bool values have no order"),
    ("in against a non-list", _swap("\"policy.currency == 'GBP'\"", "\"policy.currency in 'GBP'\""),
     "premises[2] (policy_currency_matches): rule \"policy.currency in 'GBP'\": 'in' needs a list on its right"),
    ("in against a list of other items", _swap("\"policy.currency == 'GBP'\"", '"policy.currency in [1, 2]"'),
     "the value and the list's items have different types"),
    ("two literals", _swap("\"policy.currency == 'GBP'\"", "\"'GBP' == 'GBP'\""), "compares two literals"),
    ("bare number as a condition", _swap('"order.refunded == false"', '"order.amount"'), "is a number, not a condition"),
    ("unparseable operator", _swap('"order.refunded == false"', '"order.refunded = false"'),
     "premises[1] (not_already_refunded): rule 'order.refunded = false': unexpected character '='"),
    ("dangling and", _swap('"order.refunded == false"', '"order.refunded == false and"'), "expected a field"),
    ("unknown field in a rule", _swap('"order.refunded == false"', '"order.nope == false"'),
     "premises[1].rule: uses 'order.nope', which is not a field of any object"),
    ("unread field in a rule", _swap("\"policy.currency == 'GBP'\"", "\"order.currency == 'GBP'\""),
     "premises[2].rule: uses 'order.currency', which is not in reads"),
    ("rule not a string", _swap('"order.refunded == false"', "5"), "premises[1].rule: must be a string, got number 5"),
    ("severity MAYBE", _swap('severity = "BLOCK"          # authority', 'severity = "MAYBE"  #'),
     "premises[0] (amount_within_limit): unknown outcome 'MAYBE'"),
    ("severity KEEP", _swap('severity = "BLOCK"          # authority', 'severity = "KEEP"  #'), "a failing premise cannot KEEP"),
    ("validator_version 0", _swap('severity = "BLOCK"          # authority', 'validator_version = 0\nseverity = "BLOCK"  #'),
     "premises[0].validator_version: must be 1 or more"),
    ("validator_version true", _swap('severity = "BLOCK"          # authority', 'validator_version = true\nseverity = "BLOCK"  #'),
     "premises[0].validator_version: must be a whole number, got bool True"),
    ("premise does not hold", _swap("refund_limit = 100", "refund_limit = 10"),
     "premises[0] (amount_within_limit): does not hold in the initial objects"),
    ("duplicate premise id", _swap('id = "not_already_refunded"', 'id = "amount_within_limit"'),
     "premises[1].id: 'amount_within_limit' is already the id of another premise"),
    ("unknown premise key", _swap('id = "not_already_refunded"', 'id = "not_already_refunded"\nseverty = "BLOCK"'),
     "premises[1].severty: unknown key"),
    ("no premises", lambda t: _without_premises(t, "premises = []"), "premises: at least one premise is needed"),
    # --- mutations and variants
    ("variant of another type", _swap('{ "policy.refund_limit" = 50 }', '{ "policy.refund_limit" = "50" }'),
     "mutations.blocking.variants[0]: 'policy.refund_limit' is a number; the variant sets a string ('50')"),
    ("variant bool for a number", _swap('{ "policy.refund_limit" = 50 }', '{ "policy.refund_limit" = true }'),
     "'policy.refund_limit' is a number; the variant sets a bool"),
    ("variant of an unknown field", _swap('"order.shipping_note" = "ring the bell"', '"order.nope" = "ring the bell"'),
     "mutations.irrelevant.variants[0]: 'order.nope' is not a field of any object"),
    ("variant that changes nothing", _swap('{ "policy.refund_limit" = 50 }', '{ "policy.refund_limit" = 100.0 }'),
     "already holds 100.0: not a change"),
    ("variant not a table", _swap('variants = [ { "customer.display_name" = "Ada King" }, { "customer.display_name" = "A. Lovelace" } ]',
                                  "variants = [ 5 ]"), "mutations.presentation.variants[0]: must be a table"),
    ("empty variant", _swap('{ "customer.display_name" = "A. Lovelace" }', "{ }"), "must change at least one field"),
    ("no variants", _swap('variants = [ { "customer.display_name" = "Ada King" }, { "customer.display_name" = "A. Lovelace" } ]',
                          "variants = []"), "mutations.presentation.variants: at least one variant is needed"),
    ("class oracle mismatch", _swap('oracle = "KEEP"\nvariants = [ { "policy.refund_limit" = 90 }', 'oracle = "BLOCK"\nvariants = [ { "policy.refund_limit" = 90 }'),
     "mutations.predicate_preserving.oracle: predicate_preserving changes have oracle KEEP, not BLOCK"),
    ("declared oracle contradicts the rules", _swap('{ "policy.refund_limit" = 50 }', '{ "policy.refund_limit" = 95 }'),
     "mutations.blocking.variants[0]: declares BLOCK but the rules imply KEEP"),
    ("KEEP change to a payload field", _swap('{ "policy.refund_limit" = 80 }', '{ "policy.refund_limit" = 80 }, { "order.id" = "O-2" }'),
     "mutations.predicate_preserving.variants[3]: changes 'order.id', which the intent's payload carries, yet the rules imply KEEP"),
    ("irrelevant change to evidence", _swap('"order.shipping_note" = "ring the bell"', '"policy.refund_limit" = 99'),
     "must be a read field that no premise uses"),
    ("missing class", _swap("[mutations.blocking]", "[mutations.blockin]"), "mutations: missing class 'blocking'; unknown class 'blockin'"),
    ("mutations not a table", lambda t: re.sub(r"\[mutations\.irrelevant\].*\Z", "", t, flags=re.S).replace(
        'source = "ATR paper §1-2"', 'source = "ATR paper §1-2"\nmutations = 3', 1), "mutations: must be a table"),
    # --- objects, reads, intent, top level
    ("toml syntax", _swap('"order.id", "order.amount",', '"order.id", "order.amount'), "toml:"),
    ("name not snake case", _swap('name = "broken"', 'name = "Broken"'), "name: 'Broken' must be lower_snake_case"),
    ("name not a string", _swap('name = "broken"', "name = 7"), "name: must be a string, got number 7"),
    ("unknown top-level key", _swap('name = "broken"', 'name = "broken"\ncolour = "red"'), "colour: unknown key"),
    ("wrong family", _swap('family = "revalidation"', 'family = "isolation"'), "family: 'isolation'"),
    ("reads not a list", _swap("reads = [", 'reads = "order.id"\nunused = ['), "unused: unknown key"),
    ("reads a field twice", _swap('"order.id", "order.amount",', '"order.id", "order.id", "order.amount",'), "reads: lists a field twice"),
    ("reads an unknown field", _swap('"order.id", "order.amount",', '"order.idx", "order.amount",'),
     "reads[0]: 'order.idx' is not a field of any object"),
    ("object name with a dot", _swap("[objects.customer]", '[objects."cus.tomer"]'), "objects.cus.tomer: the object name"),
    ("mixed list field", _swap('shipping_note = "leave at the door"', 'shipping_note = "leave at the door"\ntags = [1, "a"]'),
     "objects.order.tags: a list holds values of one type"),
    ("table field", _swap("[objects.customer]", "[objects.order.meta]\nx = 1\n\n[objects.customer]"),
     "objects.order.meta: a field holds a boolean, number, string, date/time or a list"),
    ("empty object", _swap("[objects.customer]\n", "[objects.empty]\n\n[objects.customer]\n"), "objects.empty: must hold at least one field"),
    ("effect of another type", _swap('effect = { "order.refunded" = true }', 'effect = { "order.refunded" = "yes" }'),
     "intent.effect.order.refunded: 'order.refunded' is a bool; the effect writes a string"),
    ("effect off the target", _swap('effect = { "order.refunded" = true }', 'effect = { "policy.currency" = "EUR" }'),
     "intent.effect: 'policy.currency' is not a field of the target 'order'"),
    ("payload not a reference", _swap('amount = "order.amount"', "amount = 5"),
     "intent.payload.amount: must be a field reference string 'object.field', got number 5"),
    ("payload of an unread field", _swap('amount = "order.amount"', 'amount = "order.currency"'),
     "intent.payload.amount: 'order.currency' is not in reads"),
    ("target not an object", _swap('target = "order"', 'target = "ordre"'), "intent.target: 'ordre' is not an object"),
    ("intent missing", lambda t: re.sub(r"\[intent\].*?(?=\[mutations)", "", t, flags=re.S), "intent: missing"),
]


@pytest.mark.parametrize("edit, message", [row[1:] for row in BAD_SCENARIOS], ids=[row[0] for row in BAD_SCENARIOS])
def test_a_malformed_scenario_file_gets_one_line_naming_file_field_and_problem(tmp_path, edit, message):
    path = tmp_path / "broken.toml"
    content = edit(REFUND.replace('name = "refund"', 'name = "broken"'))
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ScenarioError) as err:
        parse_workload(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: ") and message in text, text


def test_cli_rejects_a_malformed_file_with_exit_2_and_writes_nothing(tmp_path):
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "broken.toml").write_text(REFUND.replace('name = "refund"', 'name = "broken"')
                                        .replace('{ "policy.refund_limit" = 50 }', '{ "policy.refund_limit" = "50" }'))
    out = tmp_path / "run"
    result = driftlab("reproduce", "--scenario-dir", str(folder), "--out", str(out), "--repetitions", "1", "--quiet")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "broken.toml: mutations.blocking.variants[0]: 'policy.refund_limit' is a number" in result.stderr
    assert not out.exists()


# ------------------------------------------------------------------ fuzzing the loader
RAW = tomllib.loads(REFUND)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


PATHS = [p for p in _paths(RAW) if p]
SCALARS = st.one_of(st.integers(-3, 200), st.floats(allow_nan=True), st.booleans(), st.text(max_size=12),
                    st.sampled_from(["order.amount", "policy.refund_limit", "BLOCK", "KEEP", "order.amount <= 5",
                                     "order.refunded", "unchanged(order.id)", "`x`.y == 1", "a.b in [1, 'a']"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.sampled_from(["id", "rule", "x", "order.id"]),
                                                                       inner, max_size=3)), max_leaves=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(PATHS), st.one_of(st.none(), VALUES)), min_size=1, max_size=3))
def test_fuzzed_scenarios_load_or_fail_with_one_line(edits):
    raw = copy.deepcopy(RAW)
    for path, value in edits:
        parent = raw
        try:
            for key in path[:-1]:
                parent = parent[key]
            if value is None:
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed or replaced the path
    try:
        parse_scenario(Path("fuzz.toml"), raw)
    except ScenarioError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("fuzz.toml: ")


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(REFUND) - 1), st.integers(1, 40), st.binary(max_size=4))
def test_corrupted_scenario_text_loads_or_fails_with_one_line(tmp_path_factory, start, length, junk):
    path = tmp_path_factory.mktemp("fuzz") / "fuzz.toml"
    data = REFUND.encode()
    path.write_bytes(data[:start] + junk + data[start + length:])
    try:
        parse_workload(path)
    except ScenarioError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(f"{path}: ")


# ------------------------------------------------------------------ users' workloads are first-class
def test_a_users_workload_uses_in_conjunctions_dashed_names_and_two_severities():
    w = parse_workload(DATA / "vendor_payment.toml")
    rules = " ".join(p.rule for p in w.premises)
    assert " in " in rules and " not in " in rules and " and " in rules and "`payment-policy`" in rules
    assert "vendor-account.display_name" in w.reads and "payment-policy" in w.read_objects
    assert {"replanning", "blocking"} <= {cls for cls, _ in two_severity_variants(w)}


def test_user_workloads_run_with_no_code_change_and_atr_makes_no_mistake(tmp_path):
    out = tmp_path / "run"
    result = driftlab("reproduce", "--only", "revalidation_outcomes", "--scenario-dir", str(DATA), "--out", str(out),
                      "--repetitions", "2", "--mechanisms", "ATR,NoCheck", "--jobs", "1", "--quiet")
    assert result.returncode == 0, result.stderr
    table = pd.read_csv(out / "tables" / "revalidation_outcomes.csv")
    records = pd.read_parquet(out / "records" / "revalidation_outcomes")
    assert {"lease_extension", "vendor_payment"} <= set(records["workload"])
    workloads = records["workload"].nunique()  # the 3 shipped ones and every revalidation file in tests/data
    total = table[(table.workload == "all") & (table.mechanism == "ATR") & (table.mutation_class == "all")].iloc[0]
    assert total.executions == workloads * 5 * 7 * 2 and total.oracle_agreement == 1.0
    for name in ("lease_extension", "vendor_payment"):
        mine = table[(table.workload == name) & (table.mechanism == "ATR") & (table.mutation_class == "all")].iloc[0]
        assert mine.executions == 5 * 7 * 2 and mine.false_allows == 0 and mine.false_blocks == 0
        assert mine.invalid_effects == 0 and mine.oracle_agreement == 1.0
        nocheck = table[(table.workload == name) & (table.mechanism == "NoCheck") & (table.mutation_class == "all")].iloc[0]
        assert nocheck.invalid_effects == 3 * 7 * 2 and nocheck.false_allows == 2 * 7 * 2
    report = (out / "report.md").read_text()
    assert (f"This run: {workloads} workloads × 5 mutation classes = {workloads * 5} mutation cases, "
            "under 7 schedules") in report
    assert "15 mutation cases" not in report


@pytest.mark.planted("scenarios:load_scenarios", "tuple(_stamp(p) for p in files)", "tuple(str(p) for p in files)")
def test_a_scenario_file_changed_between_two_loads_is_read_again(tmp_path):
    """One process parses the scenario files once while none changes (scenarios/__init__.py), and again once one is
    rewritten, added or removed.  Planted bug this catches: parsed scenarios cached by file name alone, so a user who
    edits a workload in a long-lived process (a notebook, a test session) keeps getting the old one."""
    src = (Path(__file__).parent / "data" / "lease_extension.toml").read_text(encoding="utf-8")
    path = tmp_path / "lease_extension.toml"
    path.write_text(src, encoding="utf-8")
    first = load_workloads((tmp_path,))["lease_extension"]
    assert load_workloads((tmp_path,))["lease_extension"] is first  # unchanged: parsed once
    old = "description = \"extend a tenant's lease after a credit check (test-only)\""
    assert src.count(old) == 1
    path.write_text(src.replace(old, 'description = "edited by the user"'), encoding="utf-8")
    assert load_workloads((tmp_path,))["lease_extension"].description == "edited by the user"
    path.unlink()
    assert "lease_extension" not in load_workloads((tmp_path,))
