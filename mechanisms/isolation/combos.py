"""All eight ⟨S,C,I⟩ combinations as mechanisms, named by label (``S0C0I0`` ... ``S1C1I1``).

The guarantees are independent switches (paper §3), so every combination
runs; the named profiles are four of them.  Each class here is
:class:`~mechanisms.isolation.base.Profile` with one ``guarantees`` value.
"""
from mechanisms.isolation.base import Profile
from vocabulary.isolation import all_combinations

for _g in all_combinations():
    globals()[_g.label] = type(_g.label, (Profile,), {"name": _g.label, "guarantees": _g,
                                                      "__module__": __name__,
                                                      "__doc__": f"The profile {_g.label}."})
del _g
