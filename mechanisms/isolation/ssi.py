"""``SSI``, Semantic Snapshot Isolation ⟨S1,C1,I1⟩: one stable, compatible, inherited semantic cut.

Sticky bindings checkpointed in the manifest, contract checks against every
bound version (falling back to a retained compatible version), inheritance
by every continuation, and merge admission only over an admissible common
extension (validated on the branches' deltas and the parent's fingerprint).
By construction it prevents all four anomalies *over declared contracts*
(paper Table 2/3; the reviewers' point that this is conformance, not
discovery, and the undeclared-contract experiment shows the limit).
"""
from mechanisms.isolation.base import Profile
from vocabulary.isolation import NAMED_PROFILES


class SSI(Profile):
    name = "SSI"
    guarantees = NAMED_PROFILES["SSI"]
