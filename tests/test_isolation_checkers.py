"""The four anomaly checkers: each flags its own witness history and passes the other three (paper §2).

Every test names the planted bug it catches: a wrong checker fails it.
"""
from __future__ import annotations

import pytest

from analysis.checkers import checkers
from analysis.isolation.checkers import CHECKERS, no_admissible_extension
from mechanisms import resolve
from runners.isolation.workflow_runtime import judge, run_scenario
from scenarios import load_scenarios
from vocabulary import History, Operation, Verdict, history_from_jsonl, history_to_jsonl
from vocabulary.isolation import ANOMALIES, COMPATIBILITY_SKEW, CONTEXT_ESCAPE, MERGE_SKEW, READ_SKEW, Contract

SCENARIOS = load_scenarios((), family="isolation")["isolation"]
WITNESS = {s.anomaly: s for s in SCENARIOS.values() if s.anomaly}


def history_of(name: str, profile: str = "SRC") -> History:
    return run_scenario(SCENARIOS[name], resolve(profile, "isolation")())[1]


@pytest.mark.parametrize("anomaly", ANOMALIES)
def test_each_checker_flags_its_witness_and_only_its_own(anomaly):
    """Independence: under SRC the witness of one anomaly trips exactly its own checker.

    Catches: a read-skew checker that compares versions across workflows (it
    would flag the context-escape and merge-skew witnesses); a compatibility
    checker blind to inherited bindings or to the dependents direction; a
    merge checker that ignores admitted merges or flags every merge.
    """
    results = judge(run_scenario(WITNESS[anomaly], resolve("SRC", "isolation")())[1])
    assert results[anomaly].verdict is Verdict.INVALID
    for other in ANOMALIES:
        if other != anomaly:
            assert results[other].verdict is Verdict.VALID, (other, results[other].prose())


@pytest.mark.parametrize("anomaly", ANOMALIES)
def test_ssi_history_of_each_witness_is_valid(anomaly):
    """Under SSI the same programs give histories no checker flags (a checker that always says invalid fails)."""
    results = judge(run_scenario(WITNESS[anomaly], resolve("SSI", "isolation")())[1])
    assert all(r.verdict is Verdict.VALID for r in results.values())


@pytest.mark.planted("analysis.isolation.checkers:ContextEscape.scan",
                     "tuple(sorted({s0, f.spawned_at, *[o.index for o in _deploys_between(ops, x, s0, op.index)], "
                     "op.index}))", "()")
def test_witness_prose_names_the_steps():
    """The context-escape witness says, step by step, what happened (planted bug: witnesses without steps)."""
    h = history_of("witness_context_escape")
    r = CHECKERS[CONTEXT_ESCAPE].check(h)
    w = r.witnesses[0]
    assert w.steps == (2, 3, 4, 5)
    assert w.explanation.startswith("T1 resolved model:embed@1 at step 2, then deployment at step 3 made @2 live, "
                                    "then T1's child T1.c (spawned at step 4) resolved model:embed@2 at step 5")
    assert "context escape" in w.explanation
    assert "#5 T1.c resolve" in r.prose(h)


@pytest.mark.planted("analysis.isolation.checkers:ReadSkew.scan", 'if op.name != "resolve" or op.status != "ok" or',
                     'if op.name != "resolve" or')
def test_read_skew_counts_only_successful_resolutions():
    """A refused resolution binds nothing (planted bug: counting status 'fail' operations as reads)."""
    ops = (Operation(1, "T1", "resolve", "ok", 1, 1, {"workflow": "T1", "identity": "prompt:p", "version": 1}),
           Operation(2, "T1", "resolve", "fail", 2, 2, {"workflow": "T1", "identity": "prompt:p", "version": 2}))
    assert CHECKERS[READ_SKEW].check(History("isolation", ops, {"contracts": []})).verdict is Verdict.VALID


@pytest.mark.planted("analysis.isolation.checkers:_Base.check", "if indeterminate:", "if False:")
def test_indeterminate_resolution_makes_unknown_not_valid():
    """Unknown is never counted as valid (planted bug: skipping indeterminate operations and answering valid)."""
    ops = (Operation(1, "T1", "resolve", "ok", 1, 1, {"workflow": "T1", "identity": "prompt:p", "version": 1}),
           Operation(2, "T1", "resolve", "indeterminate", 2, None, {"workflow": "T1", "identity": "prompt:p"}))
    h = History("isolation", ops, {"contracts": []})
    assert all(c.check(h).verdict is Verdict.UNKNOWN for c in CHECKERS.values())


@pytest.mark.planted("analysis.isolation.checkers:_contracts", "return None", "return []")  # no contracts read as none declared
def test_missing_contracts_make_contract_checks_unknown():
    """A history without declared contracts cannot be judged for compatibility (planted bug: treat as none declared)."""
    h = history_of("witness_read_skew", "SSI")
    bare = History("isolation", h.operations, {})
    assert CHECKERS[COMPATIBILITY_SKEW].check(bare).verdict is Verdict.UNKNOWN
    assert CHECKERS[MERGE_SKEW].check(bare).verdict is Verdict.UNKNOWN
    assert CHECKERS[READ_SKEW].check(bare).verdict is Verdict.VALID


@pytest.mark.planted("vocabulary:history_to_jsonl", '"meta": history.meta}', '"meta": {}}')
def test_a_users_exported_history_round_trips_through_jsonl():
    """``driftlab check`` reads the JSON Lines format: same verdicts after a round trip (planted bug: lost meta)."""
    h = history_of("fixed_schedule")
    back = history_from_jsonl(history_to_jsonl(h))
    assert {k: r.verdict for k, r in judge(back).items()} == {a: Verdict.INVALID for a in ANOMALIES}
    assert list(checkers("isolation")) == list(ANOMALIES)


def test_admissible_common_extension_definition():
    """The definition: single-valued, dependency-closed, every contract satisfied.

    Catches: a merge check that accepts two versions of one identity, that
    forgets closure (a required version missing from the registry), or that
    refuses a union which only needs a required binding added.
    """
    c = [Contract.parse("index:docs@1 requires model:embed@1")]
    versions = {"index:docs": {1}, "model:embed": {1, 2}}
    assert no_admissible_extension([("a", {"index:docs": (1, 1)})], c, versions) is None  # closure adds model@1
    assert no_admissible_extension([("a", {"index:docs": (1, 1)}), ("b", {"model:embed": (2, 2)})], c, versions)
    assert no_admissible_extension([("a", {"prompt:p": (1, 1)}), ("b", {"prompt:p": (2, 2)})], [], {})
    assert no_admissible_extension([("a", {"index:docs": (1, 1)})], c, {"index:docs": {1}, "model:embed": {2}})
