"""Resolution and merge-validation latency of the isolation profiles (semantic-isolation paper §5.3).

The paper: p95 4.6 µs for resolution and 88.2 µs for merge validation at
128 identities and 16 branches (metadata processing only).  Here:

- ``resolve_bound``: ``SSI.resolve`` of an identity the manifest already
  binds (the steady state of a resumed workflow), against the number of
  bound identities;
- ``resolve_new``: ``SSI.resolve`` of an identity the workflow binds for the
  first time (online manifest extension: the contract checks run), the
  manifest reset outside the timed region before every round;
- ``merge_validation/delta=d``: ``SSI.admit_merge`` of ``branches`` forks of
  one parent manifest of ``identities`` bindings, each fork having bound
  ``d`` new identities (each with a declared contract on a parent binding)
  -- validation over the deltas and the parent's fingerprint;
- ``merge_union/delta=d``: the plain union of every branch's full bindings
  with the same contract checks (``mechanisms.isolation.merge.validate_union``),
  the baseline the delta validation is measured against.

Every round times one call (``benchmark.pedantic``, one iteration, a warm-up
first; the experiment runs it with ``--benchmark-disable-gc``); p50 and p95 are computed over the rounds' raw samples inside the
test and kept in ``extra_info`` with the point, beside pytest-benchmark's
own statistics.  The grid comes from the environment (the experiment
``isolation_microbench`` sets it): ``ISOLATION_BENCH_POINTS`` is a JSON list
of ``[operation, identities, branches, delta]`` and ``ISOLATION_BENCH_ROUNDS``
the rounds per point.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from mechanisms.isolation.merge import validate_union
from mechanisms.isolation.ssi import SSI
from vocabulary.isolation import Contract, Contracts, Manifest, Registry

QUICK = [["resolve_bound", 8, 1, 0], ["resolve_bound", 128, 1, 0], ["resolve_bound", 1024, 1, 0],
         ["resolve_new", 128, 1, 0], ["merge_validation", 128, 16, 2], ["merge_union", 128, 16, 2]]
POINTS = json.loads(os.environ.get("ISOLATION_BENCH_POINTS", "null") or "null") or QUICK
ROUNDS = int(os.environ.get("ISOLATION_BENCH_ROUNDS", "300"))


def world(identities: int, branches: int = 1, delta: int = 0):
    """A registry of ``identities`` bound tools plus ``branches * delta`` late ones, each late one with a contract.

    Half of the bound identities come in pairs with a declared contract
    (``tool:a{i}@1 requires model:b{i}@1``); every late identity
    ``tool:late{b}_{j}@1`` requires a bound model, so merge validation has
    contracts to check on every delta binding.
    """
    bound = []
    contracts = []
    for i in range(identities // 2):
        bound += [f"tool:a{i}", f"model:b{i}"]
        contracts.append(Contract(f"tool:a{i}", 1, f"model:b{i}", 1))
    if identities % 2:
        bound.append("prompt:odd")
    late = [f"tool:late{b}_{j}" for b in range(branches) for j in range(delta)]
    pairs = max(1, identities // 2)
    contracts += [Contract(x, 1, f"model:b{k % pairs}", 1) for k, x in enumerate(late) if identities >= 2]
    names = bound + late + ["tool:fresh"]
    reg = Registry({x: [1, 2] for x in names}, {x: 1 for x in names}, Contracts(contracts))
    return reg, bound, late


def bound_manifest(reg, bound) -> Manifest:
    m = Manifest()
    for x in bound:
        m.bind(x, reg.live[x])
    return m


def forks(profile, reg, parent, branches, delta):
    out = []
    for b in range(branches):
        child = profile.inherit(parent, "fork")
        for j in range(delta):
            profile.resolve(child, f"tool:late{b}_{j}", reg)
        out.append(child)
    return out


def percentiles(benchmark) -> dict:
    data = np.asarray(benchmark.stats.stats.data) * 1e6
    return {"p50_us": float(np.percentile(data, 50)), "p95_us": float(np.percentile(data, 95)), "samples": len(data)}


@pytest.mark.parametrize("point", POINTS, ids=[f"{o}-{n}x{b}-d{d}" for o, n, b, d in POINTS])
def test_isolation(benchmark, point):
    operation, identities, branches, delta = point
    profile = SSI()
    benchmark.group = operation
    reg, bound, late = world(identities, branches, delta)
    parent = bound_manifest(reg, bound)
    if operation == "resolve_bound":
        target = bound[len(bound) // 2]
        assert profile.resolve(parent, target, reg).via == "bound"
        benchmark.pedantic(profile.resolve, args=(parent, target, reg), rounds=ROUNDS, warmup_rounds=ROUNDS // 10)
    elif operation == "resolve_new":
        probe = Manifest(parent.bindings)
        assert profile.resolve(probe, "tool:fresh", reg).via == "live"
        benchmark.pedantic(profile.resolve, setup=lambda: ((Manifest(parent.bindings), "tool:fresh", reg), {}),
                           rounds=ROUNDS, warmup_rounds=ROUNDS // 10)
    elif operation == "merge_validation":
        branch_list = forks(profile, reg, parent, branches, delta)
        decision = profile.admit_merge(parent, branch_list, reg)
        assert decision.admitted and decision.path == "delta", decision
        benchmark.pedantic(profile.admit_merge, args=(parent, branch_list, reg), rounds=ROUNDS,
                           warmup_rounds=ROUNDS // 10)
    elif operation == "merge_union":
        branch_list = forks(profile, reg, parent, branches, delta)
        assert validate_union([parent, *branch_list], reg)[0]
        benchmark.pedantic(validate_union, args=([parent, *branch_list], reg), rounds=ROUNDS,
                           warmup_rounds=ROUNDS // 10)
    else:
        raise ValueError(f"unknown operation {operation!r}")
    benchmark.extra_info.update({"operation": operation, "identities": identities, "branches": branches,
                                 "delta": delta, **percentiles(benchmark)})
