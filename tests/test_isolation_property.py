"""Property: with every contract declared, SSI never yields a history any checker flags (paper §3-§4).

Random programs over a small registry (a contract-free prompt, an index and
the embedding model it requires at the same version, a late-discovered tool
that requires a policy): deployments land anywhere; workflows resolve,
pause and resume, spawn children and retries, fork and merge.  Under SSI
all four checkers say valid; under SRC the same generator finds every
anomaly (``hypothesis.find``).  Planted bugs this catches: any of SSI's
switches turned off (each makes one ``find``-able anomaly reachable under
SSI), a runtime that forgets the manifest at a pause, and a merge that
ignores branch conflicts.
"""
from __future__ import annotations

import pytest
from hypothesis import Phase, find, given, settings, strategies as st

from mechanisms import resolve
from runners.isolation.workflow_runtime import Runtime, history_meta, judge, to_history
from vocabulary import Verdict
from vocabulary.isolation import ANOMALIES, Contract, Contracts, Registry

IDENTITIES = ("prompt:p", "index:docs", "model:embed", "tool:t", "policy:q")
CONTRACTS = tuple([Contract("index:docs", v, "model:embed", v) for v in (1, 2, 3)]
                  + [Contract("tool:t", v, "policy:q", v) for v in (1, 2, 3)])


def registry() -> Registry:
    return Registry({x: [1] for x in IDENTITIES}, {x: 1 for x in IDENTITIES}, Contracts(CONTRACTS),
                    late=frozenset({"tool:t"}))


@st.composite
def programs(draw):
    """A valid program: a list of (verb, args) steps over workflows that exist and are in the right state."""
    steps, state, forks, latest, n = [("start", "T1")], {"T1": "running"}, {}, {x: 1 for x in IDENTITIES}, 0
    for _ in range(draw(st.integers(4, 24))):
        running = sorted(w for w, s in state.items() if s == "running")
        paused = sorted(w for w, s in state.items() if s == "paused")
        mergeable = sorted(w for w in running if any(state[b] in ("running", "ended") for b in forks.get(w, ())))
        kinds = ["deploy"] + (["resolve", "resolve", "pause", "child", "fork", "end"] if running else []) \
            + (["resume"] if paused else []) + (["merge"] if mergeable else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "deploy":
            x = draw(st.sampled_from(IDENTITIES))
            if latest[x] < 3:
                latest[x] += 1
                steps.append(("deploy", x, latest[x]))
            continue
        if kind == "resume":
            w = draw(st.sampled_from(paused))
            state[w] = "running"
            steps.append(("resume", w))
            continue
        if kind == "merge":
            w = draw(st.sampled_from(mergeable))
            branches = [b for b in forks[w] if state[b] in ("running", "ended")]
            for b in branches:
                state[b] = "merged"
            forks[w] = [b for b in forks[w] if b not in branches]
            steps.append(("merge", w, tuple(branches)))
            continue
        w = draw(st.sampled_from(running))
        if kind == "resolve":
            steps.append(("resolve", w, draw(st.sampled_from(IDENTITIES))))
        elif kind in ("pause", "end"):
            state[w] = "paused" if kind == "pause" else "ended"
            steps.append((kind, w))
        else:
            n += 1
            news = [f"{w}.{kind[0]}{n}"] + ([f"{w}.{kind[0]}{n}b"] if kind == "fork" else [])
            relation = draw(st.sampled_from(["child", "retry"])) if kind == "child" else "fork"
            for c in news:
                state[c] = "running"
                steps.append(("spawn", w, c, relation))
            if kind == "fork":
                forks.setdefault(w, []).extend(news)
    return steps


def run(steps, profile: str):
    reg = registry()
    rt = Runtime(reg, resolve(profile, "isolation")())
    for s in steps:
        if s[0] == "deploy":
            rt.deploy(s[1], s[2])
        elif s[0] == "resolve":
            rt.resolve(s[1], s[2])
        elif s[0] == "spawn":
            rt.spawn(s[1], s[2], s[3])
        elif s[0] == "merge":
            rt.merge(s[1], s[2])
        else:
            getattr(rt, s[0])(s[1])
    return judge(to_history(rt.ops, history_meta(reg, CONTRACTS)))


@settings(max_examples=100, deadline=None)
@given(programs())
def test_ssi_never_yields_a_flagged_history(steps):
    results = run(steps, "SSI")
    assert all(r.verdict is Verdict.VALID for r in results.values()), \
        "\n".join(r.prose() for r in results.values() if r.verdict is not Verdict.VALID)


@pytest.mark.parametrize("anomaly", ANOMALIES)
def test_the_same_generator_finds_each_anomaly_under_src(anomaly):
    example = find(programs(), lambda steps: run(steps, "SRC")[anomaly].verdict is Verdict.INVALID,
                   settings=settings(max_examples=2000, deadline=None, database=None,
                                     phases=(Phase.generate,)))  # no shrinking: finding is the point
    assert run(example, "SRC")[anomaly].verdict is Verdict.INVALID
    assert run(example, "SSI")[anomaly].verdict is Verdict.VALID
