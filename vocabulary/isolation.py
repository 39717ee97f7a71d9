"""The semantic-isolation family's vocabulary: identities, versions, contracts, registry, manifests.

Semantic isolation (paper: "BEGIN AI TRANSACTION: Semantic Isolation for
Durable AI Workflows", arXiv 2608.05412) treats a **deployment** -- a new
version of a prompt, model, index, policy or tool published behind its
stable name -- as a concurrent semantic write against every active
workflow.  The isolation modules (its scenarios, faults, mechanisms, the
runtime in ``runners/isolation/workflow_runtime.py`` and the checkers) speak in
these names; nothing here imports another family's vocabulary.

- An **identity** is ``kind:name`` with kind one of ``prompt model index
  policy tool``; a **version** is a positive integer; ``model:embed@2`` is a
  **ref** (identity at version).  Versions are immutable: a deployment
  publishes a new one or moves the **live alias**; old versions are
  **retained** (except for *opaque* resources, which cannot be versioned:
  only their live behaviour is reachable).
- A **contract** ``index:docs@1 requires model:embed@1`` says: whenever the
  subject version is bound, the required identity must be bound at exactly
  the required version.  Contracts are *declared* by owners; C1 enforces
  them and never infers them (``mechanisms.isolation.contract_inference`` is
  the lab's extension that does).
- The **registry** holds identities, retained versions, live aliases,
  contracts, which identities are *late* (discovered mid-run, outside any
  lockfile taken at start) and which are *opaque*.
- The **semantic manifest** of a workflow maps identity -> bound version,
  plus the **obligations** it inherited (its parent's bindings at the time
  of the spawn).  It is checkpointed with the workflow (``to_json``) and
  passed to retries, resumes, children and forks.  For merge validation a
  branch keeps the version **fingerprint** of the parent manifest it was
  forked from and the **delta** of bindings it made since.
- The guarantees are three independent switches: **S1** stability (an
  identity resolves to one version for the whole workflow, across
  resumes), **C1** compatibility (a resolution satisfies the declared
  contracts with every version already bound; else a retained compatible
  version; else abort), **I1** inheritance (continuations inherit the
  manifest; a merge is admitted only if the branch manifests have an
  admissible common extension).  S0/C0/I0 are their absence.

**Admissible common extension** (the definition the paper's reviewers asked
for).  Let U be the union of the branch manifests of a merge (with the
parent's bindings they inherited).  A *common extension* of U is a manifest
E (a function: one version per identity) with U ⊆ E.  E is *admissible* iff

1. it is single-valued on U: no identity is bound to two versions in U;
2. it is **dependency-closed**: for every bound ``a@v`` and every contract
   ``a@v requires b@u``, E binds ``b`` (to some retained version of b);
3. it satisfies **every declared contract**: for every bound ``a@v`` with a
   contract ``a@v requires b@u``, E binds ``b`` at exactly ``u``.

Because contracts require exact versions, the smallest candidate is unique
(close U under the requirements); an admissible common extension exists iff
that closure is single-valued and every required version exists.  **Merge
skew** is a merge admitted when none exists.  Which admission checks a
*profile* applies is profile-relative (the reviewers' second point): a
profile with I0 admits every merge; with I1 and S1 it refuses two versions
of one identity and checks contracts and closure; with I1 and S0
(``CR``) two versions of one identity are not a conflict (S0 says one
identity may legitimately resolve to several versions), so CR admits merge
skew while still refusing contract violations.

Nothing here does I/O; the hot path (``Manifest.bind``, lookups) is plain
dicts, because the microbenchmarks time it.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from vocabulary.schema import ALWAYS, WHEN_OK, HistorySchema, Key, MetaKey, OpSpec, list_of, mapping_of, of_type

KINDS = ("prompt", "model", "index", "policy", "tool")
IDENTITY_RE = re.compile(r"^(prompt|model|index|policy|tool):[A-Za-z0-9_.\-]+$")
REF_RE = re.compile(r"^((?:prompt|model|index|policy|tool):[A-Za-z0-9_.\-]+)@([1-9][0-9]*)$")

Identity = str
"""``kind:name``, e.g. ``model:embed``."""

#: The four anomalies, in the paper's order (one checker each in analysis.isolation.checkers).
READ_SKEW = "semantic_read_skew"
COMPATIBILITY_SKEW = "compatibility_skew"
CONTEXT_ESCAPE = "context_escape"
MERGE_SKEW = "merge_skew"
ANOMALIES = (READ_SKEW, COMPATIBILITY_SKEW, CONTEXT_ESCAPE, MERGE_SKEW)

#: How a continuation relates to the workflow that spawned it.
RELATIONS = ("child", "fork", "retry")

#: What a profile does with a resource that cannot be versioned (opaque).
OPAQUE_POLICIES = ("abort", "capture", "taint")


class IsolationError(ValueError):
    """Malformed identity, ref or contract; the message is one line."""


def check_identity(text: str) -> Identity:
    if not isinstance(text, str) or not IDENTITY_RE.match(text):
        raise IsolationError(f"{text!r} is not an identity (expected kind:name with kind one of {', '.join(KINDS)})")
    return text


def parse_ref(text: str) -> tuple[Identity, int]:
    """``"model:embed@2"`` -> ``("model:embed", 2)``."""
    m = REF_RE.match(text.strip()) if isinstance(text, str) else None
    if not m:
        raise IsolationError(f"{text!r} is not a versioned ref (expected kind:name@N, e.g. model:embed@1)")
    return m.group(1), int(m.group(2))


def ref(identity: Identity, version: int) -> str:
    return f"{identity}@{version}"


@dataclass(frozen=True)
class Contract:
    """``subject@subject_version requires required@required_version``."""

    subject: Identity
    subject_version: int
    required: Identity
    required_version: int

    @classmethod
    def parse(cls, text: str) -> "Contract":
        left, sep, right = text.partition(" requires ")
        if not sep:
            raise IsolationError(f"{text!r} is not a contract (expected 'kind:a@N requires kind:b@M')")
        (s, sv), (r, rv) = parse_ref(left), parse_ref(right)
        if s == r:
            raise IsolationError(f"{text!r}: a contract relates two different identities")
        return cls(s, sv, r, rv)

    def __str__(self) -> str:
        return f"{ref(self.subject, self.subject_version)} requires {ref(self.required, self.required_version)}"


class Contracts:
    """Declared contracts, indexed for the checks a resolution and a merge make.

    ``requirements[(a, v)]`` -> ((b, u), ...) and ``dependents[b]`` -> ((a, v, u), ...):
    a new binding ``x@v`` is checked against its own requirements and against
    every bound subject that requires ``x``, in time proportional to the
    contracts that mention ``x``, not to the manifest's size.
    """

    __slots__ = ("all", "requirements", "dependents", "mentioned")

    def __init__(self, contracts: Iterable[Contract] = ()):
        self.all: tuple[Contract, ...] = tuple(dict.fromkeys(contracts))
        req: dict[tuple[Identity, int], list[tuple[Identity, int]]] = {}
        dep: dict[Identity, list[tuple[Identity, int, int]]] = {}
        for c in self.all:
            req.setdefault((c.subject, c.subject_version), []).append((c.required, c.required_version))
            dep.setdefault(c.required, []).append((c.subject, c.subject_version, c.required_version))
        self.requirements = {k: tuple(v) for k, v in req.items()}
        self.dependents = {k: tuple(v) for k, v in dep.items()}
        self.mentioned = frozenset(k for c in self.all for k in ((c.subject, c.subject_version),
                                                                   (c.required, c.required_version)))

    def __len__(self) -> int:
        return len(self.all)

    def __iter__(self):
        return iter(self.all)

    def violation(self, bound: Mapping[Identity, int], identity: Identity, version: int) -> Contract | None:
        """The first declared contract that binding ``identity@version`` beside ``bound`` violates (None: none)."""
        for other, need in self.requirements.get((identity, version), ()):
            have = bound.get(other)
            if have is not None and have != need and other != identity:
                return Contract(identity, version, other, need)
        for subject, sv, need in self.dependents.get(identity, ()):
            if need != version and subject != identity and bound.get(subject) == sv:
                return Contract(subject, sv, identity, need)
        return None

    def covers(self, identity: Identity, version: int) -> bool:
        """Whether any declared contract names ``identity@version`` (fail-closed admission asks this)."""
        return (identity, version) in self.mentioned


@dataclass
class Registry:
    """Identities, retained versions, live aliases and declared contracts; deployments move aliases.

    ``versions[x]`` lists the published versions (ascending, immutable);
    ``live[x]`` is the alias.  ``late`` identities are discovered mid-run
    (outside a lockfile taken at start); ``opaque`` identities cannot be
    versioned (only their live behaviour is reachable, nothing is retained).
    """

    versions: dict[Identity, list[int]]
    live: dict[Identity, int]
    contracts: Contracts = field(default_factory=Contracts)
    late: frozenset[Identity] = frozenset()
    opaque: frozenset[Identity] = frozenset()
    #: optional compatibility probe (a, v, b, u) -> True | False | None (unknown); contract inference uses it
    probe: Callable[[Identity, int, Identity, int], bool | None] | None = None

    def deploy(self, identity: Identity, version: int) -> int | None:
        """Publish ``version`` if new and make it live; returns the previous live version."""
        known = self.versions.setdefault(identity, [])
        if version not in known:
            known.append(version)
            known.sort()
        previous = self.live.get(identity)
        self.live[identity] = version
        return previous

    def retained(self, identity: Identity) -> list[int]:
        """Versions a resolution may fall back to, newest first (only the live one if opaque)."""
        if identity in self.opaque:
            return [self.live[identity]]
        return sorted(self.versions.get(identity, ()), reverse=True)

    def exists(self, identity: Identity, version: int) -> bool:
        return version in self.versions.get(identity, ()) and (identity not in self.opaque
                                                               or self.live.get(identity) == version)

    def copy(self) -> "Registry":
        return Registry({k: list(v) for k, v in self.versions.items()}, dict(self.live), self.contracts,
                        self.late, self.opaque, self.probe)


def binding_hash(identity: Identity, version: int) -> int:
    return hash((identity, version)) & 0xFFFFFFFFFFFFFFFF


class Manifest:
    """A workflow's semantic manifest: identity -> bound version, plus inherited obligations.

    ``bindings`` is every identity the workflow has bound (inherited ones
    included); ``obligations`` is what it inherited from its parent (read
    only); ``base_fp``/``delta`` serve merge validation: the fingerprint of the
    parent manifest the branch was forked from and the bindings made since.
    ``fp`` is an order-independent fingerprint (XOR of binding hashes) kept up
    to date in O(1) per binding.  ``taint`` marks a manifest that served an
    opaque resource under the ``taint`` policy.
    """

    __slots__ = ("bindings", "obligations", "delta", "base_fp", "fp", "taint")

    def __init__(self, bindings: Mapping[Identity, int] | None = None,
                 obligations: Mapping[Identity, int] | None = None, base_fp: int | None = None):
        self.bindings: dict[Identity, int] = dict(bindings or {})
        self.obligations: Mapping[Identity, int] = obligations if obligations is not None else {}
        self.delta: dict[Identity, int] = {}
        self.base_fp = base_fp
        fp = 0
        for x, v in self.bindings.items():
            fp ^= binding_hash(x, v)
        self.fp = fp
        self.taint = False

    def bind(self, identity: Identity, version: int) -> None:
        old = self.bindings.get(identity)
        if old == version:
            return
        if old is not None:
            self.fp ^= binding_hash(identity, old)
        self.fp ^= binding_hash(identity, version)
        self.bindings[identity] = version
        self.delta[identity] = version

    def continuation(self, inherit: bool) -> "Manifest":
        """The manifest a child, fork or retry starts with: the bindings as obligations (I1), or nothing (I0)."""
        if not inherit:
            return Manifest()
        frozen = dict(self.bindings)
        m = Manifest(frozen, frozen, base_fp=self.fp)
        m.taint = self.taint
        return m

    def to_json(self) -> str:
        """The checkpointed form (what survives a pause)."""
        return json.dumps({"bindings": self.bindings, "obligations": dict(self.obligations), "delta": self.delta,
                           "base": self.base_fp is not None, "taint": self.taint}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, base_fp: int | None = None) -> "Manifest":
        data = json.loads(text)
        m = cls(data["bindings"], data["obligations"])
        m.delta = dict(data["delta"])
        m.taint = bool(data["taint"])
        if data["base"]:
            ob = 0
            for x, v in m.obligations.items():
                ob ^= binding_hash(x, v)
            m.base_fp = ob
        return m


@dataclass(frozen=True)
class Guarantees:
    """⟨S, C, I⟩: stability, compatibility, inheritance, each on (1) or off (0)."""

    stability: bool
    compatibility: bool
    inheritance: bool

    @property
    def label(self) -> str:
        return f"S{int(self.stability)}C{int(self.compatibility)}I{int(self.inheritance)}"

    @classmethod
    def parse(cls, label: str) -> "Guarantees":
        m = re.fullmatch(r"S([01])C([01])I([01])", label)
        if not m:
            raise IsolationError(f"{label!r} is not a guarantee combination (expected S0C1I1 and the like)")
        return cls(*(g == "1" for g in m.groups()))


def all_combinations() -> list[Guarantees]:
    return [Guarantees(bool(s), bool(c), bool(i)) for s in (0, 1) for c in (0, 1) for i in (0, 1)]


#: The paper's named profiles (its Table 2 rows).
NAMED_PROFILES: dict[str, Guarantees] = {
    "SRC": Guarantees(False, False, False),
    "RSR": Guarantees(True, False, False),
    "CR": Guarantees(False, True, True),
    "SSI": Guarantees(True, True, True),
}


# --------------------------------------------------------------------- the history format (driftlab check)


def _contract(text) -> str | None:
    if not isinstance(text, str):
        return f"must be a contract string such as 'index:docs@1 requires model:embed@1' (got {text!r})"
    try:
        Contract.parse(text)
    except IsolationError as exc:
        return str(exc)
    return None


_CONTRACTS = list_of(_contract, "contracts ('kind:a@N requires kind:b@M')")
_VERSIONS = mapping_of(list_of(of_type("integer"), "integers"), "identity -> list of retained versions")


def _group_meta(v) -> str | None:
    if not isinstance(v, dict):
        return f"must be an object with contracts and versions (got {v!r})"
    for name, check in (("contracts", _CONTRACTS), ("versions", _VERSIONS)):
        if name in v:
            problem = check(v[name])
            if problem:
                return f"{name}: {problem}"
    return None


_WORKFLOW = Key("workflow", "string", doc="the workflow (default: the actor)")
HISTORY = HistorySchema(
    "isolation",
    operations=(
        OpSpec("start", "a root workflow starts", (_WORKFLOW,)),
        OpSpec("resolve", "a step resolves an identity through the mechanism (fail: refused, binds nothing)",
               (_WORKFLOW, Key("identity", "string", ALWAYS), Key("version", "integer", WHEN_OK),
                Key("via", "string"), Key("reason", "string"))),
        OpSpec("pause", "the runtime checkpoints the workflow's manifest and drops it",
               (_WORKFLOW, Key("checkpoint_bytes", "integer"))),
        OpSpec("resume", "the workflow continues from its checkpoint (same workflow id)", (_WORKFLOW,)),
        OpSpec("spawn", "a continuation (child, fork or retry) starts with the spawner's view",
               (_WORKFLOW, Key("child", "string", WHEN_OK), Key("relation", "string", choices=RELATIONS))),
        OpSpec("merge", "the workflow merges its branches (fail: refused)",
               (_WORKFLOW, Key("branches", "list", ALWAYS, items="string"), Key("path", "string"), Key("reason", "string"))),
        OpSpec("end", "the workflow ends", (_WORKFLOW,)),
        OpSpec("deploy", "a deployment makes a version of an identity live",
               (Key("identity", "string", ALWAYS), Key("version", "integer", WHEN_OK),
                Key("previous", "integer", nullable=True))),
        OpSpec("query", "an application step (a retrieval query); the checkers ignore it"),
        OpSpec("fetch", "an application step (a document fetch); the checkers ignore it"),
        OpSpec("embed", "an application step (an embedding call); the checkers ignore it"),
    ),
    meta=(
        MetaKey("contracts", "the declared contracts the checkers judge by", _CONTRACTS),
        MetaKey("versions", "identity -> retained versions", _VERSIONS),
        MetaKey("groups", "per execution (`value.group`): its own `contracts` and `versions`",
                mapping_of(_group_meta, "group -> {contracts, versions}")),
    ),
    partition=("group",),
    separable=True,
    common=(Key("group", "key", doc="the execution"),),
)
