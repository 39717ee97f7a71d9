"""Checkers per family: pure functions from a history to a verdict with witnesses.

Each family's module (``analysis.checkers.<family>``) exports ``CHECKERS``,
a dict name -> checker (an object with ``name``, ``family`` and
``check(history) -> CheckResult``; see :mod:`vocabulary`).  A new family is
one line in :data:`FAMILY_MODULES`.  ``driftlab check`` picks the checkers of
the history's family (or the one named by ``--checker``) and keeps the worst
verdict.
"""
from __future__ import annotations

import importlib

from vocabulary import Checker

FAMILY_MODULES: dict[str, str] = {
    "revalidation": "analysis.revalidation.checkers",
    "resume": "analysis.resume.checkers",
    "isolation": "analysis.isolation.checkers",
}


def checkers(family: str) -> dict[str, Checker]:
    """The checkers of one family, by name ({} for a family with none)."""
    if family not in FAMILY_MODULES:
        return {}
    return dict(importlib.import_module(FAMILY_MODULES[family]).CHECKERS)


def all_checkers() -> dict[str, dict[str, Checker]]:
    return {family: checkers(family) for family in FAMILY_MODULES}
