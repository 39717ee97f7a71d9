"""``SSI+inference``: SSI plus contract inference by probing, e.g. canary embeddings (reviewers' request).

Declared contracts can be omitted or stale.  This policy asks the
registry's *probe* (``Registry.probe(a, v, b, u) -> True | False | None``)
about every pair the new binding forms with a bound version; the retrieval
world's probe embeds a fixed set of canary texts with the candidate model
and compares them with the canary vectors stored beside the index version
when it was built: a change of embedding space behind an unchanged
dimension shows up as a low cosine.  A pair the probe calls incompatible is
treated like a violated contract: a retained version that passes, else
refuse.  What it costs: the probes' time on every new binding (the
undeclared experiment's ``overhead_us``), and it sees only what its probes
measure.
"""
from __future__ import annotations

from mechanisms.isolation.base import Resolution
from mechanisms.isolation.ssi import SSI
from vocabulary.isolation import Manifest, Registry, ref


class InferenceSSI(SSI):
    name = "SSI+inference"

    def compatible(self, manifest: Manifest, identity: str, candidate: int, registry: Registry) -> Resolution:
        probe = registry.probe
        if probe is None:
            return super().compatible(manifest, identity, candidate, registry)
        tried = 0
        for v in [candidate] + [r for r in registry.retained(identity) if r != candidate]:
            tried += 1
            if any(probe(identity, v, other, u) is False for other, u in manifest.bindings.items() if other != identity):
                continue
            r = super().compatible(manifest, identity, v, registry)
            if r.version is not None:
                return Resolution(r.version, r.via if v == candidate else "retained", checks=tried + r.checks)
        return Resolution(None, "refused", f"inference: no version of {identity} passes the probes beside the bound "
                                           f"versions (candidate {ref(identity, candidate)})", tried)
