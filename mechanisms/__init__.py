"""Mechanisms under test, per family; a user's own plugs in as ``package.module:Class``.

Each family has a registry (name -> ``module:Class``) and a protocol: the
methods a class must have to be a mechanism of that family.

- revalidation: ``validate(txn, store) -> Validation`` (NoCheck, VersionAbort, FullScan, ATR)
- isolation: the isolation profiles (SRC, RSR, CR, SSI, StaticPinning, ...), see ``mechanisms.isolation``
- resume: the durable runtimes (naive, sequencer, LangGraph adapters), see ``mechanisms.resume``

A new mechanism is one module plus one line in its family's registry; a new
family is one :class:`Family` line in :data:`FAMILIES`.  ``--mechanisms``
applies to the experiments of the families whose protocol a mechanism
implements; a name that fits none is refused.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

@dataclass(frozen=True)
class Family:
    name: str
    registry: dict[str, str]  # mechanism name -> "package.module:Class"
    methods: tuple[str, ...]  # the family's protocol: a class with these methods is one of its mechanisms
    protocol: str  # the protocol in one line, for messages and `driftlab list`


def _registry(package: str) -> dict[str, str]:
    """The ``REGISTRY`` (name -> ``module:Class``) of one family's mechanism package."""
    return importlib.import_module(package).REGISTRY


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("revalidation", _registry("mechanisms.revalidation"), ("validate",),
           "validate(txn, store) -> Validation (mechanisms/revalidation/base.py)"),
    Family("isolation", _registry("mechanisms.isolation"), ("begin", "resolve", "inherit", "admit_merge"),
           "begin(registry), resolve(manifest, identity, registry), inherit(manifest, relation), "
           "admit_merge(parent, branches, registry) (mechanisms/isolation/base.py)"),
    Family("resume", _registry("mechanisms.resume"), ("start", "resume", "fork", "recover", "checkpoints", "state"),
           "DurableRuntime(backend, graph, hooks): start/resume/fork/recover/checkpoints/state -> Status "
           "(mechanisms/resume/base.py)"),
    Family("agent", _registry("mechanisms.agent"), ("saver_class", "ledger_class", "premises", "subgraph_manifest"),
           "Stack(name): saver_class(kind), ledger_class(), premises(scenario), subgraph_manifest(manifest) "
           "(mechanisms/agent/stacks.py)"),
)}


class MechanismError(ValueError):
    """An unknown or unloadable mechanism; the message is one line."""


def load(path: str, shown: str) -> type:
    """Import ``package.module:Class`` by its dotted path alone; every failure is one line."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise MechanismError(f"mechanism {shown!r}: give a registered name or package.module:Class")
    try:
        module = _import(module_name)
    except SyntaxError as exc:
        raise MechanismError(f"cannot load mechanism {shown!r}: syntax error in {exc.filename}, line {exc.lineno}: {exc.msg}") from None
    except Exception as exc:  # noqa: BLE001 - a plug-in may raise anything on import; report it in one line
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise MechanismError(f"cannot load mechanism {shown!r}: importing {module_name} raised {type(exc).__name__}"
                             + (f": {first}" if first else "")) from None
    cls = getattr(module, attr, None)
    if not isinstance(cls, type):
        raise MechanismError(f"cannot load mechanism {shown!r}: {module_name} has no class {attr!r}")
    return cls


def _import(module_name: str):
    """Import by dotted path; a plug-in in the working folder is found there, after every installed module.

    The working folder is appended to the *end* of ``sys.path`` only when the
    plug-in's top-level module is found nowhere else, so a stray file in it
    (``multiprocess.py``, say) can never shadow a module the lab imports.
    """
    import os
    import sys

    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = module_name.split(".")[0]
        cwd = os.getcwd()
        if exc.name != top or cwd in sys.path:
            raise
        sys.path.append(cwd)
        return importlib.import_module(module_name)


def families_of(cls: type) -> list[str]:
    """The families whose protocol ``cls`` implements."""
    return [f.name for f in FAMILIES.values() if all(callable(getattr(cls, m, None)) for m in f.methods)]


def resolve(name: str, family: str = "revalidation") -> type:
    """A registered name of ``family`` or a dotted path -> the class, checked against the family's protocol."""
    fam = FAMILIES[family]
    if name in fam.registry:
        return load(fam.registry[name], name)
    if ":" not in name:
        known = ", ".join(f"{n} ({f.name})" for f in FAMILIES.values() for n in f.registry)
        raise MechanismError(f"unknown mechanism {name!r} (known: {known}; or give package.module:Class)")
    cls = load(name, name)
    if family not in families_of(cls):
        raise MechanismError(f"mechanism {name!r} is not a {family} mechanism: it needs {fam.protocol}")
    return cls


def family_of_name(name: str) -> list[str]:
    """The families a mechanism name (registered or dotted) belongs to; error if none."""
    registered = [f.name for f in FAMILIES.values() if name in f.registry]
    if registered:
        return registered
    if ":" not in name:
        known = ", ".join(f"{n} ({f.name})" for f in FAMILIES.values() for n in f.registry)
        raise MechanismError(f"unknown mechanism {name!r} (known: {known}; or give package.module:Class)")
    fams = families_of(load(name, name))
    if not fams:
        protocols = "; ".join(f"{f.name}: {f.protocol}" for f in FAMILIES.values())
        raise MechanismError(f"mechanism {name!r} implements no family's protocol ({protocols})")
    return fams
