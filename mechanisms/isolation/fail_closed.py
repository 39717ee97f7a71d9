"""``SSI+fail_closed``: SSI plus fail-closed admission for resources no declared contract covers.

The reviewers' request (b): C1 evaluates only declared contracts, so a
resource version that no contract mentions is admitted unchecked.  This
policy refuses that: a resolution whose version no declared contract covers
is re-bound to the newest retained version that one covers, else refused.
What it costs: it also refuses resources that are fine but undeclared (the
omitted-contract run refuses every execution).  What it misses: a *stale*
contract still covers the version it no longer describes.
"""
from __future__ import annotations

from mechanisms.isolation.base import Resolution
from mechanisms.isolation.ssi import SSI
from vocabulary.isolation import Manifest, Registry, ref


class FailClosedSSI(SSI):
    name = "SSI+fail_closed"

    def compatible(self, manifest: Manifest, identity: str, candidate: int, registry: Registry) -> Resolution:
        covers = registry.contracts.covers
        if covers(identity, candidate):
            return super().compatible(manifest, identity, candidate, registry)
        checks = 1
        for v in registry.retained(identity):
            checks += 1
            if v != candidate and covers(identity, v):
                r = super().compatible(manifest, identity, v, registry)
                if r.version is not None:
                    return Resolution(r.version, "retained", checks=checks + r.checks)
        return Resolution(None, "refused", f"fail-closed: no declared contract covers {ref(identity, candidate)} "
                                           f"or any retained version of {identity}", checks)
