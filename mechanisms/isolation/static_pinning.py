"""``StaticPinning``: a closed lockfile taken when the workflow starts (paper §5.2 baseline).

The lockfile pins the live version of every identity the registry knows at
start, except opaque ones (nothing to pin: only live behaviour exists) and those marked ``late`` (discovered mid-run, e.g. a tool an
agent selects at step 7).  Every continuation inherits the lockfile; merges
are not checked.  In a closed world this prevents all four anomalies for
the deployments that land after the start; in the open world a
late-discovered resource resolves live with no contract check, so static
pinning fails the open-world discovery control (paper Table 3).  Pipeline
lockfiles and snapshots (the paper's [8], [24]) work this way.
"""
from __future__ import annotations

from typing import Sequence

from mechanisms.isolation.base import MergeDecision, Profile, Resolution
from vocabulary.isolation import Guarantees, Manifest, Registry


class StaticPinning(Profile):
    name = "StaticPinning"
    guarantees = Guarantees(False, False, False)  # it is none of the switches: a lockfile, closed at start

    def begin(self, registry: Registry) -> Manifest:
        lock = {x: registry.live[x] for x in sorted(registry.versions)
                if x not in registry.late and x not in registry.opaque and x in registry.live}
        return Manifest(lock, lock)

    def resolve(self, manifest: Manifest, identity: str, registry: Registry) -> Resolution:
        v = manifest.obligations.get(identity)
        if v is not None:
            return Resolution(v, "lockfile")
        live = registry.live.get(identity)
        if live is None:
            return Resolution(None, "refused", f"{identity} is not in the registry")
        manifest.bind(identity, live)
        return Resolution(live, "live")

    def inherit(self, manifest: Manifest, relation: str) -> Manifest:
        lock = manifest.obligations
        return Manifest(dict(lock), lock)

    def admit_merge(self, parent: Manifest, branches: Sequence[Manifest], registry: Registry) -> MergeDecision:
        merged = dict(parent.bindings)
        for b in branches:
            merged.update(b.bindings)
        return MergeDecision(True, merged, path="none")
