"""Fault: SIGKILL at a named injection point of a durable runtime (DBOS-style trigger points).

Serves the paper's crash results (arXiv 2608.03836: LangGraph 1.2.9
"re-executes durably recorded work after a real SIGKILL"; the fault matrix's
crash points x operations).  The runtime calls ``hooks.point(name, ...)`` at
each named point (``vocabulary.resume.POINTS``).  :class:`KillAtPoint` is the
hook a child process runs with: at the cell's point (name and node) it
reports ``R`` on its pipe and blocks; the parent (runners/resume/procs.py)
sends SIGKILL to the child's pid and reaps it (exit code -9).  Nothing is
unwound: no ``finally`` runs, no transaction commits, no connection closes —
what survives is exactly what the child had made durable.

Without a pipe (``wfd=None``, the in-process hypothesis machine) the point
raises :class:`mechanisms.resume.base.Crash` instead; the caller rolls back
the open transaction and discards the runtime object.

setup / invoke / teardown: :func:`setup` names the point (validated),
:meth:`KillAtPoint.point` is the invocation, the parent's reap is the teardown.
"""
from __future__ import annotations

import os
import time

from mechanisms.resume.base import Crash, Hooks
from vocabulary.resume import POINTS


def setup(point: str, node: str) -> tuple[str, str]:
    """The fault's parameters, checked: a named point and the node it lands in."""
    if point not in POINTS:
        raise ValueError(f"unknown injection point {point!r} (known: {', '.join(POINTS)})")
    return point, node


class KillAtPoint(Hooks):
    """At ``crash`` = (point, node): tell the parent on ``wfd`` and wait for its SIGKILL (module docstring)."""

    def __init__(self, op: str, crash: tuple[str, str] | None, wfd: int | None):
        self.op, self.crash, self.wfd = op, crash, wfd

    def point(self, name: str, run_id: str, step: int, node: str) -> None:
        if self.crash is not None and (name, node) == tuple(self.crash):
            if self.wfd is None:
                raise Crash(f"{name} of {node}")
            os.write(self.wfd, b"R\n")
            while True:  # the parent's SIGKILL ends us here
                time.sleep(3600)
