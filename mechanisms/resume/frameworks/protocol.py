"""The lab's side inside a framework's environment: the adapter contract and the env's fork server (stdlib only).

Serves issue 14 (every framework release under the resume harness of "Resume
Means Resume", arXiv 2608.03836): a framework runs in its own locked virtual
environment (``data/envs/<env>/``, built by ``runners/resume/envs.py``), so the
lab never imports it.  This module is the only part of the lab that runs
there; it imports nothing but the standard library (and ``psycopg``, lazily,
for a PostgreSQL backend: an env that declares ``backends = ["postgres"]``
pins it).  It holds

- the node semantics of the lab's graph (:class:`Graph`, the same pure
  ``apply`` as ``vocabulary.resume.GraphSpec``; a test keeps the two equal),
- the effect ledger's writes (:class:`Ledger`, the tables of
  ``mechanisms/resume/store.py``: effects and trace in a separate store),
- the SIGKILL hook (:class:`KillAtPoint`) and the base class :class:`Adapter`,
- the fork server (:func:`serve`), speaking the line protocol of the lab's own
  fork server (``runners/resume_zygote.py``): every call is a fresh child of a
  warm server that already imported the framework; a crash point is a real
  SIGKILL of that child; k racers are k children forked from it at once;
  what a call's child imported lazily the server imports after answering
  (:meth:`Server.learn`), so the next children inherit it.

How to write an adapter (the contract)
======================================

1. **Files.**  One module in this folder, named after the framework
   (``langgraph.py``, ``dbos.py``, ``agent_framework.py``, ``llamaindex.py``,
   ``temporal.py``, ...): it is imported as ``driftlab_frameworks.<module>``
   inside the env, so the name never shadows the framework's own package.
   It imports the framework and ``from .protocol import ...``, nothing of the
   lab.  Modules Temporal's sandbox must re-import go beside it too.
2. **Environment.**  ``data/envs/<env>/pyproject.toml`` (a uv project with
   ``[tool.uv] package = false``, ``requires-python = ">=3.11,<3.12"``, the
   framework pinned) and its ``uv.lock`` (``uv lock`` in that folder).  The
   rows it serves are declared in the same file::

       [tool.driftlab.runtimes."dbos@3.4"]
       adapter = "dbos:DBOSAdapter"          # <module of this folder>:<Class>
       framework = "dbos"                    # the row label's two halves
       release = "3.4.2"
       variant = ""                          # e.g. "wait-for-event": a second row of one framework
       backends = ["sqlite", "postgres"]     # default ["sqlite"]
       aliases = ["dbos@today"]              # other names of the same row
       options = { polling_ms = 50 }         # self.options in the adapter
       connections_per_racer = 5             # PostgreSQL connections one racer holds (default 2)
       fault_cells_wait = "..."              # why fault cells mostly wait: they run beside the computing ones
       [tool.driftlab.runtimes."dbos@3.4".not_applicable]
       during_checkpoint_write = "DBOS writes a step's output in one INSERT: no point inside it"
       fork = "..."                          # a call the framework has no form of

   Every key of ``not_applicable`` is a named point (``POINTS``), a point
   reachable at some nodes only (``"<point>@<node>"``, e.g. no checkpoint is
   written after that node), a call (``start``, ``resume``, ``fork``,
   ``recover``, ``replay``, ``update``, ``resume_by_id``: a resume addressed
   to a checkpoint id) or a graph hint (``parallel``, ``state``); the
   cells that need it are reported ``n/a`` with that reason, never dropped.
   Nothing else is needed: the name becomes a runtime (``--mechanisms``,
   ``resume_faults``, ``resume_concurrency``, ``resume_profile``,
   ``resume_frameworks``).
3. **Class.**  Subclass :class:`Adapter`.  Constructor (do not override the
   signature): ``Adapter(backend: dict, graph: Graph, hooks: KillAtPoint,
   options: dict)``; ``backend`` = ``{"kind": "sqlite"|"postgres",
   "location": folder|DSN, "namespace": ns}`` (and, SQLite only, ``"ledger_location"``: the effect ledger's own
   folder, which :class:`Ledger` uses; the power-loss cells set it).  Keep your store(s) under it:
   SQLite files in ``backend["location"]`` named ``<ns>...``, or PostgreSQL
   schema ``<ns>`` on the DSN (``ns`` = ``namespace.lower()``; the lab drops
   both after the cell).  ``self.ledger`` is open already: never put effects
   in your own store.
4. **Graph.**  Build the framework's equivalent of ``graph`` (nodes in order,
   one interrupt).  The body of EVERY node is
   ``new_state = self.run_node(run_id, step, state, resume=value_or_None)``:
   it hits the points ``before_node``/``after_effect``, writes the trace,
   sleeps the node's declared work and fires its effects.  For the interrupt
   node, park first (LangGraph ``interrupt()``, DBOS ``recv``, Agent
   Framework ``request_info``, LlamaIndex ``InputRequiredEvent`` /
   ``wait_for_event``, a Temporal signal/update) and run ``run_node`` with the
   value once it arrives.  Code the framework calls with no handle on your
   adapter (a module-level step, a method of its own class) reaches it as
   :func:`current`.  Call ``self.point(name, run_id, step)`` at every
   other named point you can reach (``after_node_before_checkpoint``,
   ``during_checkpoint_write``, ``parked``, ``after_resume_consumed``) and list
   the unreachable ones in ``not_applicable``.
5. **Calls.**  Each returns ``self.status(run_id, state, ...)`` (a plain dict:
   ``run``, ``state`` in parked|done|refused|failed, ``checkpoint``, ``node``,
   ``values``, ``reason``): ``start(run_id, input)``, ``resume(run_id, value,
   checkpoint_id=None)``, ``fork(run_id, checkpoint_id, new_run_id)``,
   ``recover(run_id)`` (called in a NEW process after a SIGKILL),
   ``checkpoints(run_id)`` (``self.checkpoint(...)`` dicts, oldest first:
   what your framework persisted, as ``step`` = nodes completed and the state
   values), ``state(run_id)``, ``setup()`` (called once per backend before any
   call) and ``close()``.  Two optional calls serve the framework-only cells
   (``scenarios/resume/frameworks/``): ``replay(run_id, checkpoint_id)``
   (the framework's own re-run of a thread from a past checkpoint, if it has
   one) and ``update(run_id, values)`` (an external state update); without
   them, declare ``replay`` / ``update`` in ``not_applicable`` with the reason.
   Graphs may carry ``graph.hints`` (``parallel`` siblings, a ``state`` kind):
   honour them or declare ``parallel`` / ``state`` n/a.  Report what the framework does, faithfully: a
   framework that accepts a stray resume returns what it returned; a refusal
   is ``refused`` only when the framework refused before running a node.
6. **Exceptions and declared answers** (issue 24 §1).  Do not catch an
   exception to return ``parked``/``done``.  Declare in ``ANSWERS`` (class
   attribute, :class:`Answer`) each refusal and failure the framework is
   documented to give, as a pattern of its one-line reason; an exception whose
   one line matches a declared answer becomes that answer (``refused`` only if
   no node ran in the call), and you may also catch it yourself and return it.
   Anything else is the adapter's fault: an undeclared exception, a
   ``refused``/``failed`` with an undeclared reason, a malformed answer, an
   exit or a hang is an error of the server, and the lab stops the run with
   one line naming the environment, the adapter, the cell and the call.  The
   server also checks every ``parked``/``done`` answer against your own
   ``state(run_id)`` in the same process, and treats an exception of the lab's
   own node code (``run_node``) as a fault whatever the framework made of it.
   ``tests/test_adapter_conformance.py`` is the harness a new adapter must pass
   (every declared crash point, every answer kind, planted adapters that must
   fail; docs/trust.md).
7. **Try it**: ``driftlab reproduce --only resume_frameworks --mechanisms
   dbos@3.4`` builds the env on first use; ``tests/test_resume_frameworks.py``
   runs one fault cell and one k=2 race per framework.

The line protocol (unchanged from the lab's server)
===================================================

Request ``{"runtime", "backend", "graph", "call", "args", "label", "crash",
"timeout"}``: fork a child that builds the adapter and makes the call with a
:class:`KillAtPoint` on a pipe.  Reply ``{"pid", "code", "killed",
"status"}`` (``status``: the call's result) or ``{"pid", "code", "killed",
"error"}`` (the adapter's fault: the lab stops the run).  Request ``{"call": "race", "runtime", "backend", "graph", "run",
"value", "labels": [k], "jitters": [k seconds], "timeout"}``: fork k racers
that build the adapter, meet at one barrier, each sleep its jitter and resume
``run``; reply ``{"answers": [{"status", "released", "start", "end", "pid"} |
{"error"} | null]}`` (``error``: the racer never resumed, it failed before
the race or its barrier broke; null: no answer in time).  Every child asks
the kernel to SIGKILL it when the server dies, and the server when the lab
dies.  Request ``{"call": "host", "netns"}`` (the nemesis, issue 25: a resumer
on a host of its own): fork a **hosted** server, a copy of this warm one that
listens on an abstract Unix socket, then enters the network namespace
``netns`` (``setns``) and serves the one client that connects, over that
socket, with this protocol; reply ``{"pid", "address"}`` once it listens, or
``{"error"}``.  Its calls' children are forked inside the host, so they
reach the store over its link only.  It ends when its client closes the
socket, and a client that dies during a call (EOF) takes the call's child
with it.  Run as ``python -P protocol.py MODULE:CLASS``.
"""
from __future__ import annotations

import ctypes
import importlib
import importlib.util
import json
import multiprocessing
import os
import re
import select
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

# ----------------------------------------------------------------- the names (equal to vocabulary.resume's; tested)
PARKED, DONE, REFUSED, FAILED = "parked", "done", "refused", "failed"
BEFORE_NODE, AFTER_EFFECT = "before_node", "after_effect"
AFTER_NODE_BEFORE_CHECKPOINT, DURING_CHECKPOINT_WRITE = "after_node_before_checkpoint", "during_checkpoint_write"
PARKED_POINT, AFTER_RESUME_CONSUMED = "parked", "after_resume_consumed"
POINTS = (BEFORE_NODE, AFTER_EFFECT, AFTER_NODE_BEFORE_CHECKPOINT, DURING_CHECKPOINT_WRITE, PARKED_POINT,
          AFTER_RESUME_CONSUMED)
NODE_RUN, CONSUME = "node", "consume"
CALL_TIMEOUT_S = 60
CLONE_NEWNET = 0x40000000  # setns(2): a hosted server's network namespace (Server.host)
PACKAGE = "driftlab_frameworks"


# ----------------------------------------------------------------- the answers besides served (issue 24 §1)
class Answer(NamedTuple):
    """A refusal or failure the framework is documented to give: a call's ``refused``/``failed`` answer (or an
    exception it raised) counts as the framework's own outcome only when its one-line reason matches ``pattern``
    (a regular expression matched at the start of the reason) of an answer of that ``state``."""

    state: str  # REFUSED or FAILED
    pattern: str
    source: str  # where the framework (or the lab's contract) says it answers so


#: the answers every adapter may give: the contract's own refusals of a call on a run, workflow or checkpoint the
#: store does not hold, or of a start or fork onto a run id that exists (contract §5)
LAB_ANSWERS = (
    Answer("refused", r"(run|workflow|flow) '[^']*' exists$", "the contract: a start or fork onto an existing run id"),
    Answer("refused", r"no (checkpoint|snapshot|saved state|persisted state|workflow|run)\b",
           "the contract: a call on a run or checkpoint the store does not hold"),
)
#: the calls that answer a status, and the states a status may have
STATUS_CALLS = ("start", "resume", "fork", "recover", "state", "replay", "update")


class AdapterFault(Exception):
    """The adapter (the lab's code in the env) raised, answered malformed, or gave an undeclared refusal: the lab
    stops the run, it is never a framework's outcome."""


# ----------------------------------------------------------------- the graph
class Graph:
    """The lab's graph (``GraphSpec.to_dict`` form): nodes in order, one interrupt; the pure node semantics."""

    def __init__(self, raw: dict):
        self.raw = raw
        self.name = raw["name"]
        self.nodes = [dict(n, effects=list(n.get("effects", ())), interrupt=bool(n.get("interrupt")),
                           invalid=bool(n.get("invalid")), work_ms=float(n.get("work_ms", 0.0))) for n in raw["nodes"]]
        self.names = [n["name"] for n in self.nodes]
        self.interrupt_step = next(i for i, n in enumerate(self.nodes) if n["interrupt"])
        #: how a framework should build it, beyond the node semantics (``parallel``: sibling node names run in one
        #: step; ``state``: how the state is declared, e.g. "pydantic"); an adapter that cannot honour a hint says
        #: so in its ``not_applicable``
        self.hints = dict(raw.get("hints") or {})

    def task(self, step: int) -> str:
        return f"{step}:{self.names[step]}"

    @staticmethod
    def initial_state(input: str) -> dict:
        return {"input": str(input), "approval": None, "steps": 0, "log": []}

    def apply(self, step: int, state: dict, resume: Any = None) -> dict:
        node = self.nodes[step]
        new = {**state, "log": list(state.get("log", []))}
        if node["interrupt"]:
            new["approval"] = None if resume is None else str(resume)
        steps = new.get("steps", 0)
        new["steps"] = (steps + 1) if isinstance(steps, int) else steps
        new["log"].append(f"{node['name']}:{new.get('approval')}")
        if node["invalid"]:
            new["steps"] = "invalid"
        return new

    def payload(self, step: int, key: str, state: dict) -> str:
        return f"{self.names[step]}/{key}:{state.get('input')}:{state.get('approval')}"


# ----------------------------------------------------------------- the effect ledger (writes only; the lab reads)
class Ledger:
    """Appends effects and trace rows to the lab's effect ledger (tables created by the lab before any call)."""

    def __init__(self, backend: dict):
        ns = backend["namespace"].lower()
        self.kind = backend["kind"]
        if self.kind == "sqlite":
            # the ledger's own folder when the lab gives one (``ledger_location``: the power-loss cells keep the
            # store on a lazy file system and the ledger, the world, outside it), else the store's
            where = backend.get("ledger_location") or backend["location"]
            self.conn = sqlite3.connect(str(Path(where) / f"{ns}ledger.sqlite"), isolation_level=None,
                                        timeout=30, check_same_thread=False)
            self.conn.execute("PRAGMA busy_timeout = 30000")
            self.mark = "?"
        else:
            import psycopg  # the env pins it when it declares the postgres backend

            self.conn = psycopg.connect(backend["location"], autocommit=True,
                                        options=f"-c search_path={ns}_ledger")
            self.mark = "%s"

    def _q(self, sql: str) -> str:
        return sql.replace("?", self.mark)

    def fire(self, run_id: str, task: str, key: str, payload: str, op: str = "", idem: str | None = None) -> bool:
        cur = self.conn.execute(self._q(
            "INSERT INTO effects (run_id, task, key, payload, idem, pid, op, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (idem) DO NOTHING"), (run_id, task, key, payload, idem, os.getpid(), op, time.time()))
        return cur.rowcount == 1

    def trace(self, run_id: str, step: int, node: str, kind: str, value: Any = None, op: str = "") -> None:
        self.conn.execute(self._q("INSERT INTO trace (run_id, step, node, kind, value, pid, op, at) "
                                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
                          (run_id, step, node, kind, json.dumps(value), os.getpid(), op, time.time()))

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - closing after the server went away
            pass


# ----------------------------------------------------------------- the SIGKILL hook
class KillAtPoint:
    """At ``crash`` = (point, node): write ``R`` on ``wfd`` and block until the server's SIGKILL."""

    def __init__(self, op: str = "", crash: tuple[str, str] | None = None, wfd: int | None = None):
        self.op, self.crash, self.wfd = op, tuple(crash) if crash else None, wfd

    def point(self, name: str, run_id: str, step: int, node: str) -> None:
        if self.crash is not None and (name, node) == self.crash and self.wfd is not None:
            os.write(self.wfd, b"R\n")
            while True:  # the server's SIGKILL ends us here
                time.sleep(3600)


# ----------------------------------------------------------------- the base class
_CURRENT: "Adapter | None" = None


def current() -> "Adapter":
    """The adapter this process built last (one per call's child): for code the framework calls with no handle on
    it (a module-level step function, a method of a class the framework instantiates)."""
    return _CURRENT


class Adapter:
    """A framework behind the durable-runtime interface (module docstring, "How to write an adapter")."""

    name = "adapter"
    #: the refusals and failures this framework is documented to give (:class:`Answer`, beside
    #: :data:`LAB_ANSWERS`): any other ``refused``/``failed`` answer, any other exception, an exit, a hang or a
    #: malformed answer is the adapter's fault and stops the run (issue 24 §1)
    ANSWERS: tuple[Answer, ...] = ()

    def __init__(self, backend: dict, graph: Graph, hooks: KillAtPoint | None = None, options: dict | None = None):
        global _CURRENT
        _CURRENT = self
        #: what the lab's own code raised inside a node (run_node) in this call: a fault of the adapter's call
        #: whatever the framework made of it (a framework that turns a node's exception into a failed run)
        self.faults: list[str] = []
        self.nodes_run = 0  # nodes this call ran (a refusal comes before any)
        self.backend, self.graph = backend, graph
        self.hooks = hooks or KillAtPoint()
        self.options = dict(options or {})
        self.ns = backend["namespace"].lower()
        self.ledger = Ledger(backend)

    #: backend kind -> modules your adapter imports lazily for it: the server imports them once, before it forks
    #: the first call on that kind, so each call's child does not pay the import (psycopg: the ledger's)
    WARM: dict[str, tuple[str, ...]] = {"postgres": ("psycopg",)}

    @classmethod
    def warm(cls, kind: str, options: dict) -> None:
        """Import what a call on a ``kind`` backend will import (:data:`WARM`), in the server, once."""
        for module in cls.WARM.get(kind, ()):
            importlib.import_module(module)

    # ---- the calls (override)
    def setup(self) -> None:
        """Create your store's tables (the ledger's exist already)."""

    def start(self, run_id: str, input: str) -> dict:
        raise NotImplementedError

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> dict:
        raise NotImplementedError

    def fork(self, run_id: str, checkpoint_id: str, new_run_id: str) -> dict:
        raise NotImplementedError

    def recover(self, run_id: str) -> dict:
        raise NotImplementedError

    def checkpoints(self, run_id: str) -> list[dict]:
        raise NotImplementedError

    def state(self, run_id: str) -> dict:
        raise NotImplementedError

    def close(self) -> None:
        self.ledger.close()

    # ---- helpers
    def point(self, name: str, run_id: str, step: int) -> None:
        node = self.graph.names[step] if 0 <= step < len(self.graph.names) else ""
        self.hooks.point(name, run_id, step, node)

    def head_state(self, run_id: str, store: str = "checkpoint") -> dict:
        """The run's state as its newest checkpoint says (done past the last node, else parked at its next node);
        refused, naming ``store`` ("no <store> of run ..."), when it has none.  A ``state`` for frameworks whose
        checkpoints say all there is."""
        cps = self.checkpoints(run_id)
        if not cps:
            return self.status(run_id, REFUSED, reason=f"no {store} of run {run_id!r}")
        head = cps[-1]
        return self.status(run_id, DONE if head["next"] is None else PARKED, head["checkpoint"], head["next"],
                           head["values"])

    def answer(self, run_id: str) -> dict:
        """The run's state as a call's answer; if it is parked at the interrupt, the ``parked`` point first (for
        frameworks whose call returns only once the run has parked)."""
        head = self.state(run_id)
        if head["state"] == PARKED and head["node"] == self.graph.names[self.graph.interrupt_step]:
            self.point(PARKED_POINT, run_id, self.graph.interrupt_step)
        return head

    def fire_effect(self, run_id: str, task: str, key: str, payload: str) -> bool:
        return self.ledger.fire(run_id, task, key, payload, op=self.hooks.op)

    def run_node(self, run_id: str, step: int, state: dict, resume: Any = None) -> dict:
        """The node at ``step``: points, trace, declared work, effects; the new state (you persist it)."""
        node = self.graph.nodes[step]
        self.point(BEFORE_NODE, run_id, step)
        self.nodes_run += 1
        try:
            self.ledger.trace(run_id, step, node["name"], NODE_RUN, None, op=self.hooks.op)
            if node["interrupt"]:
                self.ledger.trace(run_id, step, node["name"], CONSUME, resume, op=self.hooks.op)
            if node["work_ms"]:
                time.sleep(node["work_ms"] / 1000)
            new = self.graph.apply(step, state, resume)
            for key in node["effects"]:
                self.fire_effect(run_id, self.graph.task(step), key, self.graph.payload(step, key, new))
                self.point(AFTER_EFFECT, run_id, step)
        except Exception as exc:  # noqa: BLE001 - recorded (the lab's own code failed), then raised as before
            self.faults.append(f"node {node['name']}: {_one_line(exc)}")
            raise
        return new

    def declared(self, state: str, reason: str) -> bool:
        """Whether ``reason`` is an answer of ``state`` this adapter declares (:attr:`ANSWERS`, :data:`LAB_ANSWERS`)."""
        return any(a.state == state and re.match(a.pattern, reason or "") for a in (*LAB_ANSWERS, *self.ANSWERS))

    def judge(self, call: str, result: Any) -> Any:
        """``result`` if it is a well-formed, declared answer of ``call``; else :class:`AdapterFault` (one line)."""
        if self.faults:
            raise AdapterFault(f"the lab's code raised inside {self.faults[0]}")
        problem = malformed(call, result)
        if problem:
            raise AdapterFault(f"{call} answered {problem}")
        if call in STATUS_CALLS and result["state"] in (REFUSED, FAILED) \
                and not self.declared(result["state"], result["reason"]):
            raise AdapterFault(f"{call} answered {result['state']} with an undeclared reason "
                               f"({result['reason'] or 'none'}): declare it in ANSWERS if the framework documents it")
        return result

    def answer_to(self, call: str, args: dict, exc: BaseException) -> dict:
        """A framework's exception as the call's answer when declared (refused only if no node ran in this call,
        else failed); :class:`AdapterFault` otherwise."""
        reason = _one_line(exc)
        if not self.faults and call in STATUS_CALLS:
            for state in (REFUSED, FAILED):
                if self.declared(state, reason):
                    run = args.get("new_run_id") or args.get("run_id") or args.get("run") or ""
                    return self.status(run, FAILED if self.nodes_run else state, reason=reason)
        raise AdapterFault(f"{call} raised {self.faults[0] if self.faults else reason}") from None

    def interrupt_payload(self, run_id: str) -> dict:
        return {"run": run_id, "node": self.graph.names[self.graph.interrupt_step], "question": "approve?"}

    def status(self, run_id: str, state: str, checkpoint: str | None = None, node: str | None = None,
               values: dict | None = None, reason: str = "") -> dict:
        return {"run": run_id, "state": state, "checkpoint": checkpoint, "node": node,
                "values": dict(values) if values is not None else None, "reason": reason}

    @staticmethod
    def checkpoint(id: str, run_id: str, step: int, next: str | None, values: dict, parent: str | None,
                   created: float, parked: bool) -> dict:
        return {"checkpoint": id, "run": run_id, "step": step, "next": next, "values": dict(values),
                "parent": parent, "created": created, "parked": parked}


# ----------------------------------------------------------------- the server
def die_with_parent(parent: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)


def _read_line(fd: int, timeout: float, watch: int | None = None) -> bytes:
    """A line from ``fd`` (ending ``T`` past ``timeout``; ``W`` once ``watch``, a client that sends nothing while
    it waits, becomes readable: it closed or died)."""
    buf, deadline = b"", time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = max(0.0, deadline - time.monotonic())  # past the deadline: what is already there, no waiting
        ready = select.select([fd] if watch is None else [fd, watch], [], [], left)[0]
        if not ready:
            return buf + b"T"
        if fd not in ready:
            return buf + b"W"
        chunk = os.read(fd, 65536)
        if not chunk:
            return buf
        buf += chunk
    return buf


def _kill(pid: int) -> int:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return _wait(pid)


def _wait(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _fork(fn, *args) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            fn(*args)
        except BaseException:  # noqa: BLE001 - reported on stderr; the exit code carries it
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def _one_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"


_OPT_STR = (str, type(None))


def malformed(call: str, result: Any) -> str:
    """What is wrong with ``result`` as the answer of ``call`` ("" if nothing): a status is a dict with ``run``
    (str), ``state`` (parked|done|refused|failed), ``checkpoint``/``node`` (str or None), ``values`` (dict or
    None), ``reason`` (str); ``checkpoints`` is a list of checkpoint dicts (:meth:`Adapter.checkpoint`)."""
    if call in STATUS_CALLS:
        if not isinstance(result, dict):
            return f"{type(result).__name__} {str(result)[:60]!r}, not a status"
        kinds = {"run": str, "state": str, "checkpoint": _OPT_STR, "node": _OPT_STR, "values": (dict, type(None)),
                 "reason": str}
        for key, kind in kinds.items():
            if key not in result:
                return f"a status without {key!r}"
            if not isinstance(result[key], kind):
                return f"a status whose {key!r} is {type(result[key]).__name__}"
        if result["state"] not in (PARKED, DONE, REFUSED, FAILED):
            return f"a status in state {result['state']!r} (parked, done, refused or failed)"
    elif call == "checkpoints":
        if not isinstance(result, list):
            return f"{type(result).__name__}, not a list of checkpoints"
        kinds = {"checkpoint": str, "run": str, "step": int, "next": _OPT_STR, "values": dict, "parked": bool}
        for cp in result:
            if not isinstance(cp, dict) or any(k not in cp or not isinstance(cp[k], t) for k, t in kinds.items()):
                return f"a checkpoint that is not {{checkpoint, run, step, next, values, parked}}: {str(cp)[:80]}"
    return ""


class Server:
    """The env's fork server for one adapter class (module docstring)."""

    def __init__(self, adapter_cls: type, options: dict | None = None):
        self.cls, self.options = adapter_cls, dict(options or {})
        self.warmed: set[str] = set()  # backend kinds whose lazy imports this server made (Adapter.warm)
        self.learned: list[str] = []  # modules a call's child imported that this server has not (learn)
        self.unlearnable: set[str] = set()
        self.hosted: list[int] = []  # hosted servers forked by this one (host), reaped once they end
        self.client: int | None = None  # a hosted server's socket to its one client (its death ends a call)
        self.channel: tuple = ()  # (requests, replies) of the loop this server serves

    def build(self, req: dict, hooks: KillAtPoint) -> Adapter:
        return self.cls(req["backend"], Graph(req["graph"]), hooks, {**self.options, **req.get("options", {})})

    def learn(self) -> None:
        """Import here what the last calls' children imported lazily (a framework's backend, its dialect, its
        SQL compiler), so the next children inherit it instead of importing it again: each call stays a fresh
        process of a server that has served before, as a framework's worker is.  A module that fails to import
        here is left to the children."""
        for name in self.learned:
            if name not in sys.modules and name not in self.unlearnable:
                try:
                    importlib.import_module(name)
                except Exception:  # noqa: BLE001 - importable only in the state a call set up: the children's
                    self.unlearnable.add(name)
        self.learned.clear()

    def warm(self, req: dict) -> None:
        kind = req["backend"]["kind"]
        if kind not in self.warmed:
            self.warmed.add(kind)
            self.cls.warm(kind, self.options)

    def _child(self, parent: int, rfd: int, wfd: int, req: dict) -> None:
        die_with_parent(parent)
        os.close(rfd)
        before = set(sys.modules)
        rt = None
        try:
            rt = self.build(req, KillAtPoint(req.get("label", ""), req.get("crash"), wfd))
            try:
                result = getattr(rt, req["call"])(**req.get("args", {}))
            except AdapterFault:
                raise
            except Exception as exc:  # noqa: BLE001 - a declared answer of the framework, or the adapter's fault
                result = rt.answer_to(req["call"], req.get("args", {}), exc)
            result = rt.judge(req["call"], result)
            if isinstance(result, dict) and result.get("state") in (PARKED, DONE) and req["call"] != "state":
                head = rt.state(result["run"])  # an answer the store contradicts is an error, not a pass
                if head.get("state") != result["state"]:
                    raise AdapterFault(f"adapter answered {result['state']!r} for run {result['run']} but its store "
                                       f"says {head.get('state')!r} ({head.get('reason') or 'no reason'})")
            # no close: the process ends right after, as a crashed one would
            imported = [name for name, m in list(sys.modules.items()) if name not in before and m is not None]
            os.write(wfd, ("S" + json.dumps({"status": result, "imported": imported}, default=str) + "\n").encode())
        except Exception as exc:  # noqa: BLE001 - the lab stops the run with this one line (issue 24 §1)
            text = str(exc) if isinstance(exc, AdapterFault) else (
                f"{'building the adapter' if rt is None else req['call']} raised {_one_line(exc)}")
            os.write(wfd, ("E" + json.dumps(text) + "\n").encode())

    def call(self, req: dict) -> dict:
        rfd, wfd = os.pipe()
        pid = _fork(self._child, os.getpid(), rfd, wfd, req)
        os.close(wfd)
        timeout = req.get("timeout", CALL_TIMEOUT_S)
        try:
            got = _read_line(rfd, timeout, self.client)
        finally:
            os.close(rfd)
        if got.endswith(b"W"):  # a hosted server's client is gone (its resumer SIGKILLed): the call goes with it
            _kill(pid)
            os._exit(0)
        reply: dict[str, Any] = {"pid": pid, "killed": False}
        if got.startswith(b"R"):
            reply.update(code=_kill(pid), killed=True)
        elif got.endswith(b"T"):
            reply.update(code=_kill(pid), error=f"no answer within {timeout} s")
        else:
            reply["code"] = _wait(pid)
            if got.startswith(b"S"):
                answer = json.loads(got[1:])
                reply["status"] = answer["status"]
                self.learned.extend(answer["imported"])
            elif got.startswith(b"E"):
                reply["error"] = json.loads(got[1:])
            else:
                reply["error"] = f"the call's process exited with code {reply['code']}"
        return reply

    def _racer(self, parent: int, wfd: int, barrier, req: dict, i: int) -> None:
        die_with_parent(parent)
        try:
            rt = self.build(req, KillAtPoint(req["labels"][i]))
            rt.state(req["run"])  # open the connections before the race
        except Exception as exc:  # noqa: BLE001 - no race without every racer: the others leave the barrier now
            barrier.abort()
            os.write(wfd, (json.dumps({"error": f"before the race: {_one_line(exc)}"}) + "\n").encode())
            return
        try:
            barrier.wait()
        except Exception:  # noqa: BLE001 - a broken barrier: answer, the lab records it
            os.write(wfd, (json.dumps({"error": "barrier broken"}) + "\n").encode())
            return
        released = time.time()
        if req["jitters"][i]:
            time.sleep(req["jitters"][i])
        start = time.time()
        try:
            try:
                status = rt.resume(req["run"], req["value"])
            except AdapterFault:
                raise
            except Exception as exc:  # noqa: BLE001 - a declared answer of the framework, or the adapter's fault
                status = rt.answer_to("resume", {"run_id": req["run"]}, exc)
            status = rt.judge("resume", status)
        except Exception as exc:  # noqa: BLE001 - never a framework's answer: the lab stops the run
            os.write(wfd, (json.dumps({"error": f"in the race: {exc}"}) + "\n").encode())
            return
        os.write(wfd, (json.dumps({"status": status, "released": released, "start": start, "end": time.time(),
                                   "pid": os.getpid()}, default=str) + "\n").encode())

    def race(self, req: dict) -> dict:
        k, timeout = len(req["labels"]), req.get("timeout", CALL_TIMEOUT_S)
        barrier = multiprocessing.get_context("fork").Barrier(k, timeout=timeout)
        racers = []
        for i in range(k):
            rfd, wfd = os.pipe()
            pid = _fork(self._racer, os.getpid(), wfd, barrier, req, i)
            os.close(wfd)
            racers.append((pid, rfd))
        answers, deadline = [], time.monotonic() + timeout  # one deadline for the race, not one per racer
        for pid, rfd in racers:
            line = _read_line(rfd, max(0.0, deadline - time.monotonic()))
            os.close(rfd)
            answers.append(json.loads(line) if line.endswith(b"\n") else None)
        for pid, _ in racers:
            _kill(pid) if any(a is None for a in answers) else _wait(pid)
        return {"answers": answers}

    def host(self, req: dict) -> dict:
        """Fork a hosted server for host ``req["netns"]`` (module docstring); its pid and address once it listens."""
        self.hosted = [p for p in self.hosted if os.waitpid(p, os.WNOHANG)[0] == 0]  # reap those that ended
        address = f"driftlab-hosted-{os.getpid()}-{len(self.hosted)}-{time.monotonic_ns()}"
        rfd, wfd = os.pipe()
        pid = _fork(self._hosted, os.getpid(), rfd, wfd, req["netns"], address)
        os.close(wfd)
        try:
            got = _read_line(rfd, 20)
        finally:
            os.close(rfd)
        if got != b"up\n":
            _kill(pid)  # and reaped
            return {"error": f"the hosted server for {req['netns']} did not start: "
                             f"{got.decode(errors='replace').strip() or 'it exited'}"}
        self.hosted.append(pid)
        return {"pid": pid, "address": address}

    def _hosted(self, parent: int, rfd: int, wfd: int, netns: str, address: str) -> None:
        die_with_parent(parent)
        os.close(rfd)
        import socket

        try:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind("\0" + address)  # abstract, in the machine's namespace, where the lab connects
            listener.listen(1)
            fd = os.open(f"/var/run/netns/{netns}", os.O_RDONLY)
            if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns({netns}): {os.strerror(ctypes.get_errno())}")
            os.close(fd)
        except OSError as exc:
            os.write(wfd, f"{_one_line(exc)}\n".encode())
            return
        os.write(wfd, b"up\n")
        os.close(wfd)
        for channel in self.channel:  # the warm server's channel to the lab is not this server's
            os.close(channel.fileno())
        if not select.select([listener], [], [], CALL_TIMEOUT_S)[0]:
            return
        conn = listener.accept()[0]
        listener.close()
        self.client, self.learn = conn.fileno(), lambda: None  # one client, one call or two: nothing to learn for
        try:
            self.serve(conn.makefile("r"), conn.makefile("w"))
        except (BrokenPipeError, ConnectionResetError):  # the client died after its call: nothing to tell
            pass

    def serve(self, requests, replies) -> None:
        self.channel = (requests, replies)
        for line in requests:
            req = json.loads(line)
            if req.get("call") == "host":
                reply = self.host(req)
            else:
                self.warm(req)
                reply = self.race(req) if req.get("call") == "race" else self.call(req)
            replies.write(json.dumps(reply, default=str) + "\n")
            replies.flush()
            self.learn()


def load_package() -> None:
    """Make this folder importable as ``driftlab_frameworks`` (never on sys.path: no shadowing of frameworks)."""
    if PACKAGE in sys.modules:
        return
    folder = Path(__file__).resolve().parent
    spec = importlib.util.spec_from_file_location(PACKAGE, folder / "__init__.py", submodule_search_locations=[str(folder)])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = pkg
    spec.loader.exec_module(pkg)


def adapter_class(path: str) -> type:
    """``"<module>:<Class>"`` of this folder, imported as ``driftlab_frameworks.<module>``; or ``"/abs/file.py:Class"``
    (an adapter kept outside the lab, e.g. the tests' planted ones), imported as ``driftlab_frameworks.<file stem>``
    so that it may import this folder's adapters relatively (``from .langgraph import ...``)."""
    load_package()
    module, _, cls = path.rpartition(":")
    if module.endswith(".py"):
        name = f"{PACKAGE}.{Path(module).stem}"
        spec = importlib.util.spec_from_file_location(name, module)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return getattr(mod, cls)
    return getattr(importlib.import_module(f"{PACKAGE}.{module}"), cls)


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(os.getppid())
    load_package()
    me = importlib.import_module(f"{PACKAGE}.protocol")  # one copy of the classes: the package's
    cls = me.adapter_class(argv[0])  # the framework is imported here once; every child inherits it
    options = json.loads(argv[1]) if len(argv) > 1 else {}
    replies = os.fdopen(os.dup(1), "w")  # replies on the original stdout; what children print goes to stderr
    os.dup2(2, 1)
    try:
        me.Server(cls, options).serve(sys.stdin, replies)
    except BrokenPipeError:  # the lab's process died (Ctrl-C) between a request and its reply: nothing to tell
        os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
