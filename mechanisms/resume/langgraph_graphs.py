"""The lab's resume graph as a real LangGraph ``StateGraph``: LLM-free, deterministic, three kinds of typed state.

Serves "Resume Means Resume" (arXiv 2608.03836), which measured LangGraph:
the resume family declares its graph as data (:class:`vocabulary.resume.GraphSpec`:
nodes in order, one of them the interrupt), and this module builds the same
graph with LangGraph's own parts: one node per ``GraphSpec`` node, edges in
order, ``langgraph.types.interrupt`` inside the interrupt node.

The state has the four fields of ``vocabulary.resume.SCHEMA`` (``input``,
``approval``, ``steps``, ``log``; ``log`` replaced, never reduced) declared
three ways, because LangGraph checks each differently:

- ``typeddict``: never checked;
- ``dataclass``: LangGraph builds the dataclass for a node's input, no type check;
- ``pydantic``: validated when LangGraph builds a node's input (so a
  schema-invalid value a node returned is persisted first and fails the *next*
  node, or the next ``get_state``).

A node's body is the caller's ``body(run_id, step, state_dict, resume)`` (the
runtime's ``run_node``): the graph adds nothing of its own, so what a run does
is what the declared semantics say.  The interrupt node calls ``interrupt``
first, before any work, so a parked run has done nothing in that node.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from pydantic import BaseModel, Field

from vocabulary.resume import GraphSpec

FIELDS = ("input", "approval", "steps", "log")


class LabState(TypedDict):
    input: str
    approval: Optional[str]
    steps: int
    log: list[str]


@dataclasses.dataclass
class LabStateDataclass:
    input: str = ""
    approval: Optional[str] = None
    steps: int = 0
    log: list[str] = dataclasses.field(default_factory=list)


class LabStateModel(BaseModel):
    input: str = ""
    approval: Optional[str] = None
    steps: int = 0
    log: list[str] = Field(default_factory=list)


STATE_KINDS: dict[str, type] = {"typeddict": LabState, "dataclass": LabStateDataclass, "pydantic": LabStateModel}

#: body(run_id, step, state, resume) -> new state (a dict of the four fields)
Body = Callable[[str, int, dict, Any], dict]
#: hook(name, run_id, step) called at the graph's own points
Hook = Callable[[str, str, int], None]


def as_dict(state: Any) -> dict[str, Any]:
    """A node's input (dict, dataclass or pydantic model) as a plain dict of the four fields."""
    if isinstance(state, dict):
        return {k: state[k] for k in FIELDS if k in state}
    return {k: getattr(state, k) for k in FIELDS}


def initial_input(kind: str, values: dict[str, Any]) -> Any:
    """The input LangGraph gets to start a run with ``values``: a dict for every kind of state.

    LangGraph builds the dataclass or the model itself; an instance passed as
    input would be stored in the input checkpoint as a pickled class.
    """
    if kind not in STATE_KINDS:
        raise ValueError(f"state kind {kind!r}: expected one of {', '.join(STATE_KINDS)}")
    return dict(values)


def build_graph(spec: GraphSpec, body: Body, kind: str = "typeddict", *,
                payload: Callable[[str], Any] = lambda run_id: {"question": "approve?"},
                before: Hook | None = None, after: Hook | None = None) -> StateGraph:
    """The ``StateGraph`` of ``spec`` (not compiled).  ``before``/``after`` are called around each body."""
    if kind not in STATE_KINDS:
        raise ValueError(f"state kind {kind!r}: expected one of {', '.join(STATE_KINDS)}")
    graph = StateGraph(STATE_KINDS[kind])

    def make(step: int):
        node = spec.nodes[step]

        def run(state, config):
            run_id = str(config["configurable"]["thread_id"])
            value = interrupt(payload(run_id)) if node.interrupt else None
            if before:
                before("before", run_id, step)
            new = body(run_id, step, as_dict(state), value)
            if after:
                after("after", run_id, step)
            return new

        run.__name__ = node.name
        return run

    for step, node in enumerate(spec.nodes):
        graph.add_node(node.name, make(step))
    names = [START, *spec.names, END]
    for a, b in zip(names, names[1:]):
        graph.add_edge(a, b)
    return graph
