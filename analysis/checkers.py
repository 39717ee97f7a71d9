"""Checkers per family: pure functions from a history to a verdict with witnesses.

Each family's module (``analysis.checkers.<family>``) exports ``CHECKERS``,
a dict name -> checker (an object with ``name``, ``family`` and
``check(history) -> CheckResult``; see :mod:`vocabulary`).  A new family is
one line in :data:`FAMILY_MODULES`; its module also exports ``HISTORY``, the
family's declared history format (:mod:`vocabulary.schema`), which
``driftlab check`` validates every history against.  ``driftlab check`` picks the checkers of
the history's family (or the one named by ``--checker``) and keeps the worst
verdict.
"""
from __future__ import annotations

import importlib

from vocabulary import Checker
from vocabulary.schema import HistorySchema

FAMILY_MODULES: dict[str, str] = {
    "revalidation": "analysis.revalidation.checkers",
    "resume": "analysis.resume.checkers",
    "isolation": "analysis.isolation.checkers",
    "agent": "analysis.agent.checkers",
}


def checkers(family: str) -> dict[str, Checker]:
    """The checkers of one family, by name ({} for a family with none)."""
    if family not in FAMILY_MODULES:
        return {}
    return dict(importlib.import_module(FAMILY_MODULES[family]).CHECKERS)


def all_checkers() -> dict[str, dict[str, Checker]]:
    return {family: checkers(family) for family in FAMILY_MODULES}


def schemas() -> dict[str, HistorySchema]:
    """The declared history format of every family that declares one, by family."""
    out = {}
    for family, module in FAMILY_MODULES.items():
        schema = getattr(importlib.import_module(module), "HISTORY", None)
        if schema is not None:
            out[family] = schema
    return out
