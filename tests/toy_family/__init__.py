"""A tiny test-only family, "toy": proof that a family plugs in without editing any revalidation module.

One vocabulary (a coin flip), one mechanism protocol (``flip(seed) -> str``),
one mechanism, one checker, one experiment with one artifact, one scenario
file.  ``register(monkeypatch)`` adds each to its registry for one test.
"""
