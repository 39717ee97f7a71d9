"""Isolation checkers on hand-written histories (one interleaving per test) and the contract probe.

Bug classes (issue 16 §7): an indeterminate operation folded into a verdict (judged as ok, or skipped) instead
of making it unknown; an anomaly checker that forgets what a branch inherited; a contract probe that treats
"unknown" as "incompatible".
"""
from __future__ import annotations

import pytest
from histories import history

from analysis.isolation.checkers import CHECKERS, no_admissible_extension
from mechanisms import resolve
from vocabulary import Verdict
from vocabulary.isolation import (COMPATIBILITY_SKEW, CONTEXT_ESCAPE, MERGE_SKEW, READ_SKEW, Contract, Contracts,
                                  Manifest, Registry)

OK, FAIL, INDET = "ok", "fail", "indeterminate"
CONTRACT = "index:docs@1 requires model:embed@1"
META = {"contracts": [CONTRACT], "versions": {"index:docs": [1], "model:embed": [1, 2]}}


def res(w: str, identity: str, version: int, status: str = OK):
    return (w, "resolve", status, {"workflow": w, "identity": identity, "version": version})


def spawn(parent: str, child: str, relation: str = "child", status: str = OK):
    return (parent, "spawn", status, {"workflow": parent, "child": child, "relation": relation})


def merge(w: str, *branches: str, status: str = OK):
    return (w, "merge", status, {"workflow": w, "branches": list(branches)})


def verdicts(rows, meta=META) -> dict[str, Verdict]:
    h = history("isolation", [("T1", "start", OK, {"workflow": "T1"})] + list(rows), meta)
    return {name: c.check(h).verdict for name, c in CHECKERS.items()}


# ------------------------------------------------------------------ indeterminate operations
@pytest.mark.planted("analysis.isolation.checkers:_Base.check",
                     'indeterminate = any(op.indeterminate and op.name in ("resolve", "merge", "spawn") for op in history.operations)',
                     'indeterminate = False')
@pytest.mark.parametrize("anomaly,rows", [
    (READ_SKEW, [res("T1", "model:embed", 1), res("T1", "model:embed", 2, INDET)]),
    (COMPATIBILITY_SKEW, [res("T1", "index:docs", 1), res("T1", "model:embed", 2, INDET)]),
    (CONTEXT_ESCAPE, [res("T1", "model:embed", 1), spawn("T1", "T1.c"), res("T1.c", "model:embed", 2, INDET)]),
    (CONTEXT_ESCAPE, [res("T1", "model:embed", 1), spawn("T1", "T1.c", status=INDET), res("T1.c", "model:embed", 2)]),
    (MERGE_SKEW, [res("T1", "index:docs", 1), spawn("T1", "F", "fork"), res("F", "model:embed", 2),
                  merge("T1", "F", status=INDET)]),
])
def test_an_indeterminate_operation_makes_its_checker_unknown(anomaly, rows):
    """Bug class: an indeterminate resolve/spawn/merge judged as ok (the checker would find its anomaly:
    INVALID) or skipped (VALID) instead of unknown."""
    assert verdicts(rows)[anomaly] is Verdict.UNKNOWN


@pytest.mark.parametrize("anomaly,rows", [
    (READ_SKEW, [res("T1", "model:embed", 1), res("T1", "model:embed", 2)]),
    (COMPATIBILITY_SKEW, [res("T1", "index:docs", 1), res("T1", "model:embed", 2)]),
    (COMPATIBILITY_SKEW, [res("T1", "model:embed", 2), res("T1", "index:docs", 1)]),  # the dependents direction
    (CONTEXT_ESCAPE, [res("T1", "model:embed", 1), spawn("T1", "T1.c"), res("T1.c", "model:embed", 2)]),
    (MERGE_SKEW, [res("T1", "index:docs", 1), spawn("T1", "F", "fork"), res("F", "model:embed", 2), merge("T1", "F")]),
])
def test_the_same_operations_answered_ok_are_the_anomaly(anomaly, rows):
    """The control of the test above: with every operation answered ok, the same history is the anomaly, and an
    invalid verdict wins over an indeterminate operation elsewhere in the history."""
    assert verdicts(rows)[anomaly] is Verdict.INVALID
    assert verdicts(rows + [res("T9", "tool:x", 1, INDET)])[anomaly] is Verdict.INVALID


@pytest.mark.planted("analysis.isolation.checkers:ReadSkew.scan",
                     'if op.name != "resolve" or op.status != "ok" or op.value.get("version") is None:',
                     'if op.name != "resolve" or op.value.get("version") is None:')
def test_refused_operations_bind_nothing():
    """Bug class: a refused (fail) resolution or merge judged as if it had bound its version."""
    v = verdicts([res("T1", "model:embed", 1), res("T1", "model:embed", 2, FAIL), res("T1", "index:docs", 1),
                  spawn("T1", "F", "fork"), res("F", "model:embed", 2, FAIL), merge("T1", "F", status=FAIL)])
    assert set(v.values()) == {Verdict.VALID}


@pytest.mark.planted("analysis.isolation.checkers:_Base.check",
                     'if self.needs_contracts and contracts is None:',
                     'if False:')
def test_contract_checks_without_declared_contracts_are_unknown():
    """Bug class: unknown folded into valid: a contract-based checker with no contracts to judge by answers valid."""
    v = verdicts([res("T1", "index:docs", 1), res("T1", "model:embed", 2)], meta={})
    assert v[COMPATIBILITY_SKEW] is Verdict.UNKNOWN and v[MERGE_SKEW] is Verdict.UNKNOWN
    assert v[READ_SKEW] is Verdict.VALID and v[CONTEXT_ESCAPE] is Verdict.VALID
    bad = verdicts([res("T1", "index:docs", 1)], meta={"contracts": ["not a contract"]})
    assert bad[COMPATIBILITY_SKEW] is Verdict.UNKNOWN


# ------------------------------------------------------------------ what a branch inherited
@pytest.mark.planted("analysis.isolation.checkers:_Flow.view",
                     'return {**self.inherited, **self.own}',
                     'return dict(self.own)')
def test_compatibility_skew_sees_the_inherited_view():
    """Bug class: a checker that forgets what a branch inherited: the child binds model:embed@2 while its
    inherited view binds index:docs@1 (it never resolved the index itself)."""
    v = verdicts([res("T1", "index:docs", 1), spawn("T1", "T1.c"), res("T1.c", "model:embed", 2)])
    assert v[COMPATIBILITY_SKEW] is Verdict.INVALID and v[CONTEXT_ESCAPE] is Verdict.VALID


@pytest.mark.planted("analysis.isolation.checkers:_replay",
                     'flows[op.value["child"]] = _Flow(w, op.value.get("relation", "child"), parent.view(), spawned_at=op.index)',
                     'flows[op.value["child"]] = _Flow(w, op.value.get("relation", "child"), dict(parent.own), spawned_at=op.index)')
@pytest.mark.parametrize("relation", ["child", "fork", "retry"])
def test_context_escape_for_every_relation_and_through_two_generations(relation):
    """Bug class: a checker that forgets what a branch inherited: a grandchild inherits its parent's inherited
    view (not only what the parent resolved itself); every relation (child, fork, retry) is a continuation."""
    rows = [res("T1", "model:embed", 1), spawn("T1", "A", relation), spawn("A", "B", relation),
            res("B", "model:embed", 2)]
    assert verdicts(rows)[CONTEXT_ESCAPE] is Verdict.INVALID
    # a binding made by the parent *after* the spawn is not inherited
    later = [spawn("T1", "A", relation), res("T1", "model:embed", 1), res("A", "model:embed", 2)]
    assert verdicts(later)[CONTEXT_ESCAPE] is Verdict.VALID


@pytest.mark.planted("analysis.isolation.checkers:MergeSkew.scan",
                     'parts += [(b, flows[b].view() if b in flows else {}) for b in op.value.get("branches", [])]',
                     'parts += [(b, dict(flows[b].own) if b in flows else {}) for b in op.value.get("branches", [])]')
def test_merge_skew_counts_the_parent_and_inherited_bindings():
    """Bug class: a merge checker that forgets what a branch inherited: the fork's view includes the index it
    inherited; the clash is between that inherited binding and the other fork's model@2."""
    rows = [res("T1", "index:docs", 1), spawn("T1", "F1", "fork"), spawn("T1", "F2", "fork"),
            res("F2", "model:embed", 2), merge("T1", "F1", "F2")]
    assert verdicts(rows)[MERGE_SKEW] is Verdict.INVALID
    ok = rows[:3] + [res("F2", "model:embed", 1), merge("T1", "F1", "F2")]
    assert verdicts(ok)[MERGE_SKEW] is Verdict.VALID
    # the clash is with a binding only the branch inherited: T1 moved on to index@2 after forking F1 at index@1
    moved = [res("T1", "index:docs", 1), spawn("T1", "F1", "fork"), res("T1", "index:docs", 2), merge("T1", "F1")]
    assert verdicts(moved, {**META, "versions": {"index:docs": [1, 2]}})[MERGE_SKEW] is Verdict.INVALID


@pytest.mark.planted("analysis.isolation.checkers:no_admissible_extension",
                     'if versions and c.required_version not in versions.get(c.required, set()):',
                     'if False:')
def test_no_admissible_extension_cases():
    """Bug class: a merge admitted on a two-valued union, a violated contract, or a required version the registry
    lost; and an admissible union refused."""
    c = [Contract.parse(CONTRACT)]
    assert no_admissible_extension([("A", {"x:a": (1, 1)}), ("B", {"x:a": (2, 2)})], [], {}) is not None
    assert no_admissible_extension([("A", {"index:docs": (1, 1)}), ("B", {"model:embed": (2, 2)})], c, {}) is not None
    assert no_admissible_extension([("A", {"index:docs": (1, 1)})], c, {"model:embed": {2}}) is not None
    assert no_admissible_extension([("A", {"index:docs": (1, 1)})], c, {"model:embed": {1, 2}}) is None
    assert no_admissible_extension([("A", {"index:docs": (1, 1)}), ("B", {"model:embed": (1, 2)})], c, {}) is None


# ------------------------------------------------------------------ the contract probe
def _registry(probe) -> Registry:
    reg = Registry({"index:docs": [1], "model:embed": [1, 2]}, {"index:docs": 1, "model:embed": 2}, Contracts())
    reg.probe = probe
    return reg


#: the bug class, planted where the probe answers "unknown": None read as incompatible
planted_unknown_as_incompatible = pytest.mark.planted(
    "mechanisms.isolation.contract_inference:InferenceSSI.compatible", "probe(identity, v, other, u) is False",
    "probe(identity, v, other, u) is not True")


@pytest.mark.parametrize("probe,version", [
    # the probe cannot tell: the live version, as SSI resolves it
    pytest.param(lambda a, v, b, u: None, 2, marks=planted_unknown_as_incompatible),
    (lambda a, v, b, u: True, 2),
    (lambda a, v, b, u: v == 1, 1),               # incompatible @2: the newest retained version that passes
    pytest.param(lambda a, v, b, u: None if v == 2 else False, 2, marks=planted_unknown_as_incompatible),
    (lambda a, v, b, u: False, None),             # nothing passes: refused
])
def test_inference_treats_an_unknown_probe_as_unknown_not_incompatible(probe, version):
    """Bug class: a contract probe that treats "unknown" (None) as "incompatible" (it would refuse or fall
    back where SSI alone resolves the live version)."""
    got = resolve("SSI+inference", "isolation")().resolve(Manifest({"index:docs": 1}), "model:embed", _registry(probe))
    assert got.version == version


@pytest.mark.planted("analysis.isolation.checkers:ContextEscape.scan",
                     'out.append(Witness(tuple(sorted({s0, f.spawned_at, *[',
                     'out.append(Witness(tuple(sorted({s0, *[')
def test_witnesses_name_the_steps_in_prose():
    """Bug class: a witness that names the wrong steps (the deployment or the resume between two resolutions, the
    spawn of a continuation, the bindings of a merge) or the wrong versions."""
    rows = [res("T1", "model:embed", 1), ("deployer", "deploy", OK, {"identity": "model:embed", "version": 2,
                                                                     "previous": 1}),
            ("T1", "pause", OK, {"workflow": "T1"}), ("T1", "resume", OK, {"workflow": "T1"}),
            res("T1", "model:embed", 2), res("T1", "index:docs", 1), spawn("T1", "C"), res("C", "model:embed", 1),
            spawn("T1", "F", "fork"), res("F", "model:embed", 1), merge("T1", "F")]
    h = history("isolation", [("T1", "start", OK, {"workflow": "T1"})] + rows, META)
    got = {n: [(w.steps, w.explanation) for w in c.check(h).witnesses] for n, c in CHECKERS.items()}
    assert got[READ_SKEW] == [((1, 2, 4, 5), "T1 resolved model:embed@1 at step 1, then deployment at step 2 made @2 "
                               "live, then T1 resumed at step 4, then T1 resolved model:embed@2 at step 5: one workflow "
                               "saw two versions of model:embed, semantic read skew.")]
    assert got[COMPATIBILITY_SKEW] == [((5, 6), "T1 had model:embed@2 bound at step 5, then resolved index:docs@1 at "
                                        "step 6, but the declared contract 'index:docs@1 requires model:embed@1' says "
                                        "otherwise: compatibility skew.")]
    assert got[CONTEXT_ESCAPE] == [
        ((5, 7, 8), "T1 resolved model:embed@2 at step 5, then T1's child C (spawned at step 7) resolved model:embed@1 "
                    "at step 8: the continuation left the manifest it inherits, context escape."),
        ((5, 9, 10), "T1 resolved model:embed@2 at step 5, then T1's fork F (spawned at step 9) resolved "
                     "model:embed@1 at step 10: the continuation left the manifest it inherits, context escape.")]
    assert got[MERGE_SKEW] == [((5, 10, 11), "T1 merged F at step 11, but T1 bound model:embed@2 (step 5) and F bound "
                                "model:embed@1 (step 10): the branch manifests have no admissible common extension, "
                                "merge skew.")]
    assert CHECKERS[READ_SKEW].check(h).summary == "1 witness(es) in 1 execution(s)"


@pytest.mark.planted("analysis.isolation.checkers:_Base.check",
                     'if own is not None:',
                     'if False:')
def test_each_group_is_judged_by_its_own_contracts():
    """Bug class: a cell's executions judged by the header's contracts instead of their own (meta.groups): group 1
    declares the contract and violates it; group 2 declares none and binds the same versions."""
    rows = []
    for g in (1, 2):
        rows += [(f"T{g}", "start", OK, {"workflow": f"T{g}", "group": g}),
                 (f"T{g}", "resolve", OK, {"workflow": f"T{g}", "identity": "index:docs", "version": 1, "group": g}),
                 (f"T{g}", "resolve", OK, {"workflow": f"T{g}", "identity": "model:embed", "version": 2, "group": g})]
    meta = {"contracts": [], "groups": {"1": {"contracts": [CONTRACT]}, "2": {"contracts": []}}}
    res_ = CHECKERS[COMPATIBILITY_SKEW].check(history("isolation", rows, meta))
    assert res_.verdict is Verdict.INVALID and [w.explanation.split(" had ")[0] for w in res_.witnesses] == ["T1"]
    assert res_.summary == "1 witness(es) in 2 execution(s)"
    bad = {"contracts": [], "groups": {"1": {"contracts": ["nonsense"]}}}
    assert CHECKERS[COMPATIBILITY_SKEW].check(history("isolation", rows, bad)).verdict is Verdict.UNKNOWN
    ok = CHECKERS[READ_SKEW].check(history("isolation", rows, meta))
    assert ok.verdict is Verdict.VALID and ok.summary == "2 execution(s), none with semantic read skew"
