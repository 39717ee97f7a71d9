"""``SRC``, Semantic Read Committed ⟨S0,C0,I0⟩: live aliases, the default of today's runtimes.

Every resolution reads the live alias; nothing is inherited; every merge is
admitted.  The paper's Table 2 and Table 3: it admits all four anomalies.
"""
from mechanisms.isolation.base import Profile
from vocabulary.isolation import NAMED_PROFILES


class SRC(Profile):
    name = "SRC"
    guarantees = NAMED_PROFILES["SRC"]
