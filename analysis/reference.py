"""The papers' published numbers, read from ``data/reference/*.toml``.

They are used in exactly one place: the "paper" column of the report.
"""
from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "data" / "reference"


@cache
def reference(artifact: str) -> dict:
    """The published values for one artifact ({} if the papers publish none)."""
    for path in sorted(REFERENCE_DIR.glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        if artifact in data:
            return data[artifact]
    return {}


def paper_value(artifact: str, **match) -> dict | None:
    """The first published value whose keys match (e.g. mechanism="ATR", metric="false_allows")."""
    for row in reference(artifact).get("values", []):
        if all(row.get(k) == v for k, v in match.items()):
            return row
    return None
