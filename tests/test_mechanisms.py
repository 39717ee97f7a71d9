"""The four mechanisms: the paper's refund example, the binding at commit, pinned counts per class, and ATR and
FullScan against the brute-force reference evaluator (never against each other)."""
from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanisms import MechanismError, resolve
from mechanisms.revalidation.atr import ATR
from mechanisms.revalidation.full_scan import FullScan
from mechanisms.revalidation.nocheck import NoCheck
from mechanisms.revalidation.version_abort import VersionAbort
from analysis.revalidation import outcomes as revalidation_outcomes
from analysis.revalidation.counting import classify
from runners.revalidation.agent import decide, release
from runners.experiment import Options
from runners.revalidation.agent import run_schedule
from runners.revalidation.outcomes import RevalidationOutcomes
from runners.revalidation.stores import MemoryStore
from scenarios.revalidation.oracle import DOMINANCE, Reference, prelude_class, reference_of
from scenarios.revalidation.rules import compile_rule
from scenarios.revalidation.schedules import load_schedules
from scenarios.revalidation.workload import load_workloads
from vocabulary.revalidation import (MUTATION_CLASSES, AgentTransaction, Outcome, Premise, Validation, dominant,
                                     reverse_index)

pytestmark = pytest.mark.xdist_group("test_mechanisms")  # one worker: its module-scoped fixture runs once

REFUND = load_workloads()["refund"]
#: the shipped workloads and the users' test workloads (tests/data), which must need no code change
WORKLOADS = load_workloads((Path(__file__).parent / "data",))
SCHEDULES = load_schedules()


def after_change(mechanism, changes: dict, workload=REFUND):
    store = MemoryStore(workload.initial_state())
    txn = decide(workload, store)
    store.write(changes)
    return release(txn, store, mechanism), store


@pytest.mark.parametrize("changes, expected", [
    ({"customer.display_name": "Ada King"}, Outcome.REFRESH),      # name change -> REFRESH
    ({"policy.refund_limit": 90}, Outcome.KEEP),                    # limit 100 -> 90 -> KEEP
    ({"policy.refund_limit": 50}, Outcome.BLOCK),                   # limit -> 50 -> BLOCK
    ({"order.refunded": True}, Outcome.BLOCK),                      # another worker refunded -> BLOCK
    ({"order.defect_confirmed": False}, Outcome.REPLAN),            # defect flag corrected -> REPLAN
    ({"order.shipping_note": "ring"}, Outcome.KEEP),                # read, used by no premise -> KEEP
])
def test_the_papers_refund_example(changes, expected):
    for mechanism in (ATR(), FullScan()):
        result, store = after_change(mechanism, changes)
        assert result.outcome is expected, type(mechanism).__name__
        assert result.released == (expected <= Outcome.REFRESH)
    nocheck, _ = after_change(NoCheck(), changes)
    assert nocheck.outcome is Outcome.KEEP and nocheck.released
    version_abort, _ = after_change(VersionAbort(), changes)
    assert version_abort.outcome is Outcome.REPLAN and not version_abort.released


def test_refresh_releases_the_new_payload_and_nocheck_the_stale_one():
    result, store = after_change(ATR(), {"customer.display_name": "Ada King"})
    assert result.payload["customer"] == "Ada King"
    stale, _ = after_change(NoCheck(), {"customer.display_name": "Ada King"})
    assert stale.payload["customer"] == "Ada Lovelace"


def test_atr_evaluates_only_the_affected_premises():
    result, _ = after_change(ATR(), {"policy.refund_limit": 90})
    assert result.premises_evaluated == 1
    full, _ = after_change(FullScan(), {"policy.refund_limit": 90})
    assert full.premises_evaluated == len(REFUND.premises)


class ATRWithoutTokens(ATR):
    """ATR that forgets to bind what it checked: the check-to-commit gap stays open."""

    def validate(self, txn, store):
        v = super().validate(txn, store)
        return Validation(v.outcome, v.premises_evaluated, (), v.failed)


@pytest.mark.parametrize("mechanism, released", [(ATR(), False), (FullScan(), False), (VersionAbort(), False),
                                                  (ATRWithoutTokens(), True), (NoCheck(), True)])
def test_a_change_between_check_and_commit_is_caught_only_by_bound_tokens(mechanism, released):
    store = MemoryStore(REFUND.initial_state())
    txn = decide(REFUND, store)
    result = release(txn, store, mechanism, between_check_and_commit=lambda: store.write({"policy.refund_limit": 50}))
    assert result.released is released
    if not released:
        assert result.commit_attempts == 1 and result.validations == 2


def test_a_mechanism_plugs_in_by_dotted_path():
    assert resolve("mechanisms.revalidation.atr:ATR") is ATR
    assert resolve("ATR") is ATR
    with pytest.raises(MechanismError, match="unknown mechanism 'Nope'"):
        resolve("Nope")
    with pytest.raises(MechanismError, match="cannot load"):
        resolve("no_such_module:Thing")


def test_dominance_order():
    assert dominant([Outcome.REFRESH, Outcome.BLOCK, Outcome.REPLAN]) is Outcome.BLOCK
    assert dominant([]) is Outcome.KEEP
    assert Outcome.BLOCK > Outcome.REPLAN > Outcome.REFRESH > Outcome.KEEP


# ----------------------------------------------------------------- against the brute-force reference
def cases():
    """Every (workload, class, schedule, change groups) the controlled experiment can land, s7's preludes included."""
    for w in WORKLOADS.values():
        for cls, m in w.mutations.items():
            first = w.mutations[prelude_class(m.oracle)]
            for s in SCHEDULES:
                for variant in m.variants:
                    if s.prelude:
                        for prelude in first.variants:
                            yield w, cls, s, [prelude, variant]
                    else:
                        yield w, cls, s, [variant]


@pytest.mark.parametrize("mechanism", [ATR, FullScan])
def test_atr_and_fullscan_agree_with_the_reference_evaluator_on_every_case(mechanism):
    n = 0
    for w, cls, s, changes in cases():
        expected = reference_of(w).judge(*changes)
        r, txn, store = run_schedule(w, changes, s, mechanism())
        where = f"{w.name}/{cls}/{s.id}/{changes}"
        assert r.outcome.name == expected.outcome, where
        assert set(r.failed) == set(expected.failed), where
        assert r.released == (expected.outcome in ("KEEP", "REFRESH")), where
        assert not (r.released and r.payload_stale), where
        n += 1
    assert n > 5 * 5 * 7 * 2


def test_two_severities_fail_at_once_and_the_dominant_one_decides():
    seen = 0
    for w in WORKLOADS.values():
        severity = {p.id: p.severity.name for p in w.premises}
        for cls, m in w.mutations.items():
            for variant in m.variants:
                expected = reference_of(w).judge(variant)
                if len({severity[i] for i in expected.failed}) < 2:
                    continue
                seen += 1
                for mechanism in (ATR(), FullScan()):
                    r, _ = after_change(mechanism, {c.ref: c.value for c in variant}, w)
                    assert r.outcome.name == expected.outcome == m.oracle.name, (w.name, cls, variant)
    assert seen >= 2 * (len(WORKLOADS) - 1)  # lease_extension has none; every other workload has two or more


def test_fullscan_releases_the_refreshed_payload():
    for w in WORKLOADS.values():
        for variant in w.mutations["presentation"].variants:
            changes = {c.ref: c.value for c in variant}
            state = {**w.initial_state(), **changes}
            fresh = {key: state[ref] for key, ref in w.intent.payload.items()}
            for mechanism in (FullScan(), ATR()):
                r, store = after_change(mechanism, changes, w)
                assert r.outcome is Outcome.REFRESH and r.released, (w.name, type(mechanism).__name__)
                assert r.payload == fresh and not r.payload_stale, (w.name, type(mechanism).__name__)
            stale, _ = after_change(NoCheck(), changes, w)
            assert stale.released and stale.payload_stale and stale.payload != fresh


# ----------------------------------------------------------------- NoCheck and VersionAbort, pinned per class
@pytest.fixture(scope="module")
def controlled() -> pd.DataFrame:
    """The controlled experiment with the shipped workloads, every mechanism, 2 repetitions per cell (in-process)."""
    experiment, options = RevalidationOutcomes(), Options(extra={"repetitions": 2})
    frames = [pd.DataFrame(experiment.run_cell(cell, options)).assign(**cell.p)
              for cell in experiment.cells("quick", 5, options)]
    return pd.concat(frames, ignore_index=True)


#: per mechanism and class: (false allows, false blocks, invalid effects, unnecessary replans) as a share of executions
PINNED = {
    "NoCheck": {"irrelevant": (0, 0, 0, 0), "presentation": (0, 0, 1, 0), "predicate_preserving": (0, 0, 0, 0),
                "replanning": (1, 0, 1, 0), "blocking": (1, 0, 1, 0)},
    "VersionAbort": {"irrelevant": (0, 1, 0, 1), "presentation": (0, 1, 0, 0), "predicate_preserving": (0, 1, 0, 1),
                     "replanning": (0, 0, 0, 0), "blocking": (0, 0, 0, 0)},
    "ATR": dict.fromkeys(MUTATION_CLASSES, (0, 0, 0, 0)),
    "FullScan": dict.fromkeys(MUTATION_CLASSES, (0, 0, 0, 0)),
}


def test_counts_are_pinned_per_mechanism_and_class(controlled):
    tab = revalidation_outcomes.table(controlled)
    per_class = 3 * 7 * 2  # workloads x schedules x repetitions
    for workload in ("all", "refund", "procurement", "cloud_remediation"):
        n = per_class if workload == "all" else 7 * 2
        for mech, classes in PINNED.items():
            for cls, shares in classes.items():
                got = tab[(tab.workload == workload) & (tab.mechanism == mech) & (tab.mutation_class == cls)].iloc[0]
                assert got.executions == n
                assert (got.false_allows, got.false_blocks, got.invalid_effects, got.unnecessary_replans) == \
                    tuple(s * n for s in shares), (workload, mech, cls)
                agree = {"NoCheck": cls in ("irrelevant", "predicate_preserving"), "VersionAbort": cls == "replanning"}
                assert got.oracle_agreement == agree.get(mech, True), (workload, mech, cls)
    total = tab[(tab.workload == "all") & (tab.mutation_class == "all")].set_index("mechanism")
    n = 5 * per_class
    assert total.loc["NoCheck", "invalid_effects"] == n * 9 // 15  # every REFRESH/REPLAN/BLOCK execution
    assert total.loc["VersionAbort", "unnecessary_replans"] == n * 6 // 15  # every KEEP execution


def test_the_report_takes_its_counts_from_the_run(controlled):
    one = controlled[controlled.workload == "refund"]
    section = revalidation_outcomes.report(revalidation_outcomes.table(one), one)
    assert "This run: 1 workload × 5 mutation classes = 5 mutation cases, under 7 schedules" in section.notes
    section = revalidation_outcomes.report(revalidation_outcomes.table(controlled), controlled)
    assert "3 workloads × 5 mutation classes = 15 mutation cases" in section.notes


# ----------------------------------------------------------------- the counting rules, one truth table
OUTCOMES = ("KEEP", "REFRESH", "REPLAN", "BLOCK")


def test_counting_rules_truth_table():
    rows = [{"oracle": o, "outcome": m, "released": rel, "payload_stale": stale and rel, "premises_evaluated": 1,
             "changes": 1} for o, m, rel, stale in itertools.product(OUTCOMES, OUTCOMES, (True, False), (True, False))]
    records = pd.DataFrame(rows)
    c = classify(records)
    for i, r in records.iterrows():
        forbidden = r.oracle in ("REPLAN", "BLOCK")
        assert c.loc[i, "false_allow"] == (r.released and forbidden), r.to_dict()
        assert c.loc[i, "invalid_effect"] == (r.released and (forbidden or r.payload_stale)), r.to_dict()
        assert c.loc[i, "false_block"] == (r.outcome in ("REPLAN", "BLOCK") and r.oracle in ("KEEP", "REFRESH")), r.to_dict()
        assert c.loc[i, "unnecessary_replan"] == (r.outcome == "REPLAN" and r.oracle == "KEEP"), r.to_dict()
        assert c.loc[i, "agree"] == (r.outcome == r.oracle)
    # every rule counts each oracle it names: a definition narrowed to one oracle would change these sums
    assert c["false_allow"].sum() == 2 * 4 * 2  # REPLAN and BLOCK oracles x 4 outcomes x stale or not, released
    assert c["false_block"].sum() == 2 * 2 * 4  # KEEP and REFRESH oracles x REPLAN and BLOCK outcomes x released/stale


# ----------------------------------------------------------------- random premises, property-based
FIELDS = [f"o{i}.f{j}" for i in range(3) for j in range(4)]
SEVERITIES = ("REFRESH", "REPLAN", "BLOCK")


@st.composite
def conditions(draw, depth: int = 0) -> str:
    """A rule over the integer fields: comparisons, membership, unchanged(), and/or/not."""
    a, b = draw(st.sampled_from(FIELDS)), draw(st.sampled_from(FIELDS))
    k = draw(st.integers(-1, 4))
    leaves = [f"{a} <= {k}", f"{a} == {b}", f"{a} != {k}", f"{a} >= {b}", f"{a} in [0, {k}]", f"{a} not in [{k}, 7]",
              f"unchanged({a})", f"{a} < {b} or {a} == {b}"]
    if depth < 2:
        left, right = draw(conditions(depth + 1)), draw(conditions(depth + 1))
        leaves += [f"({left}) and ({right})", f"({left}) or ({right})", f"not ({left})"]
    return draw(st.sampled_from(leaves))


def build(rules: list[tuple[str, str]]) -> tuple[Premise, ...]:
    premises = []
    for i, (text, severity) in enumerate(rules):
        check, evidence = compile_rule(text, dict.fromkeys(FIELDS, "number"))
        premises.append(Premise(f"p{i}", evidence, check, Outcome[severity], 1, text))
    return tuple(premises)


def _run(mechanism, premises, changes):
    store = MemoryStore(dict.fromkeys(FIELDS, 0))
    txn = AgentTransaction(dict.fromkeys(FIELDS, 0), dict.fromkeys(FIELDS, 0), {f"o{i}": 0 for i in range(3)},
                           premises, None, 0, reverse_index(premises))
    store.write(changes)
    return mechanism.validate(txn, store)


def reference(premises) -> Reference:
    return Reference(tuple((p.id, p.rule, p.severity.name) for p in premises), dict.fromkeys(FIELDS, 0))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(conditions(), st.sampled_from(SEVERITIES)), min_size=1, max_size=8),
       st.dictionaries(st.sampled_from(FIELDS), st.integers(-2, 5), max_size=5))
def test_atr_and_fullscan_match_the_reference_on_random_rules(rules, changes):
    initial = dict.fromkeys(FIELDS, 0)
    premises = tuple(p for p in build(rules) if p.holds(initial.__getitem__, initial))  # a decision's premises hold
    expected = reference(premises).judge(changes)
    for mechanism in (ATR(), FullScan()):
        got = _run(mechanism, premises, changes)
        assert got.outcome.name == expected.outcome, type(mechanism).__name__
        assert set(got.failed) == set(expected.failed), type(mechanism).__name__
    assert _run(ATR(), premises, changes).premises_evaluated <= len(premises)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(SEVERITIES), min_size=2, max_size=2, unique=True),
       st.lists(st.sampled_from(FIELDS), min_size=2, max_size=2, unique=True),
       st.integers(1, 5), st.lists(st.tuples(conditions(), st.sampled_from(SEVERITIES)), max_size=5),
       st.dictionaries(st.sampled_from(FIELDS), st.integers(-2, 5), max_size=3))
def test_two_failing_severities_the_dominant_one_wins(severities, fields, value, extra, noise):
    """Two premises of different severities fail at once: the mechanisms report the one the dominance order picks."""
    (s1, s2), (a, b) = severities, fields
    initial = dict.fromkeys(FIELDS, 0)
    rules = [(f"{a} == 0", s1), (f"{b} <= 0", s2), *extra]
    premises = tuple(p for p in build(rules) if p.holds(initial.__getitem__, initial))
    changes = {**noise, a: value, b: value}
    expected = reference(premises).judge(changes)
    assert {"p0", "p1"} <= set(expected.failed)
    assert DOMINANCE.index(expected.outcome) <= min(DOMINANCE.index(s1), DOMINANCE.index(s2))
    for mechanism in (ATR(), FullScan()):
        assert _run(mechanism, premises, changes).outcome.name == expected.outcome, type(mechanism).__name__
