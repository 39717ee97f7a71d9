"""Mechanisms under test, by name; a user's own plugs in as ``package.module:Class``.

A new mechanism is one module plus one line in :data:`REVALIDATION`.
"""
from __future__ import annotations

import importlib

from mechanisms.base import Mechanism

REVALIDATION: dict[str, str] = {
    "NoCheck": "mechanisms.nocheck:NoCheck",
    "VersionAbort": "mechanisms.version_abort:VersionAbort",
    "FullScan": "mechanisms.full_scan:FullScan",
    "ATR": "mechanisms.atr:ATR",
}


class MechanismError(ValueError):
    """An unknown or unloadable mechanism; the message is one line."""


def resolve(name: str) -> type[Mechanism]:
    """A registered name (``ATR``) or a dotted path (``package.module:Class``) -> the class."""
    path = REVALIDATION.get(name, name)
    if ":" not in path:
        raise MechanismError(f"unknown mechanism {name!r} (known: {', '.join(REVALIDATION)}; or give package.module:Class)")
    module_name, _, attr = path.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise MechanismError(f"cannot load mechanism {name!r}: {exc}") from None
    if not (isinstance(cls, type) and callable(getattr(cls, "validate", None))):
        raise MechanismError(f"mechanism {name!r} is not a class with a validate(txn, store) method")
    return cls

