"""The isolation family's mechanisms: the profiles a workflow runtime consults (paper §3-§4).

Protocol (``mechanisms.Family("isolation", ...)``): a mechanism is a class with

- ``begin(registry) -> Manifest``: the manifest a new root workflow starts with;
- ``resolve(manifest, identity, registry) -> Resolution``: the version a step
  gets for an identity (and the binding it records), or a refusal;
- ``inherit(manifest, relation) -> Manifest``: what a child, fork or retry starts with;
- ``admit_merge(parent, branches, registry) -> MergeDecision``: admit or refuse a merge.

The named profiles ``SRC`` ⟨S0,C0,I0⟩, ``RSR`` ⟨S1,C0,I0⟩, ``CR`` ⟨S0,C1,I1⟩
and ``SSI`` ⟨S1,C1,I1⟩, all eight combinations by label (``S0C1I0`` ...),
``StaticPinning`` (a closed lockfile at start), ``SSI+capture`` and
``SSI+taint`` (the opaque-resource policies; ``SSI`` aborts), and two admission policies
on top of SSI for undeclared contracts (``SSI+fail_closed``,
``SSI+inference``).  A user's own profile plugs in as ``package.module:Class``
(subclass :class:`mechanisms.isolation.base.Profile` and set ``guarantees``,
or implement the four methods).
"""
from __future__ import annotations

REGISTRY: dict[str, str] = {
    "SRC": "mechanisms.isolation.src:SRC",
    "RSR": "mechanisms.isolation.rsr:RSR",
    "CR": "mechanisms.isolation.cr:CR",
    "SSI": "mechanisms.isolation.ssi:SSI",
    "StaticPinning": "mechanisms.isolation.static_pinning:StaticPinning",
    "SSI+fail_closed": "mechanisms.isolation.fail_closed:FailClosedSSI",
    "SSI+inference": "mechanisms.isolation.contract_inference:InferenceSSI",
    "SSI+capture": "mechanisms.isolation.opaque:CaptureSSI",
    "SSI+taint": "mechanisms.isolation.opaque:TaintSSI",
    **{f"S{s}C{c}I{i}": f"mechanisms.isolation.combos:S{s}C{c}I{i}" for s in (0, 1) for c in (0, 1) for i in (0, 1)},
}

#: the protocol's methods (a class with these is an isolation mechanism)
METHODS = ("begin", "resolve", "inherit", "admit_merge")
PROTOCOL = "begin(registry), resolve(manifest, identity, registry), inherit(manifest, relation), admit_merge(parent, branches, registry)"
