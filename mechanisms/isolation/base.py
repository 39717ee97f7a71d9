"""The isolation profile: ⟨S, C, I⟩ as three independent switches over one resolution procedure (paper §3-§4).

``Profile.resolve`` is the paper's compatibility resolver with stability and
inheritance in front of it:

1. **I1** and the identity is an inherited obligation -> the inherited version;
2. **S1** and the identity is already bound -> the bound version;
3. otherwise the live alias (an opaque resource under S1 goes through the
   opaque policy: ``abort`` refuses it, ``capture`` binds the captured
   response and replays it, ``taint`` serves it live and taints the manifest);
4. **C1**: the candidate must satisfy the declared contracts with every
   version bound so far, and every version it requires of an identity not
   yet bound must still exist and agree with what the bound versions
   require of that identity (dependency closure); else the newest
   retained version that does; else the resolution is refused (abort).

``admit_merge`` is the continuation manager's merge admission: with **I0**
every merge is admitted; with I1 a merge is admitted only if the branch
manifests have an admissible common extension, where "conflicting
bindings" is profile-relative (S1: two versions of one identity conflict;
S0: they do not) -- see ``vocabulary.isolation``.  Contracts and closure are
checked whenever I1 holds; a tainted branch is refused.

Link to the trace predicates (the reviewers' request for a lemma): sticky
bindings make every resolution of a bound identity return the bound version
(no read skew); the C1 check runs against every binding the manifest holds,
inherited ones included, which is the checker's view (no compatibility
skew); inherited obligations are returned before anything else (no context
escape); merge admission under S1 and I1 is exactly the existence of an
admissible common extension (no merge skew).  ``tests/test_isolation_property.py``
checks this executably on random programs (it found the dependency-closure
check above missing; the fix is in ``compatible``).

Subclasses set ``name`` and ``guarantees``; a user's profile can override
any of the four protocol methods.  The hot path (a bound identity) is two
dict lookups, because the microbenchmark times it.
"""
from __future__ import annotations

from typing import ClassVar, NamedTuple, Sequence

from mechanisms.isolation.merge import validate_delta, validate_union
from vocabulary.isolation import Contract, Guarantees, Manifest, Registry, ref


class Resolution(NamedTuple):
    """What a step gets: a version (None if refused), how it was chosen, and why if refused.

    A named tuple, not a dataclass: it is built on the timed resolution path.
    """

    version: int | None
    via: str  # live | bound | inherited | retained | lockfile | captured | tainted | refused
    reason: str = ""
    checks: int = 0  # contract look-ups made (the cost the undeclared experiment reports)


class MergeDecision(NamedTuple):
    admitted: bool
    bindings: dict  # the bindings the merging workflow takes on (the branches' deltas, or the union); {} when refused
    reason: str = ""
    path: str = "none"  # none (I0) | delta | union


class Profile:
    name: ClassVar[str] = "Profile"
    guarantees: ClassVar[Guarantees] = Guarantees(False, False, False)

    def __init__(self, opaque_policy: str = "abort"):
        self.opaque_policy = opaque_policy

    # ------------------------------------------------------------ protocol
    def begin(self, registry: Registry) -> Manifest:
        return Manifest()

    def resolve(self, manifest: Manifest, identity: str, registry: Registry) -> Resolution:
        g = self.guarantees
        if g.inheritance:
            v = manifest.obligations.get(identity)
            if v is not None:
                manifest.bind(identity, v)
                return Resolution(v, "inherited")
        if g.stability:
            if identity in registry.opaque:
                return self.opaque(manifest, identity, registry)
            v = manifest.bindings.get(identity)
            if v is not None:
                return Resolution(v, "bound")
        live = registry.live.get(identity)
        if live is None:
            return Resolution(None, "refused", f"{identity} is not in the registry")
        if g.compatibility:
            return self.compatible(manifest, identity, live, registry)
        manifest.bind(identity, live)
        return Resolution(live, "live")

    def inherit(self, manifest: Manifest, relation: str) -> Manifest:
        return manifest.continuation(self.guarantees.inheritance)

    def admit_merge(self, parent: Manifest, branches: Sequence[Manifest], registry: Registry) -> MergeDecision:
        g = self.guarantees
        if not g.inheritance:
            merged = dict(parent.bindings)
            for b in branches:
                merged.update(b.bindings)
            return MergeDecision(True, merged, path="none")
        if any(b.taint for b in branches):
            return MergeDecision(False, {}, "a branch served an opaque resource under the taint policy", "union")
        if g.stability:
            out = validate_delta(parent.fp, parent.bindings, branches, registry)
            if out is not None:
                ok, delta, reason = out
                return MergeDecision(ok, delta if ok else {}, reason, "delta")
        ok, merged, reason = validate_union([parent, *branches], registry, g.stability)
        return MergeDecision(ok, merged if ok else {}, reason, "union")

    # ------------------------------------------------------------ parts
    def compatible(self, manifest: Manifest, identity: str, candidate: int, registry: Registry) -> Resolution:
        """C1: ``candidate`` if it satisfies the contracts with every bound version, else a retained one, else refuse."""
        contracts = registry.contracts
        bound = manifest.bindings
        broken = contracts.violation(bound, identity, candidate) or self.unavailable(identity, candidate, bound, registry)
        if broken is None:
            manifest.bind(identity, candidate)
            return Resolution(candidate, "live", checks=1)
        checks = 1
        for v in registry.retained(identity):
            if v == candidate:
                continue
            checks += 1
            if contracts.violation(bound, identity, v) is None and self.unavailable(identity, v, bound, registry) is None:
                manifest.bind(identity, v)
                return Resolution(v, "retained", checks=checks)
        return Resolution(None, "refused", f"{ref(identity, candidate)} would violate '{broken}' and no retained "
                                           f"version of {identity} satisfies the contracts", checks)

    @staticmethod
    def unavailable(identity: str, version: int, bound, registry: Registry) -> Contract | None:
        """Dependency closure: a requirement of ``identity@version`` on an unbound identity must still exist,
        and no bound version may require that identity at another version (the obligations the manifest
        already carries), or no admissible extension would remain."""
        contracts = registry.contracts
        for other, need in contracts.requirements.get((identity, version), ()):
            if other in bound:
                continue
            if not registry.exists(other, need):
                return Contract(identity, version, other, need)
            for subject, sv, wanted in contracts.dependents.get(other, ()):
                if wanted != need and subject != identity and bound.get(subject) == sv:
                    return Contract(subject, sv, other, wanted)
        return None

    def opaque(self, manifest: Manifest, identity: str, registry: Registry) -> Resolution:
        """S1 meets a resource that cannot be versioned: abort, capture-and-replay, or serve live and taint."""
        live = registry.live[identity]
        if self.opaque_policy == "abort":
            return Resolution(None, "refused", f"{identity} is opaque (cannot be versioned) and the policy is abort")
        if self.opaque_policy == "capture":
            captured = manifest.bindings.get(identity)
            if captured is not None:  # replay the captured response
                return Resolution(captured, "captured")
            manifest.bind(identity, live)  # the runtime captures the response; the manifest keeps it
            return Resolution(live, "captured")
        manifest.taint = True  # taint: serve live, every time, and mark the output
        return Resolution(live, "tainted")
