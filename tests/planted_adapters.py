"""Planted adapters: LangGraph's adapter with one bug each, run in the real langgraph-1.2.24 environment (issue 24).

Loaded by the env's fork server from this file (``adapter = "/abs/tests/planted_adapters.py:Class"``, imported as
``driftlab_frameworks.planted_adapters``), never by the lab.  Each class is the real adapter with exactly one planted
bug; the conformance harness (``tests/test_adapter_conformance.py``) and the lab must refuse each one: an adapter
that raises, exits, hangs, answers malformed or gives an undeclared refusal stops the run (issue 24 §1); one that
moves a crash point or answers a recovery without re-running the killed node fails the harness (§2).
"""
from __future__ import annotations

import os
import time

from .langgraph import LangGraphAdapter
from .protocol import AFTER_EFFECT, BEFORE_NODE, DONE, REFUSED


class RaisesInResume(LangGraphAdapter):
    """Planted: every resume raises (the adapter's own bug, not LangGraph's answer)."""

    def resume(self, run_id, value, checkpoint_id=None):
        raise RuntimeError("planted: the adapter's resume raised")


class ExitsInResume(LangGraphAdapter):
    """Planted: every resume ends its process."""

    def resume(self, run_id, value, checkpoint_id=None):
        os._exit(3)


class HangsInResume(LangGraphAdapter):
    """Planted: every resume blocks forever."""

    def resume(self, run_id, value, checkpoint_id=None):
        time.sleep(3600)


class MalformedResume(LangGraphAdapter):
    """Planted: resume answers something that is not a status."""

    def resume(self, run_id, value, checkpoint_id=None):
        return {"state": "ok"}


class SwallowsIntoRefused(LangGraphAdapter):
    """Planted: resume catches its own failure and answers 'refused' (a refusal LangGraph never documented)."""

    def resume(self, run_id, value, checkpoint_id=None):
        try:
            raise RuntimeError("planted: the adapter's resume raised")
        except RuntimeError as exc:
            return self.status(run_id, REFUSED, reason=f"RuntimeError: {exc}")


class RaisesInNode(LangGraphAdapter):
    """Planted: the lab's node code (the effect's write) raises inside LangGraph, which turns it into a failed run
    (the adapter's catch-all then answers 'failed' as if LangGraph had)."""

    def fire_effect(self, run_id, task, key, payload):
        if key == "charge":
            raise ValueError("planted: the effect's write raised")
        return super().fire_effect(run_id, task, key, payload)


class BeforeNodeLate(LangGraphAdapter):
    """Planted: the ``before_node`` point is reached after the node's effects (a crash point moved)."""

    def point(self, name, run_id, step):
        if name == BEFORE_NODE:
            return
        if name == AFTER_EFFECT:
            super().point(BEFORE_NODE, run_id, step)
        super().point(name, run_id, step)


class RecoverAnswersHead(LangGraphAdapter):
    """Planted: recover answers the store's head ('parked' at the killed node) without re-running anything."""

    def recover(self, run_id):
        return self.state(run_id)


class OldestState(LangGraphAdapter):
    """Planted: a finished run answered with its oldest saved state (checkpoints read oldest first, the first
    taken)."""

    def state(self, run_id):
        head = super().state(run_id)
        cps = self.checkpoints(run_id)
        if head["state"] != DONE or not cps:
            return head
        return self.status(run_id, DONE, cps[0]["checkpoint"], None, cps[0]["values"])
