"""Layer 3, semantic pinning: a run sees one version of each aliased resource, compatible and inherited.

Serves "BEGIN AI TRANSACTION" (SemIso, arXiv 2608.05412), Semantic Snapshot
Isolation (SSI): prompts, models, indexes, policies and tools are redeployed
behind stable aliases (``prompt:refund``, ``model:chat``) while a workflow is
parked.  Resolving the alias live at each step mixes versions within one run.
SSI's four anomalies and what prevents each here:

- **semantic read skew** (one alias, two versions in one run): the first
  resolution *binds* the alias in the run's **manifest**; every later one
  returns the bound version, across pauses, because the manifest is a channel of
  the graph state and so is stored in every checkpoint;
- **compatibility skew** (a version that contradicts a declared contract such
  as ``index:docs@1 requires model:embed@1``): contracts are checked at the
  first binding against every version bound so far (falling back to the newest
  retained version that satisfies them, else :class:`ContractViolation`);
- **context escape** (a subgraph resolving live instead of inheriting): a
  subgraph whose state carries the manifest channel gets the parent's bindings
  from LangGraph itself; a node inside a subgraph whose state does *not* carry
  it gets :class:`PinsNotInherited` instead of a silent live resolution;
- **merge skew** (parallel branches bound different versions): the manifest
  channel's reducer is the fan-in check: two versions of one alias raise
  :class:`PinConflict`, a merged manifest that breaks a contract raises
  :class:`ContractViolation`.

Adoption: declare ``pins: Manifest`` in the state (``Manifest`` is
``Annotated[dict, merge]``, built by :meth:`Pins.channel`), then inside a node
``b = pins.bind(state)``, ``b.resolve("prompt:refund").value``, and return
``b.update()`` with the node's other updates.  What it trades away: a dict
lookup per resolution of a bound alias, a contract check per first binding and
per merge; safety holds over declared contracts only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Iterable, Mapping, NamedTuple

from driftlab_guard.errors import ContractViolation, PinConflict, PinsNotInherited

_REF = re.compile(r"^\s*(\S+)@(\d+)\s*$")


def parse_ref(text: str) -> tuple[str, int]:
    """``"model:embed@1"`` -> ``("model:embed", 1)``."""
    m = _REF.match(text)
    if not m:
        raise ValueError(f"{text!r}: a resource version is written alias@version, e.g. model:embed@1")
    return m.group(1), int(m.group(2))


@dataclass(frozen=True)
class Contract:
    """``subject@version requires other@needed``."""

    subject: str
    version: int
    other: str
    needed: int

    @classmethod
    def parse(cls, text: str) -> "Contract":
        left, sep, right = text.partition(" requires ")
        if not sep:
            raise ValueError(f"{text!r}: a contract is written 'alias@v requires other@u'")
        return cls(*parse_ref(left), *parse_ref(right))

    def __str__(self) -> str:
        return f"{self.subject}@{self.version} requires {self.other}@{self.needed}"


def violation(bindings: Mapping[str, int], contracts: Iterable[Contract]) -> Contract | None:
    """The first contract the bindings break (both sides bound, the other at another version), or None."""
    for c in contracts:
        if bindings.get(c.subject) == c.version and c.other in bindings and bindings[c.other] != c.needed:
            return c
    return None


class Resources:
    """The deployed versions behind each alias, which one is live, and the declared contracts.

    An in-memory registry; subclass it (override :meth:`live`, :meth:`get`,
    :meth:`retained`) to read a real deployment store.
    """

    def __init__(self, contracts: Iterable[str | Contract] = ()):
        self.versions: dict[str, dict[int, Any]] = {}
        self.live_versions: dict[str, int] = {}
        self.contracts: list[Contract] = []
        for c in contracts:
            self.require(c)

    def deploy(self, alias: str, version: int, value: Any = None, *, live: bool = True) -> None:
        self.versions.setdefault(alias, {})[int(version)] = value
        if live:
            self.live_versions[alias] = int(version)

    def retire(self, alias: str, version: int) -> None:
        self.versions.get(alias, {}).pop(int(version), None)

    def require(self, contract: str | Contract) -> Contract:
        c = Contract.parse(contract) if isinstance(contract, str) else contract
        self.contracts.append(c)
        return c

    def live(self, alias: str) -> int | None:
        return self.live_versions.get(alias)

    def retained(self, alias: str) -> list[int]:
        """Versions still deployed, newest first."""
        return sorted(self.versions.get(alias, {}), reverse=True)

    def get(self, alias: str, version: int) -> Any:
        try:
            return self.versions[alias][version]
        except KeyError:
            raise ContractViolation(f"{alias}@{version} is pinned by this run but no longer deployed") from None


class Resolved(NamedTuple):
    alias: str
    version: int
    value: Any
    via: str  # pinned (bound earlier in the run) | live | retained (live broke a contract)


@dataclass
class Binding:
    """The manifest of one node's run: the state's bindings plus the ones this node adds."""

    pins: "Pins"
    bound: dict[str, int]
    new: dict[str, int] = field(default_factory=dict)

    def resolve(self, alias: str) -> Resolved:
        """The pinned version if the run bound ``alias``; else the live one (or the newest retained one) that
        satisfies the contracts with everything bound, which is then pinned."""
        resources = self.pins.resources
        v = self.bound.get(alias)
        if v is not None:
            return Resolved(alias, v, resources.get(alias, v), "pinned")
        live = resources.live(alias)
        candidates = ([live] if live is not None else []) + [u for u in resources.retained(alias) if u != live]
        broken = None
        for u in candidates:
            broken = self._breaks(alias, u)
            if broken is None:
                self.bound[alias] = self.new[alias] = u
                return Resolved(alias, u, resources.get(alias, u), "live" if u == live else "retained")
        if not candidates:
            raise ContractViolation(f"{alias} has no deployed version")
        raise ContractViolation(f"{alias}@{live} would break '{broken}' and no retained version of {alias} "
                                f"satisfies the contracts with {_show(self.bound)}")

    def _breaks(self, alias: str, version: int) -> Contract | None:
        resources = self.pins.resources
        trial = {**self.bound, alias: version}
        broken = violation(trial, resources.contracts)
        if broken is not None:
            return broken
        for c in resources.contracts:  # closure: what it requires of an unbound alias must still be deployed
            if c.subject == alias and c.version == version and c.other not in trial \
                    and c.needed not in resources.retained(c.other):
                return c
        return None

    def update(self) -> dict[str, dict[str, int]]:
        """The state update that pins what this node bound (return it from the node)."""
        return {self.pins.key: dict(self.new)} if self.new else {}


class Pins:
    """Resolution of aliased resources through the run's manifest (module docstring)."""

    def __init__(self, resources: Resources, key: str = "pins"):
        self.resources = resources
        self.key = key

    def merge(self, left: Mapping[str, int] | None, right: Mapping[str, int] | None) -> dict[str, int]:
        """The manifest channel's reducer: every write and every fan-in goes through it."""
        merged = dict(left or {})
        for alias, v in (right or {}).items():
            have = merged.get(alias)
            if have is not None and have != v:
                raise PinConflict(f"{alias} is pinned at @{have} in this run and a branch or node brings @{v}")
            merged[alias] = v
        broken = violation(merged, self.resources.contracts)
        if broken is not None:
            raise ContractViolation(f"merging {_show(right or {})} into {_show(left or {})} breaks '{broken}'")
        return merged

    def channel(self) -> Any:
        """The state annotation of the manifest: ``pins: pins_guard.channel()`` in a TypedDict."""
        return Annotated[dict, self.merge]

    def bind(self, state: Any) -> Binding:
        """The manifest a node resolves through (call it inside the node, with the node's state)."""
        bound = state.get(self.key) if isinstance(state, Mapping) else getattr(state, self.key, None)
        if bound is None and _in_subgraph():
            raise PinsNotInherited(f"a node inside a subgraph resolves resources but its state has no {self.key!r} "
                                   f"channel: declare it in the subgraph's state so it inherits the parent's pins")
        return Binding(self, dict(bound or {}))


def _in_subgraph() -> bool:
    """True inside a node of a subgraph (LangGraph's namespace of the running task has a parent)."""
    try:
        from langgraph.config import get_config

        ns = get_config().get("configurable", {}).get("checkpoint_ns", "") or ""
    except RuntimeError:  # not inside a LangGraph run
        return False
    return "|" in ns


def _show(bindings: Mapping[str, int]) -> str:
    return ", ".join(f"{a}@{v}" for a, v in sorted(bindings.items())) or "nothing"
