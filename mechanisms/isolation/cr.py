"""``CR``, Compatible Read ⟨S0,C1,I1⟩: contracts checked, manifests inherited, no stability.

A resolution must satisfy the declared contracts with every bound version
(else a retained compatible version, else abort) and continuations resolve
inherited identities to the inherited version.  Without S1 two versions of
one identity are not a conflict, so merge admission lets two branches that
bound different versions of one identity through: CR admits merge skew
(paper Table 2), and a workflow re-reading an identity no contract pins sees
the new version (semantic read skew).
"""
from mechanisms.isolation.base import Profile
from vocabulary.isolation import NAMED_PROFILES


class CR(Profile):
    name = "CR"
    guarantees = NAMED_PROFILES["CR"]
