"""The resume-semantics family's vocabulary: runs, interrupts, effects, checkpoints, the graph.

Serves "Resume Means Resume" (arXiv 2608.03836): after an interrupt, a crash
(SIGKILL) or k concurrent resumers, does a run continue exactly once?  The
resume modules (mechanisms/resume, scenarios/resume, faults, runners, the
checkers) speak in these names; nothing here does I/O.

- A **run** (LangGraph: a thread) executes a **graph**: an ordered list of
  **nodes**.  One node is the **interrupt** node: it parks the run and, when
  resumed, **consumes** the resume value (LangGraph: ``interrupt(value)``
  inside a node; ``Command(resume=value)``).
- A node fires **effects** (``ctx.effect(key, payload)``): rows of an
  **effect ledger** kept in a store separate from the checkpoints, so they
  outlive the process.  The effects of the first effect-bearing node after
  the interrupt are the interrupt's **gated effects** (the ones a second or
  concurrent resume must not fire again).
- A **checkpoint** is the run's persisted state after ``step`` nodes have
  completed; the newest checkpoint is the run's **head** and its step the
  durable **frontier**.
- A **task** names one execution slot of a node in a run: ``"<step>:<node>"``
  (the same task after a crash and a recovery; LangGraph's task id plays this
  role).

The node semantics are pure and declared as data (:class:`GraphSpec`), so
that a checker can recompute what any run *should* hold and a framework
adapter (LangGraph) can build the same graph: the state is
``{"input": str, "approval": str|None, "steps": int, "log": [str]}``; a node
appends ``"<node>:<approval>"`` to ``log`` and adds one to ``steps``; the
interrupt node sets ``approval`` to the resume value (and logs it); a node
declared ``invalid`` writes ``steps = "invalid"`` (a schema-invalid state, the
checkpoint-validity cell).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from vocabulary.schema import ALWAYS, ANSWERED, HistorySchema, Key, MetaKey, OpSpec

FAMILY = "resume"

# --------------------------------------------------------------------- call outcomes (Status.state)
PARKED = "parked"  # the run stopped at its interrupt and waits for a resume value
DONE = "done"  # the run completed its last node
REFUSED = "refused"  # the call was refused before any node ran (e.g. the interrupt is already consumed)
FAILED = "failed"  # the call ran but ended in an error (e.g. a node returned a schema-invalid state)
STATES = (PARKED, DONE, REFUSED, FAILED)

# --------------------------------------------------------------------- operations of a resume history
START, RESUME, FORK, RECOVER = "start", "resume", "fork", "recover"
#: calls only a framework may have (issue 14's framework-only cells): its own replay of a thread from a past
#: checkpoint, and an external update of the state
REPLAY, UPDATE = "replay", "update"
CALLS = (START, RESUME, FORK, RECOVER, REPLAY, UPDATE)
#: history entries the harness appends after a cell from the stores (status ok, actor "ledger" / "store")
EFFECT, TRACE, CHECKPOINT = "effect", "trace", "checkpoint"

# --------------------------------------------------------------------- trace kinds (rows of the ledger's trace)
NODE_RUN = "node"  # a node began executing (with effects)
CONSUME = "consume"  # the interrupt node consumed a resume value
MEMO = "memo"  # a node was replayed from memoized results, without effects (state rebuild)

# --------------------------------------------------------------------- named injection points
BEFORE_NODE = "before_node"  # a node is about to run (nothing of it has happened)
AFTER_EFFECT = "after_effect"  # an effect is in the ledger, the node has not returned
AFTER_NODE_BEFORE_CHECKPOINT = "after_node_before_checkpoint"  # the node returned, its checkpoint is not written
DURING_CHECKPOINT_WRITE = "during_checkpoint_write"  # inside the checkpoint's transaction, before its commit
#: the saver returned from writing a node's checkpoint (whether it is durable is the store's business): where a
#: power loss tests acknowledged progress (resume_powerloss); not a crash point of the fault matrix
AFTER_CHECKPOINT_WRITE = "after_checkpoint_write"
PARKED_POINT = "parked"  # the parked checkpoint is durable, the call has not returned
AFTER_RESUME_CONSUMED = "after_resume_consumed"  # the resume value is consumed, the next node has not run
POINTS = (BEFORE_NODE, AFTER_EFFECT, AFTER_NODE_BEFORE_CHECKPOINT, DURING_CHECKPOINT_WRITE, PARKED_POINT,
          AFTER_RESUME_CONSUMED)

# --------------------------------------------------------------------- the contract
PC, EO, FD, CV, CO, RD = "PC", "EO", "FD", "CV", "CO", "RD"
PROPERTIES = (PC, EO, FD, CV, CO, RD)
LIVENESS = "liveness"
PROPERTY_NAMES = {
    PC: "prefix consistency: a resume or recovery never re-executes a node at or before the durable frontier",
    EO: "effect exactly-once: every effect of a run fires once (never twice; once for every run that is done)",
    FD: "fork determinism: a fork resumed with a value ends as the graph says for that checkpoint and value",
    CV: "checkpoint validity: no schema-invalid state is ever persisted",
    CO: "consume-once: a parked interrupt's value is consumed at most once, its gated effects fire at most once, "
        "and every later resume of it is refused",
    RD: "recovery determinism: recoveries from the same durable frontier end the same",
    LIVENESS: "liveness: the first resume of a parked interrupt is served (refusing everything is not conformance)",
}

#: The state schema every lab graph declares: field -> allowed Python type names.
SCHEMA: dict[str, tuple[str, ...]] = {"input": ("str",), "approval": ("str", "NoneType"), "steps": ("int",),
                                      "log": ("list",)}


@dataclass(frozen=True)
class NodeSpec:
    """One node of the lab's graph: its name, the effect keys it fires, whether it is the interrupt."""

    name: str
    effects: tuple[str, ...] = ()
    interrupt: bool = False
    invalid: bool = False  # returns a schema-invalid state (the checkpoint-validity cell)
    work_ms: float = 0.0  # the node's own work (a model or tool call) before its effects, in milliseconds


@dataclass(frozen=True)
class GraphSpec:
    """The lab's small graph, declared as data (``scenarios/resume/*.toml``, ``[graph]``).

    Pure: :meth:`apply` is the node semantics every runtime must reproduce;
    :meth:`expected` runs it from a state to the end (what a checker compares with).
    """

    name: str
    nodes: tuple[NodeSpec, ...]
    schema: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: dict(SCHEMA))
    #: how a framework adapter should build the graph beyond the node semantics (``parallel``: sibling nodes run in
    #: one step; ``state``: how the state is declared); the lab's own runtimes run the nodes in order regardless
    hints: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"graph {self.name}: node names repeat: {names}")
        if sum(n.interrupt for n in self.nodes) != 1:
            raise ValueError(f"graph {self.name}: exactly one node must be the interrupt")

    # ---- shape
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    def node(self, name: str) -> NodeSpec:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    @property
    def interrupt_step(self) -> int:
        """The index of the interrupt node (the run parks with ``step`` = this many nodes done)."""
        return next(i for i, n in enumerate(self.nodes) if n.interrupt)

    @property
    def interrupt_node(self) -> str:
        return self.nodes[self.interrupt_step].name

    @property
    def gated_node(self) -> str | None:
        """The first effect-bearing node after the interrupt: its effects are the gated effects."""
        return next((n.name for n in self.nodes[self.interrupt_step + 1:] if n.effects), None)

    def task(self, step: int) -> str:
        """The task id of the node at ``step``: ``"<step>:<node>"``."""
        return f"{step}:{self.nodes[step].name}"

    def effect_keys(self) -> list[tuple[str, str]]:
        """Every (task, effect key) a run that reaches done fires, in order."""
        return [(self.task(i), k) for i, n in enumerate(self.nodes) for k in n.effects]

    # ---- semantics
    @staticmethod
    def initial_state(input: str) -> dict[str, Any]:
        return {"input": str(input), "approval": None, "steps": 0, "log": []}

    def apply(self, step: int, state: Mapping[str, Any], resume: Any = None) -> dict[str, Any]:
        """The state after the node at ``step`` ran on ``state`` (the interrupt node consumes ``resume``)."""
        node = self.nodes[step]
        new = {**state, "log": list(state.get("log", []))}
        if node.interrupt:
            new["approval"] = None if resume is None else str(resume)
        steps = new.get("steps", 0)
        new["steps"] = (steps + 1) if isinstance(steps, int) else steps
        new["log"].append(f"{node.name}:{new.get('approval')}")
        if node.invalid:
            new["steps"] = "invalid"
        return new

    def payload(self, step: int, key: str, state: Mapping[str, Any]) -> str:
        """The payload of an effect, from the state the node ran on (after the interrupt consumed)."""
        return f"{self.nodes[step].name}/{key}:{state.get('input')}:{state.get('approval')}"

    def expected(self, state: Mapping[str, Any], step: int, resume: Any = None) -> dict[str, Any]:
        """Run the pure semantics from ``state`` (``step`` nodes done) to the end, consuming ``resume``."""
        out = dict(state)
        for i in range(step, len(self.nodes)):
            out = self.apply(i, out, resume)
        return out

    def problems(self, state: Mapping[str, Any]) -> list[str]:
        """Why ``state`` violates the schema ([] when it is valid)."""
        out = [f"missing field {f!r}" for f in self.schema if f not in state]
        out += [f"unknown field {f!r}" for f in state if f not in self.schema]
        for f, types in self.schema.items():
            if f in state and type(state[f]).__name__ not in types:
                out.append(f"{f}={state[f]!r} is a {type(state[f]).__name__}, not {'/'.join(types)}")
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (kept in a history's meta, so a checker can rebuild the graph)."""
        out = {"name": self.name, "nodes": [{"name": n.name, "effects": list(n.effects), "interrupt": n.interrupt,
                                             "invalid": n.invalid, "work_ms": n.work_ms} for n in self.nodes]}
        if self.hints:
            out["hints"] = dict(self.hints)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "GraphSpec":
        return cls(raw["name"], tuple(NodeSpec(n["name"], tuple(n.get("effects", ())), bool(n.get("interrupt")),
                                               bool(n.get("invalid")), float(n.get("work_ms", 0.0)))
                                      for n in raw["nodes"]), hints=dict(raw.get("hints") or {}))

    def with_invalid(self, node: str | None) -> "GraphSpec":
        """The same graph with ``node`` returning a schema-invalid state (None: unchanged)."""
        if node is None:
            return self
        self.node(node)
        return GraphSpec(self.name, tuple(NodeSpec(n.name, n.effects, n.interrupt, n.name == node, n.work_ms)
                                          for n in self.nodes), self.schema, self.hints)


#: The lab's default graph: an effect before the interrupt, the gated effect after it, one more after that.
DEFAULT_GRAPH = GraphSpec("approval", (
    NodeSpec("prepare", ("reserve",)),
    NodeSpec("approve", (), interrupt=True),
    NodeSpec("act", ("charge",)),
    NodeSpec("notify", ("email",)),
))


@dataclass(frozen=True)
class Backend:
    """Where a runtime keeps its checkpoints, and where the effect ledger lives (a separate store).

    ``kind`` is ``"sqlite"`` (``location`` = a folder: checkpoints in
    ``<namespace>checkpoints.sqlite``, the ledger in ``<namespace>ledger.sqlite``)
    or ``"postgres"`` (``location`` = a DSN; checkpoints in schema
    ``<namespace>``, the ledger in schema ``<namespace>_ledger``).
    """

    kind: str
    location: str
    namespace: str = "driftlab_resume"
    #: SQLite only: the folder of the effect ledger when it must not share the checkpoints' (the power-loss
    #: cells keep the checkpoints on a lazy file system and the ledger, the world, outside it); "" = ``location``
    ledger_location: str = ""

    def __post_init__(self):
        if self.kind not in ("sqlite", "postgres"):
            raise ValueError(f"backend kind {self.kind!r}: expected sqlite or postgres")

    def to_dict(self) -> dict[str, str]:
        out = {"kind": self.kind, "location": self.location, "namespace": self.namespace}
        if self.ledger_location:
            out["ledger_location"] = self.ledger_location
        return out


@dataclass(frozen=True)
class Status:
    """What a call came to.

    ``state``: parked | done | refused | failed.  ``checkpoint_id`` is the
    run's head afterwards; ``node`` the node it is parked at (or that
    failed); ``interrupt`` the value the interrupt node offers when parked;
    ``values`` the run's state at its head; ``reason`` one line when refused
    or failed.  A resume is **served** when it was not refused.
    """

    run_id: str
    state: str
    checkpoint_id: str | None = None
    node: str | None = None
    interrupt: Any = None
    values: Mapping[str, Any] | None = None
    reason: str = ""

    @property
    def served(self) -> bool:
        return self.state != REFUSED

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run_id, "state": self.state, "checkpoint": self.checkpoint_id, "node": self.node,
                "values": dict(self.values) if self.values is not None else None, "reason": self.reason}


@dataclass(frozen=True)
class Checkpoint:
    """A persisted state of a run after ``step`` nodes completed (``next`` is the node to run next)."""

    id: str
    run_id: str
    step: int
    next: str | None
    values: Mapping[str, Any]
    parent_id: str | None = None
    created: float = 0.0  # seconds since the epoch (time.time(); one clock for every process of the machine)
    parked: bool = False  # the run waits at its interrupt here

    def to_dict(self) -> dict[str, Any]:
        return {"checkpoint": self.id, "run": self.run_id, "step": self.step, "next": self.next,
                "values": dict(self.values), "parent": self.parent_id, "created": self.created, "parked": self.parked}


@dataclass(frozen=True)
class Effect:
    """One effect that fired: a row of the effect ledger."""

    seq: int
    run_id: str
    task: str
    key: str
    payload: str
    pid: int
    at: float  # time.time()
    op: str = ""  # the history operation (actor/label) during which it fired

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "run": self.run_id, "task": self.task, "effect": self.key, "payload": self.payload,
                "pid": self.pid, "at": self.at, "op": self.op}


@dataclass(frozen=True)
class TraceRow:
    """One row of the ledger's trace: a node ran (``node``), consumed a value (``consume``) or was memo-replayed."""

    seq: int
    run_id: str
    step: int
    node: str
    kind: str
    value: Any
    pid: int
    at: float
    op: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "run": self.run_id, "step": self.step, "node": self.node, "kind": self.kind,
                "resume": self.value, "pid": self.pid, "at": self.at, "op": self.op}


# --------------------------------------------------------------------- the history format (driftlab check)


#: a history's meta key: the harness read the stores (checkpoints, ledger) into the history after the calls
STORES_READ = "stores_read"


def _graph(raw) -> str | None:
    if not isinstance(raw, dict):
        return f"must be an object {{name, nodes: [{{name, effects, interrupt, invalid, work_ms}}]}} (got {raw!r})"
    try:
        GraphSpec.from_dict(raw)
    except (KeyError, TypeError, ValueError) as exc:
        return f"not a graph ({type(exc).__name__}: {exc})"
    return None


_CALL = (Key("run", "string", ALWAYS), Key("op", "string", ALWAYS, doc="the call's label, stamped on its ledger rows"),
         Key("group", "key"), Key("state", "string", ANSWERED, choices=STATES), Key("values", "object", nullable=True),
         Key("resume", "any"), Key("checkpoint", "string", nullable=True), Key("reason", "string"),
         Key("ordinal", "integer"))
HISTORY = HistorySchema(
    "resume",
    operations=(
        OpSpec(START, "the harness starts a run (indeterminate: its process was killed)", _CALL),
        OpSpec(RESUME, "the harness resumes a run with a value (`resume`), at its head or at `checkpoint`", _CALL),
        OpSpec(FORK, "the harness forks a new run from a checkpoint of another",
               _CALL + (Key("from_run", "string"), Key("from_checkpoint", "string", nullable=True))),
        OpSpec(RECOVER, "the harness recovers a run after a crash (`ordinal`: its n-th recovery)", _CALL),
        OpSpec(REPLAY, "a framework's own re-run of a thread from a past checkpoint (`checkpoint`): a "
               "framework-only cell", _CALL),
        OpSpec(UPDATE, "an external update of a run's state (`update`: the values given): a framework-only cell",
               _CALL + (Key("update", "object"),)),
        OpSpec(CHECKPOINT, "a checkpoint the store holds afterwards",
               (Key("run", "string", ALWAYS), Key("step", "integer", ALWAYS), Key("values", "object", ALWAYS),
                Key("created", "number", ALWAYS), Key("parked", "boolean"), Key("checkpoint", "string"),
                Key("next", "string", nullable=True), Key("parent", "string", nullable=True))),
        OpSpec(EFFECT, "an effect that fired (a row of the effect ledger)",
               (Key("run", "string", ALWAYS), Key("task", "string", ALWAYS), Key("effect", "string", ALWAYS),
                Key("op", "string"), Key("at", "number"), Key("payload", "any"))),
        OpSpec(TRACE, "a row of the ledger's trace: a node ran, consumed the resume value, or was memo-replayed",
               (Key("run", "string", ALWAYS), Key("step", "integer", ALWAYS),
                Key("kind", "string", ALWAYS, choices=(NODE_RUN, CONSUME, MEMO)), Key("node", "string"),
                Key("op", "string"), Key("at", "number"), Key("resume", "any"))),
    ),
    meta=(MetaKey("graph", "the graph, `GraphSpec.to_dict()`: the schema, the interrupt, the gated node", _graph),
          MetaKey(STORES_READ, "`true` when the harness read the stores after the calls: an execution with no "
                  "checkpoint, effect or trace entry then left nothing durable (judged), not a history without its "
                  "stores (unknown)", lambda raw: None if isinstance(raw, bool) else f"must be true or false (got "
                  f"{raw!r})")),
    partition=("group", "run"),
    separable=False,
)
