"""``RSR``, Repeatable Semantic Read ⟨S1,C0,I0⟩: sticky bindings per workflow, nothing more.

An identity resolves to the version the workflow first bound, across pauses
and resumes (the manifest is in the checkpoint).  Contracts are not checked
and continuations start afresh, so compatibility skew, context escape and
merge skew remain (paper Table 2).
"""
from mechanisms.isolation.base import Profile
from vocabulary.isolation import NAMED_PROFILES


class RSR(Profile):
    name = "RSR"
    guarantees = NAMED_PROFILES["RSR"]
