"""The literal-interleaving language, Hermitage-style: steps tagged with their actor, expected results inline.

Pure data, no I/O: a family declares its interleavings with these (``faults/revalidation/races.py``
for the revalidation race pairs) and ``runners/interleaving.py`` executes them
against real actor processes.  A :class:`Step` must return before the next
starts; a :class:`Together` group is started at one instant; a step expected
to :data:`BLOCKS` is collected later by an ``await`` step.  An expectation may
depend on the run's variant (:func:`by_variant`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

BLOCKS = "blocks"
"""Expected result of a step that must still be waiting when the next step runs (collected by ``await``)."""
AWAIT = "await"


@dataclass(frozen=True)
class ByVariant:
    """An expected result that depends on the run's variant."""

    expected: Mapping[str, Any]

    def __getitem__(self, variant: str) -> Any:
        if variant not in self.expected:
            raise KeyError(f"no expectation for variant {variant!r} (declared: {', '.join(self.expected)})")
        return self.expected[variant]


def by_variant(**expected: Any) -> ByVariant:
    return ByVariant(expected)


@dataclass(frozen=True)
class Step:
    """``actor`` performs ``op`` (with ``args``); ``expect`` is its result (a dict: these keys of it)."""

    actor: str
    op: str
    args: Mapping[str, Any] = field(default_factory=dict)
    expect: Any = None


@dataclass(frozen=True)
class Together:
    """Steps of different actors started at the same instant, truly concurrently.

    ``expect`` counts the results, e.g. ``{"committed": 1, "rejected": 1}``.
    """

    steps: tuple[Step, ...]
    expect: Any = None
