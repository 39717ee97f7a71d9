"""Small history builders for the unit tests (one line per operation, like a Hermitage interleaving)."""
from __future__ import annotations

from vocabulary import History, Operation


def history(family: str, rows, meta=None) -> History:
    """``rows``: (actor, name, status, value) or (actor, name, status, value, start, end); indices in order."""
    ops = []
    for i, r in enumerate(rows):
        actor, name, status, value = r[:4]
        start, end = (r[4], r[5]) if len(r) > 4 else (float(i), None if status == "indeterminate" else float(i) + 0.5)
        ops.append(Operation(i, actor, name, status, start, end, dict(value)))
    return History(family, tuple(ops), dict(meta or {}))
