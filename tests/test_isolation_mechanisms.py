"""Isolation mechanisms: profiles prevent exactly what their guarantees cover; merges; policies; checkpoints.

Every test names the planted bug it catches.
"""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from mechanisms import MechanismError, resolve
from mechanisms.isolation.merge import validate_delta, validate_union
from runners.isolation.workflow_runtime import Runtime, judge, run_scenario
from scenarios import load_scenarios
from vocabulary import Verdict
from vocabulary.isolation import (COMPATIBILITY_SKEW, CONTEXT_ESCAPE, MERGE_SKEW, READ_SKEW, Contract,
                                  Contracts, Guarantees, Manifest, Registry, all_combinations)

SCENARIOS = load_scenarios((), family="isolation")["isolation"]
WITNESS = {s.anomaly: s for s in SCENARIOS.values() if s.anomaly}
COVERS = {READ_SKEW: lambda g: g.stability, COMPATIBILITY_SKEW: lambda g: g.compatibility,
          CONTEXT_ESCAPE: lambda g: g.inheritance, MERGE_SKEW: lambda g: g.stability and g.inheritance}


@pytest.mark.parametrize("g", all_combinations(), ids=lambda g: g.label)
def test_each_combination_prevents_exactly_what_its_guarantees_cover(g):
    """All eight <S,C,I>: an anomaly is prevented iff the switches cover it.

    Catches: S ignored for bound identities (read skew under S1); C1 that
    does not fall back to a retained version; I1 that does not pass the
    manifest to children; merge admission that ignores conflicting versions
    under S1, or refuses them under S0 (then CR would not admit merge skew).
    """
    cls = resolve(g.label, "isolation")
    for anomaly, scenario in WITNESS.items():
        verdict = judge(run_scenario(scenario, cls())[1])[anomaly].verdict
        assert (verdict is Verdict.VALID) == COVERS[anomaly](g), (g.label, anomaly)


def test_named_profiles_are_the_papers_combinations():
    """SRC <S0,C0,I0>, RSR <S1,C0,I0>, CR <S0,C1,I1>, SSI <S1,C1,I1> (planted bug: CR with S1 would refuse merge skew)."""
    def papers_combinations():
        labels = {n: resolve(n, "isolation").guarantees.label for n in ("SRC", "RSR", "CR", "SSI")}
        assert labels == {"SRC": "S0C0I0", "RSR": "S1C0I0", "CR": "S0C1I1", "SSI": "S1C1I1"}

    papers_combinations()
    with pytest.MonkeyPatch.context() as mp, pytest.raises(AssertionError):  # planted: CR declared with S1
        mp.setattr(resolve("CR", "isolation"), "guarantees", Guarantees(True, True, True))
        papers_combinations()


@pytest.mark.planted("mechanisms.isolation.static_pinning:StaticPinning.begin",
                     "if x not in registry.late and x not in registry.opaque", "if x not in registry.opaque")
def test_static_pinning_prevents_closed_world_and_fails_open_world():
    """The lockfile covers what it knew at start, nothing discovered later (planted bug: lockfile including late tools)."""
    closed = judge(run_scenario(SCENARIOS["fixed_schedule"], resolve("StaticPinning", "isolation")())[1])
    assert all(r.verdict is Verdict.VALID for r in closed.values())
    opened = judge(run_scenario(SCENARIOS["open_world"], resolve("StaticPinning", "isolation")())[1])
    assert opened[COMPATIBILITY_SKEW].verdict is Verdict.INVALID and opened[READ_SKEW].verdict is Verdict.INVALID
    ssi = judge(run_scenario(SCENARIOS["open_world"], resolve("SSI", "isolation")())[1])
    assert all(r.verdict is Verdict.VALID for r in ssi.values())


@pytest.mark.planted("runners.isolation.workflow_runtime:Runtime.pause", "text = w.manifest.to_json()",
                     "text = type(w.manifest)().to_json()")  # the checkpoint without the manifest
def test_manifest_survives_the_checkpoint_only():
    """Pause drops the live manifest; resume restores it from JSON (planted bug: a manifest not in the checkpoint
    -> SSI re-resolves live after resume: read skew)."""
    reg = Registry({"prompt:p": [1]}, {"prompt:p": 1})
    rt = Runtime(reg, resolve("SSI", "isolation")())
    rt.start("T1")
    rt.resolve("T1", "prompt:p")
    rt.pause("T1")
    assert rt.workflows["T1"].manifest is None and '"prompt:p": 1' in rt.checkpoints["T1"]
    rt.deploy("prompt:p", 2)
    rt.resume("T1")
    assert rt.resolve("T1", "prompt:p") == 1


@pytest.mark.planted("mechanisms.isolation.base:Profile.compatible", "if broken is None:", "if True:")
def test_c1_falls_back_to_a_retained_version_or_refuses():
    """C1: live if compatible, else the newest retained compatible version, else abort (planted bug: binding live)."""
    contracts = Contracts([Contract.parse("index:docs@1 requires model:embed@1")])
    reg = Registry({"index:docs": [1], "model:embed": [1, 2]}, {"index:docs": 1, "model:embed": 2}, contracts)
    ssi = resolve("SSI", "isolation")()
    m = Manifest({"index:docs": 1})
    r = ssi.resolve(m, "model:embed", reg)
    assert (r.version, r.via) == (1, "retained")
    reg.opaque = frozenset({"model:embed"})  # nothing retained: only the live version is reachable
    r = ssi.resolve(Manifest({"index:docs": 1}), "model:embed", reg)
    assert r.version is None and r.via == "refused"


@pytest.mark.parametrize("policy,versions,via", [
    ("abort", [None, None], "refused"),
    pytest.param("capture", [1, 1], "captured", marks=pytest.mark.planted(  # capture re-reading live
        "mechanisms.isolation.base:Profile.opaque", "if captured is not None:", "if False:")),
    ("taint", [1, 2], "tainted")])
def test_opaque_resource_policies(policy, versions, via):
    """abort refuses, capture replays the first response, taint serves live and taints the manifest
    (planted bug: capture that re-reads live after a deployment)."""
    reg = Registry({"tool:web": [1]}, {"tool:web": 1}, opaque=frozenset({"tool:web"}))
    ssi = resolve("SSI", "isolation")(opaque_policy=policy)
    m = Manifest()
    first = ssi.resolve(m, "tool:web", reg)
    reg.deploy("tool:web", 2)
    second = ssi.resolve(m, "tool:web", reg)
    assert [first.version, second.version] == versions and first.via == via
    assert m.taint == (policy == "taint")
    if policy == "taint":
        child = ssi.inherit(m, "fork")
        assert not ssi.admit_merge(m, [child], reg).admitted


def test_undeclared_policies_on_a_registry():
    """Fail-closed refuses what no contract covers; inference uses the probe (planted bug: fail-closed admitting
    uncovered versions, inference ignoring a False probe; each planted as a subclass whose ``compatible`` is SSI's,
    since both call super(), which planting cannot swap)."""
    ssi, fail_closed, inference = (resolve(n, "isolation") for n in ("SSI", "SSI+fail_closed", "SSI+inference"))

    def policies(fail_closed, inference):
        reg = Registry({"index:docs": [1], "model:embed": [1, 2]}, {"index:docs": 1, "model:embed": 2}, Contracts())
        assert ssi().resolve(Manifest({"index:docs": 1}), "model:embed", reg).version == 2
        assert fail_closed().resolve(Manifest({"index:docs": 1}), "model:embed", reg).version is None
        reg.probe = lambda a, v, b, u: (v == u) if {a, b} == {"index:docs", "model:embed"} else None
        assert inference().resolve(Manifest({"index:docs": 1}), "model:embed", reg).version == 1

    policies(fail_closed, inference)

    class AdmitsUncovered(fail_closed):
        compatible = ssi.compatible

    class IgnoresTheProbe(inference):
        compatible = ssi.compatible

    with pytest.raises(AssertionError):
        policies(AdmitsUncovered, inference)
    with pytest.raises(AssertionError):
        policies(fail_closed, IgnoresTheProbe)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(1, 6), st.integers(0, 4), st.randoms(use_true_random=False))
def test_delta_validation_agrees_with_the_union(identities, branches, delta, rnd):
    """Merge validation over deltas + the parent fingerprint decides as the plain union does.

    The parent is admissible (bound through SSI); the forks bind arbitrary
    versions directly, so conflicts and violations sit in the deltas.

    Catches: a delta path that skips contracts against the parent's
    bindings, misses a conflict between two branches, or trusts branches
    forked from another parent (fingerprint not compared).
    """
    names = [f"tool:t{i}" for i in range(identities)] + [f"model:m{i}" for i in range(identities)]
    contracts = Contracts([Contract(f"tool:t{i}", 1, f"model:m{rnd.randrange(identities)}", rnd.choice([1, 2]))
                           for i in range(identities) if rnd.random() < 0.7])
    reg = Registry({x: [1, 2] for x in names}, {x: 1 for x in names}, contracts)
    ssi = resolve("SSI", "isolation")()
    parent = ssi.begin(reg)  # the parent is admissible: every binding went through SSI's resolver
    for x in rnd.sample(names, rnd.randrange(len(names) + 1)):
        reg.live[x] = rnd.choice([1, 2])
        ssi.resolve(parent, x, reg)
    forks = []
    for _ in range(branches):
        f = ssi.inherit(parent, "fork")
        for x in rnd.sample(names, min(delta, len(names))):
            if x not in parent.bindings:
                f.bind(x, rnd.choice([1, 2]))
        forks.append(f)
    by_delta = validate_delta(parent.fp, parent.bindings, forks, reg)
    assert by_delta is not None
    assert by_delta[0] == validate_union([parent, *forks], reg)[0]
    stranger = Manifest({names[0]: 1}).continuation(True)
    assert validate_delta(parent.fp ^ 1, parent.bindings, [stranger], reg) is None


def test_a_users_profile_plugs_in_by_dotted_path():
    """A class with the protocol's methods loads by package.module:Class; one without is refused in one line."""
    assert resolve("mechanisms.isolation.combos:S1C1I1", "isolation").guarantees.label == "S1C1I1"
    with pytest.raises(MechanismError, match="is not a isolation mechanism|not an isolation mechanism"):
        resolve("vocabulary.isolation:Manifest", "isolation")


def test_same_program_same_history():
    """Determinism: the runtime's history is a pure function of program, registry and mechanism."""
    a = run_scenario(SCENARIOS["fixed_schedule"], resolve("CR", "isolation")())[1]
    b = run_scenario(SCENARIOS["fixed_schedule"], resolve("CR", "isolation")())[1]
    assert a == b and random.Random(0)  # noqa: PT018
