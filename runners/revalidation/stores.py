"""The in-memory target store: versioned business state with a change log and CAS commit.

This is the target system of the controlled experiment (ATR paper §5.1): a
dict of fields, a version per field and per object, an append-only change
log, and ``commit(tokens, effect)``, which applies the effect only if every
token still names the current version (target-side compare-and-set).  The
SQLite and Postgres stores of the durable and race experiments implement the
same :class:`vocabulary.revalidation.Store` protocol over real transactions.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from vocabulary.revalidation import Ref


class MemoryStore:
    __slots__ = ("values", "versions", "log")

    def __init__(self, state: Mapping[Ref, Any]):
        self.values: dict[Ref, Any] = dict(state)
        self.versions: dict[str, int] = dict.fromkeys(self.values, 0)
        self.versions.update(dict.fromkeys([r.partition(".")[0] for r in self.values], 0))
        self.log: list[Ref] = []

    def read(self, ref: Ref) -> tuple[Any, int]:
        return self.values[ref], self.versions[ref]

    def value(self, ref: Ref) -> Any:
        return self.values[ref]

    def version(self, key: str) -> int:
        return self.versions[key]

    @property
    def seq(self) -> int:
        return len(self.log)

    def changes_since(self, seq: int) -> tuple[list[Ref], int]:
        return self.log[seq:], len(self.log)

    def write(self, changes: Mapping[Ref, Any]) -> None:
        """A second actor's write (or an effect): new values, bumped versions, logged."""
        for ref, value in changes.items():
            self.values[ref] = value
            self.versions[ref] += 1
            self.versions[ref.partition(".")[0]] += 1
            self.log.append(ref)

    def commit(self, tokens: Iterable[tuple[str, int]], effect: Mapping[Ref, Any]) -> bool:
        versions = self.versions
        for key, version in tokens:
            if versions[key] != version:
                return False
        self.write(effect)
        return True
