"""The guard's semantic-pinning layer for the agent: an SSI manifest in the checkpoint (S1, C1, I1).

Serves the SemIso paper ("BEGIN AI TRANSACTION", arXiv 2608.05412) inside
issue 15's agent.  A resource behind an alias (``prompt:*``, ``model:*``,
``policy:*``) is resolved through the layer: the first resolution binds the
live version into the run's **manifest** (a plain dict kept in the LangGraph
state, so it is checkpointed with the run and survives resumes and crashes);
every later resolution returns the bound version (S1 stability).  The first
binding is checked against the declared contracts and the versions already
bound (C1): an incompatible live version is replaced by a compatible version
the registry retains, else :class:`Incompatible` is raised.  A subgraph gets
:func:`inherit` of its parent's manifest (I1), and :func:`admit_merge`
admits a fan-in only if the branch manifests agree and satisfy the contracts.

Pure: the caller reads the live version and records what was resolved.
``inherit_to_subgraph=False`` plants a bug for the tests (a manifest not
inherited by a subgraph: the child resolves live, a context escape).
"""
from __future__ import annotations

from typing import Iterable, Mapping


class Incompatible(RuntimeError):
    """No version of an identity is compatible with the manifest under the declared contracts."""


def _parse(c: str) -> tuple[str, int, str, int]:
    left, _, right = c.partition(" requires ")
    a, av = left.strip().rsplit("@", 1)
    b, bv = right.strip().rsplit("@", 1)
    return a, int(av), b, int(bv)


class Pinning:
    """Resolve identities through a manifest, checking contracts at first binding."""

    def __init__(self, contracts: Iterable[str], versions: Mapping[str, Iterable[int]], *, inherit_to_subgraph=True):
        self.contracts = [_parse(c) for c in contracts]
        self.versions = {x: tuple(vs) for x, vs in versions.items()}
        self.inherit_to_subgraph = inherit_to_subgraph

    def compatible(self, manifest: Mapping[str, int], identity: str, version: int) -> bool:
        for a, av, b, bv in self.contracts:
            if a == identity and av == version and b in manifest and manifest[b] != bv:
                return False
            if b == identity and a in manifest and manifest[a] == av and bv != version:
                return False
        return True

    def resolve(self, manifest: Mapping[str, int], identity: str, live: int) -> tuple[int, dict[str, int]]:
        """(version, new manifest): the bound version, or the live one bound now (a compatible one if it is not)."""
        if identity in manifest:
            return int(manifest[identity]), dict(manifest)
        candidates = [live] + sorted((v for v in self.versions.get(identity, ()) if v != live), reverse=True)
        for v in candidates:
            if self.compatible(manifest, identity, v):
                return v, {**manifest, identity: v}
        raise Incompatible(f"no version of {identity} is compatible with {dict(manifest)}")

    def inherit(self, manifest: Mapping[str, int]) -> dict[str, int]:
        """The manifest a subgraph (child, retry, fork) starts with."""
        return dict(manifest) if self.inherit_to_subgraph else {}

    def admit_merge(self, parent: Mapping[str, int], branches: Iterable[Mapping[str, int]]) -> dict[str, int]:
        """The merged manifest of a fan-in, or Incompatible if the branches have no admissible common extension."""
        merged = dict(parent)
        for b in branches:
            for x, v in b.items():
                if merged.get(x, v) != v:
                    raise Incompatible(f"branches bind {x}@{merged[x]} and {x}@{v}")
                merged[x] = v
        for x, v in merged.items():
            if not self.compatible({k: u for k, u in merged.items() if k != x}, x, v):
                raise Incompatible(f"{x}@{v} violates a declared contract with {merged}")
        return merged
