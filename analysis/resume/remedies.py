"""What a user of each framework must add to resume exactly once, and whether driftlab's guard helps (issue 29).

Read from ``data/remedies.toml`` (keyed by a row's ``framework``); the
frameworks' findings print a framework's entry under a row the run found not
safe.  The measured answer is always the run's own: this is the advice beside it.
"""
from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

REMEDIES = Path(__file__).resolve().parents[2] / "data" / "remedies.toml"


@cache
def remedies() -> dict[str, dict[str, str]]:
    return tomllib.loads(REMEDIES.read_text(encoding="utf-8"))


def remedy(framework: str) -> str:
    """One sentence pair for a not-safe row of ``framework`` ("" when none is written for it)."""
    r = remedies().get(framework)
    if not r:
        return ""
    return f"To resume exactly once, add {r['add'].rstrip('.')}. The lab's guard: {r['guard'].rstrip('.')}."
