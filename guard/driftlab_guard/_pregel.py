"""The one place driftlab_guard reaches into LangGraph's internals (pinned by ``tests/test_driftlab_guard.py``).

LangGraph never tells a checkpoint saver *why* it loads a checkpoint.  The
loop that loads it (``langgraph.pregel._loop.PregelLoop``, in its
``__enter__`` / ``__aenter__``) holds the invocation's input and is on the call
stack of the load.  :func:`loading_invocation` finds it there and returns a
small view of it: the input (``Command(resume=...)``, ``None`` for a recovery,
or a fresh input) and :meth:`Invocation.make_durable`, which makes the rest of a
claimed resume persist every step before the next step starts (durability
``"sync"``), whatever durability the caller chose: a claimed value must not be
consumed again by a recovery because the step that consumed it was never
written (``"exit"``) or was still being written (``"async"``).

Checked against the LangGraph releases named in the package's dependency on
``langgraph`` (``guard/pyproject.toml``); the test fails if a release moves the
load off the loop's stack or renames what is read here.
"""
from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from langgraph.pregel._loop import AsyncPregelLoop, PregelLoop


class Invocation:
    """The outer LangGraph invocation whose loop is loading a checkpoint."""

    __slots__ = ("loop",)

    def __init__(self, loop: PregelLoop):
        self.loop = loop

    @property
    def input(self) -> Any:
        return self.loop.input

    @property
    def durability(self) -> str:
        return self.loop.durability

    def make_durable(self) -> None:
        """From here on, write each step's writes and checkpoint, and wait for them before the next step.

        Called during the load (inside the loop's ``__enter__``), before the loop
        reads its durability to decide what to keep in memory for ``"exit"``.
        LangGraph's own wait for ``"sync"`` is decided by the caller before the
        loop exists, so the wait is added where each step starts: the loop's
        (a)match_cached_writes, which LangGraph calls before it runs a step's tasks.
        """
        loop = self.loop
        if loop.durability == "sync":
            return
        loop.durability = "sync"
        if isinstance(loop, AsyncPregelLoop):
            original = loop.amatch_cached_writes

            async def amatch_cached_writes() -> Any:
                fut = getattr(loop, "_put_checkpoint_fut", None)
                if fut is not None:
                    await fut
                return await original()

            loop.amatch_cached_writes = amatch_cached_writes  # type: ignore[method-assign]
        else:
            original_sync = loop.match_cached_writes

            def match_cached_writes() -> Any:
                fut = getattr(loop, "_put_checkpoint_fut", None)
                if fut is not None:
                    fut.result()
                return original_sync()

            loop.match_cached_writes = match_cached_writes  # type: ignore[method-assign]


def loading_invocation(depth: int = 8) -> Invocation | None:
    """The outer loop whose load called the saver; None for get_state, history, subgraph loads, direct calls."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(depth):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if isinstance(owner, PregelLoop):
            return None if owner.is_nested else Invocation(owner)
        frame = frame.f_back
    return None
