"""The durable-runtime interface: what a resume-family mechanism is (naive, sequencer, LangGraph adapters).

Serves "Resume Means Resume" (arXiv 2608.03836): the paper states its contract
over a persistence API (run, checkpoint, park at an interrupt, resume with a
value, fork from a checkpoint, recover after a crash).  This module is that
API, small enough for a real framework to sit behind it.  The lab's harness
(``runners/resume/``) drives every runtime through it, in real child
processes that it SIGKILLs at named points, and the six property checkers
(``analysis/resume/checkers.py``) judge what the stores hold afterwards.

How to implement a runtime (e.g. around LangGraph)
==================================================

Subclass :class:`DurableRuntime`; set ``name`` (and ``backends`` if you do
not support both SQLite and PostgreSQL, ``points`` if you cannot stop at every
named point).  Register it in ``mechanisms/resume/__init__.py`` REGISTRY, or
pass ``package.module:Class``.  The constructor signature is fixed::

    Runtime(backend: Backend, graph: GraphSpec, hooks: Hooks | None = None)

- ``backend`` (:class:`vocabulary.resume.Backend`): ``kind`` sqlite|postgres,
  ``location`` (a folder / a DSN) and ``namespace``.  Put your checkpoints
  there (e.g. LangGraph ``SqliteSaver`` on ``<location>/<namespace>lg.sqlite``,
  ``PostgresSaver`` on the DSN — a schema named from ``namespace``).  The
  effect ledger is already opened for you as ``self.ledger`` (a separate
  store: never put effects in your checkpoint store).
- ``graph`` (:class:`vocabulary.resume.GraphSpec`): the nodes in order, one of
  them the interrupt.  Build your framework's graph from it: one framework node
  per ``graph.nodes[step]``, edges in order.  The body of EVERY node is::

      new_state = self.run_node(run_id, step, state, resume=value_or_None)

  For the interrupt node, first park (LangGraph: ``value = interrupt(payload)``
  inside the node, which on resume returns the ``Command(resume=value)``
  value) and then call ``run_node(..., resume=value)``.  ``run_node`` does
  the node's work: the injection points ``before_node`` / ``after_effect``,
  the trace rows, the node's declared work (``work_ms``: a sleep standing for
  a model or tool call), the effects (through :meth:`fire_effect`, which you
  may override, e.g. to make effects idempotent) and returns the new state
  (the pure :meth:`GraphSpec.apply`).  The state is a plain dict with the fields of
  ``vocabulary.resume.SCHEMA`` (a LangGraph ``TypedDict`` state of the same
  four fields, ``log`` replaced, not reduced).
- ``hooks`` (:class:`Hooks`): call ``self.point(name, run_id, step)`` at each
  named point you support (``run_node`` calls the first two itself):

  ============================== =============================================================
  ``before_node``                a node is about to run                     (run_node)
  ``after_effect``               an effect is in the ledger, node not returned (run_node)
  ``after_node_before_checkpoint`` the node returned; its checkpoint is not written
  ``during_checkpoint_write``    inside the checkpoint's write, before it is durable
  ``parked``                     the parked checkpoint is durable, ``start``/``resume`` not returned
  ``after_resume_consumed``      the interrupt node's checkpoint (holding the consumed value) is
                                 durable; the next node has not started
  ============================== =============================================================

  ``step`` is the index of the node concerned (for ``parked``: the interrupt
  node's).  The harness's hook blocks there and the process is SIGKILLed; a
  point you cannot reach is left out of ``points`` and its cells are
  reported as not applicable.

The calls (each returns a :class:`vocabulary.resume.Status`; none raises for
an expected outcome — a refusal or a failed node is a Status; a refusal may
also be raised as one of the exception types the class declares in
``refusals``.  Anything else raised, a return that is not a Status, an exit
of the call's process or a call past its time limit stops the run with one
line naming the runtime and the call: a runtime's error is never a result):

- ``start(run_id, input)``: a new run from ``GraphSpec.initial_state(input)``;
  runs until it parks at the interrupt (``parked``) or ends (``done``).
- ``resume(run_id, value, checkpoint_id=None)``: deliver a resume value to the
  run's parked interrupt (LangGraph: ``invoke(Command(resume=value), config=
  {"configurable": {"thread_id": run_id}})``), or to the interrupt parked at
  ``checkpoint_id`` (``"checkpoint_id": ...`` in the config).  Returns
  ``parked``/``done`` when served, ``refused`` when the runtime refuses it
  before any node runs (a consume-once gate), ``failed`` when a node failed
  (e.g. schema validation).  Whatever your framework does with a resume of
  a run that is not parked (LangGraph records it and returns), report it
  faithfully: the checkers decide whether it conforms.
- ``fork(run_id, checkpoint_id, new_run_id)``: a new run whose head is a copy
  of that checkpoint (LangGraph: ``update_state`` / a new thread seeded from
  ``get_state(config with checkpoint_id).values`` and ``as_node``).  Nothing
  runs; the new run is then resumed with ``resume(new_run_id, value)``.
- ``recover(run_id)``: called in a NEW process after the process running a
  call on ``run_id`` was SIGKILLed; continue the run from what is durable
  (LangGraph: ``invoke(None, config)``).  Returns the Status it ends in.
- ``checkpoints(run_id)``: every persisted checkpoint of the run, oldest
  first (:class:`vocabulary.resume.Checkpoint`: id, step = nodes completed,
  next node, values, parent, created as ``time.time()``, parked).
- ``state(run_id)``: the head as a Status, running nothing.
- ``setup()``: create tables (called once per backend before any process
  starts); ``close()``: release connections.

What the harness records (you do not): every call as an operation of a
history in the lab format (``vocabulary.History``, family ``resume``): actor,
op (start/resume/fork/recover), start, end, status ok/fail/indeterminate
(``indeterminate`` when its process was killed), value with ``run``,
``checkpoint``, ``resume``, ``state``, ``pid``, ``op`` (the label also set as
``hooks.op`` and stamped on ledger rows); afterwards the ledger's effects and
trace and every run's checkpoints, as entries of the same history.
"""
from __future__ import annotations

import os
import time
from typing import Any, ClassVar, Mapping

from mechanisms.resume.frameworks import CONNECTIONS_PER_RACER
from mechanisms.resume.store import EffectLedger
from vocabulary.resume import (AFTER_EFFECT, BEFORE_NODE, CONSUME, NODE_RUN, POINTS, Backend, Checkpoint, GraphSpec,
                               Status)

__all__ = ["DurableRuntime", "Hooks", "NodeContext", "Crash"]


class Hooks:
    """The harness's side of the injection points.  The default does nothing.

    ``op`` is the label of the history operation in progress (set by the
    harness before each call); the runtime stamps it on every ledger row, so
    a checker can tell which call fired which effect.
    """

    op: str = ""

    def point(self, name: str, run_id: str, step: int, node: str) -> None:
        """Called when the runtime reaches a named point (the harness may block here until SIGKILL)."""


class Crash(Exception):
    """Raised by an in-process hook to emulate a crash at a point (the hypothesis machine; never in a real cell)."""


class NodeContext:
    """What node code sees: ``ctx.effect(key, payload)`` fires an effect into the ledger."""

    def __init__(self, runtime: "DurableRuntime", run_id: str, step: int):
        self.runtime, self.run_id, self.step = runtime, run_id, step
        self.node = runtime.graph.nodes[step].name
        self.task = runtime.graph.task(step)

    def effect(self, key: str, payload: str) -> bool:
        fired = self.runtime.fire_effect(self.run_id, self.task, key, payload)
        self.runtime.point(AFTER_EFFECT, self.run_id, self.step)
        return fired


class DurableRuntime:
    """Base class of a durable runtime (see the module docstring for the whole contract)."""

    name: ClassVar[str] = "runtime"
    #: the backends this runtime can run on (experiments skip the others)
    backends: ClassVar[tuple[str, ...]] = ("sqlite", "postgres")
    #: the named points it can stop at
    points: ClassVar[frozenset[str]] = frozenset(POINTS)
    #: exceptions a call may raise to refuse it (recorded as ``refused``, as a returned refusal is); anything
    #: else a call raises, a return that is not a Status, an exit or a hang is the runtime's error: the run
    #: stops and names it (runners/plugins.py), it is never recorded as an outcome
    refusals: ClassVar[tuple[type[BaseException], ...]] = ()
    #: True for a third-party framework under test (served from its own environment): an error its own API
    #: raises during a call is that framework's behaviour, recorded as a failed call with the error as its note
    #: (e.g. LangGraph raising ValidationError on every call of a thread that persisted an invalid state); for
    #: the lab's runtimes and users' plug-ins (False) any error outside ``refusals`` stops the run
    errors_are_outcomes: ClassVar[bool] = False
    #: PostgreSQL connections one racer of a k-racer cell holds (its store's and the ledger's by default; a
    #: runtime that opens more says so): resume_concurrency gives a race whose racers need more than the shared
    #: budget the server to itself (runners/resume/concurrency.py ``one_big_race_at_a_time``)
    connections_per_racer: ClassVar[int] = CONNECTIONS_PER_RACER

    def __init__(self, backend: Backend, graph: GraphSpec, hooks: Hooks | None = None):
        self.backend = backend
        self.graph = graph
        self.hooks = hooks or Hooks()
        self.ledger = EffectLedger(backend)

    # ------------------------------------------------------------------ the protocol
    def setup(self) -> None:
        """Create the stores' tables (idempotent); called once per backend before any process starts."""
        self.ledger.setup()

    def start(self, run_id: str, input: str) -> Status:
        raise NotImplementedError

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> Status:
        raise NotImplementedError

    def fork(self, run_id: str, checkpoint_id: str, new_run_id: str) -> Status:
        raise NotImplementedError

    def recover(self, run_id: str) -> Status:
        raise NotImplementedError

    def checkpoints(self, run_id: str) -> list[Checkpoint]:
        raise NotImplementedError

    def state(self, run_id: str) -> Status:
        raise NotImplementedError

    def close(self) -> None:
        self.ledger.close()

    # ------------------------------------------------------------------ helpers for implementers
    def point(self, name: str, run_id: str, step: int) -> None:
        self.hooks.point(name, run_id, step, self.graph.nodes[step].name if 0 <= step < len(self.graph.nodes) else "")

    def fire_effect(self, run_id: str, task: str, key: str, payload: str) -> bool:
        """Fire one effect (plain: at-least-once).  Override to make it idempotent.  True if it fired."""
        return self.ledger.fire(run_id, task, key, payload, op=self.hooks.op)

    def run_node(self, run_id: str, step: int, state: Mapping[str, Any], resume: Any = None) -> dict[str, Any]:
        """Run the node at ``step`` on ``state``: points, trace, effects; the new state (not persisted)."""
        node = self.graph.nodes[step]
        self.point(BEFORE_NODE, run_id, step)
        self.ledger.trace(run_id, step, node.name, NODE_RUN, None, op=self.hooks.op)
        if node.interrupt:
            self.ledger.trace(run_id, step, node.name, CONSUME, resume, op=self.hooks.op)
        if node.work_ms:
            time.sleep(node.work_ms / 1000)  # the node's own work (declared in the graph), before its effects
        new = self.graph.apply(step, state, resume)
        ctx = NodeContext(self, run_id, step)
        for key in node.effects:
            ctx.effect(key, self.graph.payload(step, key, new))
        return new

    def interrupt_payload(self, run_id: str) -> dict[str, Any]:
        """What the interrupt offers the resumer (LangGraph: the argument of ``interrupt``)."""
        return {"run": run_id, "node": self.graph.interrupt_node, "question": "approve?"}

    @staticmethod
    def pid() -> int:
        return os.getpid()
