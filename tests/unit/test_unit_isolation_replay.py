"""Isolation checkers, second table: views through spawns and merges, defaults of the history format, the merge
closure and the summaries (``analysis.isolation.checkers``).

Bug classes (issue 16 §7): a checker that forgets what a merge brought back or what a branch inherited; an
operation judged under the wrong workflow (its actor when it names a workflow, or nobody when it does not); a
witness that names the wrong operation (another workflow's resume, a deployment of another identity or one that
failed) or the wrong relation; an indeterminate operation that cannot bind anything folded into the verdict;
unknown folded into valid; a merge closure that stops one requirement short or credits a version the registry
lost.
"""
from __future__ import annotations

import pytest
from histories import history

from analysis.isolation.checkers import CHECKERS, no_admissible_extension
from vocabulary import Verdict
from vocabulary.isolation import COMPATIBILITY_SKEW, CONTEXT_ESCAPE, MERGE_SKEW, READ_SKEW, Contract

OK, FAIL, INDET = "ok", "fail", "indeterminate"
CONTRACT = "index:docs@1 requires model:embed@1"
META = {"contracts": [CONTRACT], "versions": {"index:docs": [1], "model:embed": [1, 2]}}
V, U, I = Verdict.VALID, Verdict.UNKNOWN, Verdict.INVALID


def res(w, identity, version, status=OK, **extra):
    return (w, "resolve", status, {"workflow": w, "identity": identity, "version": version, **extra})


def spawn(parent, child, relation="child", status=OK):
    return (parent, "spawn", status, {"workflow": parent, "child": child, "relation": relation})


def merge(w, *branches, status=OK):
    return (w, "merge", status, {"workflow": w, "branches": list(branches)})


def deploy(identity, version, status=OK):
    return ("deployer", "deploy", status, {"identity": identity, "version": version})


def run(rows, meta=META):
    h = history("isolation", rows, meta)
    return {name: c.check(h) for name, c in CHECKERS.items()}


def verdicts(rows, meta=META):
    return {name: r.verdict for name, r in run(rows, meta).items()}


# ------------------------------------------------------------------ what a merge brings back, what a view holds
@pytest.mark.planted("analysis.isolation.checkers:_replay",
                     'elif op.name == "merge" and op.status == "ok":',
                     'elif False:')
def test_a_merge_brings_the_branch_bindings_into_the_parent_view():
    """Bug class: a checker that forgets what a merge brought back: after merging F (which bound model@2), T1's
    view binds model@2, so T1 resolving index@1 (which requires model@1) is compatibility skew; a refused merge
    brings nothing back."""
    rows = [spawn("T1", "F", "fork"), res("F", "model:embed", 2), merge("T1", "F"), res("T1", "index:docs", 1)]
    assert verdicts(rows)[COMPATIBILITY_SKEW] is I
    refused = rows[:2] + [merge("T1", "F", status=FAIL), rows[3]]
    assert verdicts(refused)[COMPATIBILITY_SKEW] is V
    # a merge of a branch nobody spawned, or of no branch at all, brings nothing back and breaks nothing
    for odd in ([merge("T1", "ghost"), res("T1", "index:docs", 1)],
                [("T1", "merge", OK, {"workflow": "T1"}), res("T1", "index:docs", 1)]):
        assert set(verdicts(odd).values()) == {V}


@pytest.mark.planted("analysis.isolation.checkers:ReadSkew.scan",
                     'key = (op.value.get("workflow", op.actor), op.value["identity"])',
                     'key = (op.value.get("workflow"), op.value["identity"])')
def test_operations_without_a_workflow_belong_to_their_actor():
    """Bug class: an operation judged under the wrong workflow: with no ``workflow`` in its value, an operation is
    its actor's (two actors never share a view; one actor's two resolutions are one workflow's)."""
    rows = [("T1", "resolve", OK, {"identity": "model:embed", "version": 1}),
            ("T1", "resolve", OK, {"identity": "model:embed", "version": 2}),
            ("T2", "resolve", OK, {"identity": "model:embed", "version": 1})]
    res_ = run(rows)[READ_SKEW]
    assert res_.verdict is I and len(res_.witnesses) == 1 and res_.witnesses[0].explanation.startswith("T1 resolved")
    compat = [("T1", "resolve", OK, {"identity": "index:docs", "version": 1}),
              ("T1", "resolve", OK, {"identity": "model:embed", "version": 2})]
    assert verdicts(compat)[COMPATIBILITY_SKEW] is I
    assert verdicts([compat[0], ("T2", "resolve", OK, {"identity": "model:embed", "version": 2})])[
        COMPATIBILITY_SKEW] is V
    esc = [("T1", "resolve", OK, {"identity": "model:embed", "version": 1}),
           ("T1", "spawn", OK, {"child": "C"}), ("C", "resolve", OK, {"identity": "model:embed", "version": 2})]
    out = run(esc)[CONTEXT_ESCAPE]
    assert out.verdict is I and "T1's child C (spawned at step 1)" in out.witnesses[0].explanation
    merged = [("T1", "resolve", OK, {"identity": "model:embed", "version": 1}), ("T1", "spawn", OK, {"child": "F"}),
              ("F", "resolve", OK, {"identity": "model:embed", "version": 2}), ("T1", "merge", OK, {"branches": ["F"]})]
    assert run(merged)[MERGE_SKEW].witnesses[0].explanation.startswith("T1 merged F at step 3")


@pytest.mark.planted("analysis.isolation.checkers:_replay",
                     'if op.name == "resolve" and op.status == "ok" and op.value.get("version") is not None:',
                     'if op.name == "resolve" and op.status == "ok" and op.value.get("version") != 1:')
def test_a_resolution_that_found_no_version_binds_nothing():
    """Bug class: a resolution answered without a version (nothing resolved) judged as a binding."""
    rows = [res("T1", "model:embed", 1), res("T1", "model:embed", None), spawn("T1", "C"),
            res("C", "model:embed", None), res("T1", "index:docs", None)]
    assert set(verdicts(rows).values()) == {V}


@pytest.mark.planted("analysis.isolation.checkers:_replay",
                     'flows.setdefault(w, _Flow(None, "root", {})).own[op.value["identity"]]',
                     'flows[w].own[op.value["identity"]]')
def test_a_workflow_seen_first_at_its_resolution():
    """Bug class: a checker that needs a ``start`` to know a workflow (it would fail, or judge nothing): T2's first
    operation is a resolution; its second contradicts its first."""
    rows = [res("T2", "index:docs", 1), res("T2", "model:embed", 2), res("T3", "model:embed", 2),
            spawn("T3", "F", "fork"), merge("T3", "F"), merge("T4", "T9")]
    got = verdicts(rows)
    assert got[COMPATIBILITY_SKEW] is I and got[MERGE_SKEW] is V and got[CONTEXT_ESCAPE] is V


@pytest.mark.planted("analysis.isolation.checkers:_Base.check",
                     'op.indeterminate and op.name in ("resolve", "merge", "spawn")',
                     'op.indeterminate')
@pytest.mark.parametrize("row", [
    ("T1", "deploy", INDET, {"identity": "model:embed", "version": 2}),
    ("T1", "pause", INDET, {"workflow": "T1"}),
    ("T1", "resume", INDET, {"workflow": "T1"}),
])
def test_an_indeterminate_operation_that_binds_nothing_leaves_the_verdict_alone(row):
    """Bug class: an indeterminate operation folded into a verdict where it cannot change one: only resolutions,
    merges and spawns bind versions; a dead deployment, pause or resume leaves a clean history valid."""
    rows = [res("T1", "model:embed", 1), row, res("T1", "model:embed", 1)]
    assert set(verdicts(rows).values()) == {V}


# ------------------------------------------------------------------ witnesses
@pytest.mark.planted("analysis.isolation.checkers:_deploys_between",
                     'return [o for o in ops if o.name == "deploy" and o.status == "ok" and o.value.get("identity") == identity',
                     'return [o for o in ops if o.name == "deploy" and o.value.get("identity") == identity')
def test_read_skew_witness_names_only_this_workflow_and_identity():
    """Bug class: a witness that names the wrong operation: a deployment of another identity, a refused
    deployment, another workflow's resume or one before the first resolution; and two deployments in one phrase."""
    rows = [("T1", "resume", OK, {"workflow": "T1"}),                            # 0: before the first resolution
            res("T1", "model:embed", 1),                                          # 1
            deploy("model:embed", 2),                                             # 2
            deploy("index:docs", 2),                                              # 3: another identity
            deploy("model:embed", 3, FAIL),                                       # 4: refused
            ("T2", "resume", OK, {"workflow": "T2"}),                             # 5: another workflow
            deploy("model:embed", 4),                                             # 6
            res("T1", "model:embed", 4),                                          # 7
            ("T1", "resume", OK, {"workflow": "T1"}),                             # 8: after
            res("T1", "model:embed", 1)]                                          # 9: back to the first: no skew
    ws = run(rows)[READ_SKEW].witnesses
    assert [(w.steps, w.explanation) for w in ws] == [
        ((1, 2, 6, 7), "T1 resolved model:embed@1 at step 1, then deployment at step 2 made @2 live, deployment at "
                       "step 6 made @4 live, then T1 resolved model:embed@4 at step 7: one workflow saw two versions "
                       "of model:embed, semantic read skew.")]


@pytest.mark.planted("analysis.isolation.checkers:CompatibilitySkew._witness",
                     '*[o.index for o in _deploys_between(ops, x, s0, s1)], s1',
                     's1')
def test_compatibility_skew_witness_in_the_dependents_direction_names_the_deployment():
    """Bug class: a witness that names the wrong operation or the wrong bound version (the dependents direction:
    the bound subject index@1 requires model@1, then model@2 is resolved after a deployment)."""
    rows = [res("T1", "index:docs", 1), deploy("model:embed", 2), deploy("index:docs", 2),
            res("T1", "model:embed", 2)]
    ws = run(rows)[COMPATIBILITY_SKEW].witnesses
    assert [(w.steps, w.explanation) for w in ws] == [
        ((0, 1, 3), "T1 had index:docs@1 bound at step 0, then deployment at step 1 made @2 live, then resolved "
                    "model:embed@2 at step 3, but the declared contract 'index:docs@1 requires model:embed@1' says "
                    "otherwise: compatibility skew.")]


@pytest.mark.parametrize("rows,verdict", [
    ([res("T1", "index:docs", 1), res("T1", "model:embed", 1)], V),       # the contract holds
    ([res("T1", "model:embed", 1), res("T1", "index:docs", 1)], V),
    ([res("T1", "index:docs", 2), res("T1", "model:embed", 2)], V),       # another subject version: no contract
    ([res("T1", "model:embed", 2), res("T1", "index:docs", 2)], V),
    ([res("T1", "tool:x", 1), res("T1", "model:embed", 2)], V),           # unrelated bindings
    ([res("T1", "model:embed", 2), res("T1", "index:docs", 1)], I),
    pytest.param([res("T1", "index:docs", 1), res("T1", "model:embed", 2)], I, marks=pytest.mark.planted(
        "analysis.isolation.checkers:CompatibilitySkew.scan", "and c.required_version != v:", "and c.required_version == v:")),
    ([res("T1", "index:docs", 1), spawn("T1", "C"), res("T1", "model:embed", 2)], I),
])
def test_compatibility_skew_both_directions(rows, verdict):
    """Bug class: a contract checked with the wrong versions (any version of the subject, or the required version
    compared the wrong way round) in either direction."""
    assert verdicts(rows)[COMPATIBILITY_SKEW] is verdict


@pytest.mark.planted("analysis.isolation.checkers:CompatibilitySkew.scan",
                     "have[0] != c.required_version", "have[0] == c.required_version")
def test_compatibility_skew_with_a_contract_on_the_identity_itself_is_not_a_self_clash():
    """A contract that requires the identity being resolved (index:docs@1 requires model:embed@1, index:docs never
    bound) is not one this resolution breaks: the first witness names the contract it does break (model:embed@2
    requires tool:t@1 while tool:t@2 is bound), and with tool:t@1 bound there is none (planted bug: a checker that
    reads a contract backwards, flagging the versions it allows and passing those it forbids)."""
    meta = {"contracts": ["index:docs@1 requires model:embed@1", "model:embed@2 requires tool:t@1"]}
    rows = [res("T1", "tool:t", 2), res("T1", "model:embed", 2)]
    got = run(rows, meta)[COMPATIBILITY_SKEW]
    assert got.verdict is I and "'model:embed@2 requires tool:t@1'" in got.witnesses[0].explanation
    assert verdicts([res("T1", "tool:t", 1), res("T1", "model:embed", 2)], meta)[COMPATIBILITY_SKEW] is V


@pytest.mark.planted("analysis.isolation.checkers:_replay",
                     'op.value.get("relation", "child")',
                     'op.value.get("relation", "fork")')
def test_context_escape_defaults_the_relation_to_child_and_judges_only_inherited_identities():
    """Bug class: a witness that names the wrong relation (a spawn without one is a child); an escape reported for
    an identity the child never inherited, or for the version it did inherit."""
    rows = [res("T1", "model:embed", 1), ("T1", "spawn", OK, {"workflow": "T1", "child": "C"}),
            res("C", "index:docs", 1), res("C", "model:embed", 1), res("C", "model:embed", 2)]
    ws = run(rows)[CONTEXT_ESCAPE].witnesses
    assert [(w.steps, w.explanation) for w in ws] == [
        ((0, 1, 4), "T1 resolved model:embed@1 at step 0, then T1's child C (spawned at step 1) resolved "
                    "model:embed@2 at step 4: the continuation left the manifest it inherits, context escape.")]


@pytest.mark.planted("analysis.isolation.checkers:no_admissible_extension",
                     'return tuple(sorted({i for steps, _ in clashes for i in steps})), "; ".join(why for _, why in clashes)',
                     'return tuple(sorted({i for steps, _ in clashes for i in steps})), clashes[0][1]')
def test_merge_skew_names_every_branch_and_every_clash():
    """Bug class: a witness that names the wrong operation: a merge of two branches names both, and each clash its
    own bindings and steps."""
    rows = [spawn("T1", "F1", "fork"), spawn("T1", "F2", "fork"), res("F1", "model:embed", 1),
            res("F2", "model:embed", 2), res("F1", "tool:x", 1), res("F2", "tool:x", 2), merge("T1", "F1", "F2")]
    ws = run(rows, {"contracts": []})[MERGE_SKEW].witnesses
    assert [(w.steps, w.explanation) for w in ws] == [
        ((2, 3, 4, 5, 6), "T1 merged F1, F2 at step 6, but F1 bound model:embed@1 (step 2) and F2 bound "
                          "model:embed@2 (step 3); F1 bound tool:x@1 (step 4) and F2 bound tool:x@2 (step 5): the "
                          "branch manifests have no admissible common extension, merge skew.")]


@pytest.mark.planted("analysis.isolation.checkers:MergeSkew.scan",
                     'versions = {x: set(vs) for x, vs in (meta.get("versions") or {}).items()}',
                     'versions = {}')
def test_merge_skew_finds_a_clash_without_contracts_and_reads_each_groups_registry():
    """Bug class: unknown folded into a verdict the other way: a merge of two versions of one identity is merge
    skew with or without declared contracts (a clash needs none); a cell's execution is judged by its own registry
    (``meta.groups[g].versions``), not the header's."""
    rows = [res("T1", "model:embed", 1), spawn("T1", "F", "fork"), res("F", "model:embed", 2), merge("T1", "F")]
    assert verdicts(rows, {})[MERGE_SKEW] is I
    grouped = []
    for g in (1, 2):
        grouped += [(f"T{g}", "resolve", OK, {"workflow": f"T{g}", "identity": "index:docs", "version": 1, "group": g}),
                    (f"T{g}", "spawn", OK, {"workflow": f"T{g}", "child": f"F{g}", "relation": "fork", "group": g}),
                    (f"T{g}", "merge", OK, {"workflow": f"T{g}", "branches": [f"F{g}"], "group": g})]
    meta = {"contracts": [CONTRACT], "versions": {"model:embed": [1]},
            "groups": {"1": {"contracts": [CONTRACT], "versions": {"model:embed": [2]}}, "2": {}}}
    got = run(grouped, meta)[MERGE_SKEW]
    assert got.verdict is I and [w.explanation.split(" merged")[0] for w in got.witnesses] == ["T1"]
    assert "the registry does not have" in got.witnesses[0].explanation
    assert got.summary == "1 witness(es) in 2 execution(s)"


# ------------------------------------------------------------------ summaries and unknowns
@pytest.mark.planted("analysis.isolation.checkers:_Base.check",
                     'return CheckResult(self.name, Verdict.UNKNOWN, (), "an operation\'s outcome is indeterminate")',
                     'return CheckResult(self.name, Verdict.UNKNOWN, (), "")')
def test_summaries_say_why_a_verdict_is_unknown():
    """Bug class: unknown folded into valid, or an unknown that does not say why (malformed contracts, none
    declared, an indeterminate operation)."""
    bad = run([res("T1", "model:embed", 1)], {"contracts": ["nonsense"]})
    assert bad[COMPATIBILITY_SKEW].verdict is U and bad[COMPATIBILITY_SKEW].summary.startswith(
        "meta.contracts is malformed: 'nonsense' is not a contract")
    assert bad[READ_SKEW].verdict is V  # a checker that needs no contracts ignores them
    none = run([res("T1", "model:embed", 1)], {})
    assert none[MERGE_SKEW].summary == "the history's meta has no 'contracts' to judge by"
    indet = run([res("T1", "model:embed", 1), res("T1", "model:embed", 2, INDET)])
    assert indet[READ_SKEW].summary == "an operation's outcome is indeterminate"
    ok = run([res("T1", "model:embed", 1)])
    assert {n: r.summary for n, r in ok.items()} == {
        READ_SKEW: "1 execution(s), none with semantic read skew",
        COMPATIBILITY_SKEW: "1 execution(s), none with compatibility skew",
        CONTEXT_ESCAPE: "1 execution(s), none with context escape",
        MERGE_SKEW: "1 execution(s), none with merge skew"}


@pytest.mark.planted("analysis.isolation.checkers:_Base.check",
                     'own.get("contracts", [])',
                     'own.get("contracts", history.meta.get("contracts", []))')
def test_a_group_without_its_own_contracts_key_declares_none():
    """Bug class: a cell's execution without a ``contracts`` entry judged by nothing at all (a crash) or by the
    header's contracts."""
    rows = [("T1", "resolve", OK, {"workflow": "T1", "identity": "index:docs", "version": 1, "group": 1}),
            ("T1", "resolve", OK, {"workflow": "T1", "identity": "model:embed", "version": 2, "group": 1})]
    meta = {"contracts": [CONTRACT], "groups": {"1": {"versions": {}}}}
    got = run(rows, meta)[COMPATIBILITY_SKEW]
    assert got.verdict is V and got.summary == "1 execution(s), none with compatibility skew"
    bad = run(rows, {"contracts": [], "groups": {"1": {"contracts": ["nonsense"]}}})[COMPATIBILITY_SKEW]
    assert bad.summary.startswith("meta.groups[1].contracts is malformed: 'nonsense' is not a contract")


# ------------------------------------------------------------------ the merge closure
C2 = [Contract.parse("tool:a@1 requires model:b@1"), Contract.parse("model:b@1 requires index:c@2")]


@pytest.mark.parametrize("parts,versions,expect", [
    # the closure follows a chain of requirements; the registry must hold every version it adds
    pytest.param([("A", {"tool:a": (1, 4)})], {"model:b": {1}, "index:c": {1}},
                 ((), "'model:b@1 requires index:c@2' needs index:c@2, which no branch bound and the registry does not "
                      "have"), marks=pytest.mark.planted(
                     "analysis.isolation.checkers:no_admissible_extension",
                     "if versions and c.required_version not in versions.get(c.required, set()):", "if False:")),
    ([("A", {"tool:a": (1, 4)})], {"model:b": {1}, "index:c": {2}}, None),
    ([("A", {"tool:a": (1, 4)})], {"tool:q": {1}},
     ((4,), "'tool:a@1 requires model:b@1' needs model:b@1, which no branch bound and the registry does not have")),
    ([("A", {"tool:a": (1, 4)})], {}, None),  # no registry declared: every required version is taken to exist
    ([("A", {"tool:a": (1, 4)}), ("B", {"index:c": (1, 6)})], {},
     ((6,), "the merged bindings hold model:b@1 and index:c@1, violating 'model:b@1 requires index:c@2'")),
    ([("A", {"tool:a": (1, 4)}), ("B", {"model:b": (2, 6)})], {},
     ((4, 6), "the merged bindings hold tool:a@1 and model:b@2, violating 'tool:a@1 requires model:b@1'")),
    ([("A", {"tool:a": (1, 4)}), ("B", {"model:b": (1, 6), "index:c": (2, 7)})], {"index:c": set()}, None),
    ([("A", {"tool:a": (1, 4), "tool:q": (1, 1)}), ("B", {"tool:a": (2, 6), "tool:q": (2, 2)})], {},
     ((1, 2, 4, 6), "A bound tool:a@1 (step 4) and B bound tool:a@2 (step 6); A bound tool:q@1 (step 1) and B bound "
                    "tool:q@2 (step 2)")),
    ([("A", {"tool:a": (1, 4)}), ("B", {"tool:a": (1, 6)}), ("C", {"tool:a": (2, 8)})], {},
     ((4, 8), "A bound tool:a@1 (step 4) and C bound tool:a@2 (step 8)")),
])
def test_no_admissible_extension_closure_and_messages(parts, versions, expect):
    """Bug class: a merge closure that stops one requirement short, credits a version the registry lost (or
    refuses one it has), or a witness that names the wrong binding, step or contract."""
    assert no_admissible_extension(parts, C2, versions) == expect


# ------------------------------------------------------------------ the workflow an operation names, not its actor
def by(actor, row):
    """``row`` performed by ``actor`` on behalf of the workflow its value names (a worker pool)."""
    return (actor, *row[1:])


@pytest.mark.parametrize("rows,anomaly,verdict", [
    # two workers resolve for one workflow: one workflow saw two versions
    pytest.param([by("w1", res("T1", "model:embed", 1)), by("w2", res("T1", "model:embed", 2))], READ_SKEW, I,
                 marks=pytest.mark.planted("analysis.isolation.checkers:ReadSkew.scan", 'key = (op.value.get("workflow", op.actor),',
                                           "key = (op.actor,")),
    # one worker resolves for two workflows: no workflow saw two versions
    ([by("pool", res("T1", "model:embed", 1)), by("pool", res("T2", "model:embed", 2))], READ_SKEW, V),
    ([by("w1", res("T1", "index:docs", 1)), by("w2", res("T1", "model:embed", 2))], COMPATIBILITY_SKEW, I),
    ([by("pool", res("T1", "index:docs", 1)), by("pool", res("T2", "model:embed", 2))], COMPATIBILITY_SKEW, V),
    ([by("w1", res("T1", "model:embed", 1)), by("w2", spawn("T1", "C")), by("w3", res("C", "model:embed", 2))],
     CONTEXT_ESCAPE, I),
    ([by("w1", res("T1", "model:embed", 1)), by("w2", spawn("T1", "F", "fork")), by("w3", res("F", "model:embed", 2)),
      by("w4", merge("T1", "F"))], MERGE_SKEW, I),
])
def test_operations_belong_to_the_workflow_they_name_not_to_their_actor(rows, anomaly, verdict):
    """Bug class: an operation judged under the wrong workflow: a worker (the actor) that acts for a workflow named
    in the value is not that workflow (several workers serve one workflow, one worker serves several)."""
    got = run(rows)[anomaly]
    assert got.verdict is verdict
    if verdict is I:
        assert got.witnesses[0].explanation.startswith("T1 ")


@pytest.mark.planted("analysis.isolation.checkers:_Base.check", 'return CheckResult(self.name, Verdict.VALID, (),',
                     'return CheckResult("", Verdict.VALID, (),')
def test_every_result_names_its_checker_and_an_unknown_or_valid_one_has_no_witness():
    """Bug class: a result that names no checker (or another), or an unknown/valid result that carries witnesses."""
    cases = [([res("T1", "model:embed", 1)], META), ([res("T1", "model:embed", 1)], {}),
             ([res("T1", "model:embed", 1)], {"contracts": ["nonsense"]}),
             ([res("T1", "model:embed", 1), res("T1", "model:embed", 2, INDET)], META),
             ([res("T1", "model:embed", 1, group=1)], {"contracts": [], "groups": {"1": {"contracts": ["nonsense"]}}}),
             ([res("T1", "model:embed", 1), res("T1", "model:embed", 2), res("T1", "index:docs", 1), spawn("T1", "F"),
               res("F", "model:embed", 1), merge("T1", "F")], META)]
    for rows, meta in cases:
        for name, result in run(rows, meta).items():
            assert result.checker == name
            if result.verdict is not I:
                assert result.witnesses == ()


@pytest.mark.planted("analysis.isolation.checkers:_Base.check",
                     'if self.needs_contracts else None',
                     'if True else None')
def test_a_group_with_malformed_contracts_does_not_stop_a_checker_that_needs_none():
    """Bug class: unknown folded the other way: read skew and context escape need no contracts, so a group whose
    contracts are malformed is still judged by them."""
    rows = [res("T1", "model:embed", 1, group=1), res("T1", "model:embed", 2, group=1)]
    got = run(rows, {"contracts": [], "groups": {"1": {"contracts": ["nonsense"]}}})
    assert got[READ_SKEW].verdict is I and got[CONTEXT_ESCAPE].verdict is V
    assert got[COMPATIBILITY_SKEW].verdict is U


@pytest.mark.planted("analysis.isolation.checkers:_Base.check",
                     'witnesses += self.scan(ops, contracts, history.meta)',
                     'witnesses = self.scan(ops, contracts, history.meta)')
def test_witnesses_of_every_execution_are_kept():
    """Bug class: witnesses of one execution (group) replaced by the next one's instead of kept beside them."""
    rows = [res("T1", "model:embed", 1, group=1), res("T1", "model:embed", 2, group=1),
            res("T2", "model:embed", 1, group=2), res("T2", "model:embed", 2, group=2)]
    got = run(rows)[READ_SKEW]
    assert [w.steps for w in got.witnesses] == [(0, 1), (2, 3)]
    assert got.summary == "2 witness(es) in 2 execution(s)"


@pytest.mark.planted("analysis.isolation.checkers:ContextEscape.scan",
                     '*[o.index for o in _deploys_between(ops, x, s0, op.index)], op.index',
                     'op.index')
def test_context_escape_witness_names_the_deployment_between():
    """Bug class: a witness that names the wrong operation: the deployment of this identity between the parent's
    resolution and the child's (not another identity's, not one after)."""
    rows = [res("T1", "model:embed", 1), spawn("T1", "C"), deploy("model:embed", 2), deploy("index:docs", 2),
            res("C", "model:embed", 2), deploy("model:embed", 3)]
    ws = run(rows)[CONTEXT_ESCAPE].witnesses
    assert [(w.steps, w.explanation) for w in ws] == [
        ((0, 1, 2, 4), "T1 resolved model:embed@1 at step 0, then deployment at step 2 made @2 live, then T1's child "
                       "C (spawned at step 1) resolved model:embed@2 at step 4: the continuation left the manifest it "
                       "inherits, context escape.")]


@pytest.mark.planted("analysis.isolation.checkers:MergeSkew.scan",
                     'parts = [(w, flows[w].view() if w in flows else {})]',
                     'parts = []')
def test_a_merge_that_names_no_branch_is_judged_on_the_parent_alone():
    """Bug class: a merge record without branches that breaks the checker (or is skipped): the parent's own view
    still needs a version the registry lost."""
    rows = [res("T1", "index:docs", 1), ("T1", "merge", OK, {"workflow": "T1"})]
    ws = run(rows, {**META, "versions": {"model:embed": [2]}})[MERGE_SKEW].witnesses
    assert [(w.steps, w.explanation) for w in ws] == [
        ((0, 1), "T1 merged  at step 1, but 'index:docs@1 requires model:embed@1' needs model:embed@1, which no "
                 "branch bound and the registry does not have: the branch manifests have no admissible common "
                 "extension, merge skew.")]


@pytest.mark.planted("analysis.isolation.checkers:no_admissible_extension",
                     'closed[c.required] = c.required_version\n',
                     'pass\n')
def test_the_closure_keeps_a_version_it_added_for_later_requirements():
    """Bug class: a merge closure that forgets a version it added: two bound subjects require different versions
    of one identity nobody bound; the second requirement clashes with the first one's addition."""
    contracts = [Contract.parse("tool:a@1 requires index:c@2"), Contract.parse("model:b@1 requires index:c@3")]
    got = no_admissible_extension([("A", {"tool:a": (1, 4)}), ("B", {"model:b": (1, 6)})], contracts, {})
    assert got == ((4,), "the merged bindings hold tool:a@1 and index:c@3, violating 'tool:a@1 requires index:c@2'")
