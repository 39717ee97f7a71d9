"""The refund agent as a LangGraph graph (LLM-free, deterministic), built for one mechanism stack.

Serves issue 15's agent family.  Four nodes, in the resume family's terms
(``vocabulary.agent.NODES``):

- ``decide`` reads the order and the policy, resolves ``prompt:refund``,
  ``model:refund`` and ``policy:refund`` and proposes the refund; it keeps a
  snapshot of what it read (and the versions of the rows) in the state;
- ``approve`` parks at ``interrupt(proposal)`` and consumes the approval;
- ``act`` decides, before releasing, whether the action still holds (the
  stack's check: ATR with the ``premises`` layer, else the agent's own
  version check), resolves the prompt and model again to render the message,
  and fires the ``outcome`` effect: the refund (KEEP / REFRESH), a replan
  request or a block notice;
- ``notify`` runs a subgraph (a child workflow) that resolves the prompt to
  compose the e-mail, then fires the ``email`` effect.

"The model" is a pure function of its version and the evidence (no network,
no weights).  Every node appends to the ledger's trace, every resolution to
its events, every effect to its effects (through the guard's idempotent
ledger when the stack has the ``once`` layer), each stamped with the call's
label (``op``), so the history can be read back from the stores afterwards.
``point(name, node)`` is where a crash point may SIGKILL the process.
"""
from __future__ import annotations

import json
from typing import Any, Callable, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from runners.agent.stores import Ledger
from vocabulary.agent import ACT_NODE, AFTER_EFFECT, AFTER_RESUME_CONSUMED, NODES, REFRESH, SAFE

IDENTITIES = ("prompt:refund", "model:refund", "policy:refund")


class AgentState(TypedDict, total=False):
    input: str
    approval: str | None
    steps: int
    log: list[str]
    proposal: dict
    snapshot: dict
    versions: dict
    manifest: dict
    outcome: str


class NoticeState(TypedDict, total=False):
    run: str
    manifest: dict
    text: str


def render(prompt: int, model: int, policy: int | None, customer: str, amount: Any) -> str:
    """The deterministic "model": its message depends on every version it was given."""
    return f"[prompt@{prompt} model@{model}" + (f" policy@{policy}" if policy else "") + \
        f"] refund {amount} GBP to {customer}"


def build(stack, scenario, ledger: Ledger, saver, op: str, point: Callable[[str, str], None]):
    """The compiled agent for ``stack``, recording into ``ledger`` under the call label ``op``."""
    once = None
    if stack.once:
        from mechanisms.agent.stacks import once_parts
        once = once_parts()[1](ledger.conn).setup()

    def task(node: str) -> str:
        return f"{NODES.index(node)}:{node}"

    def run_of(config) -> str:
        return str(config["configurable"]["thread_id"])

    def fire(run: str, node: str, key: str, payload: str) -> None:
        if once is None:
            ledger.effect(run, task(node), key, payload, op)
        else:
            once.once(run, task(node), key, lambda conn: ledger.effect(run, task(node), key, payload, op, conn),
                      transactional=True)

    def resolve(run: str, workflow: str, manifest: dict, identity: str) -> tuple[int, dict]:
        version, manifest = stack.resolve(scenario, manifest, identity, ledger.live(identity))
        ledger.event(run, "resolve", workflow, identity, version, None, op)
        return version, manifest

    def step(state: AgentState, node: str) -> dict:
        return {"steps": state.get("steps", 0) + 1, "log": [*state.get("log", []), f"{node}:{state.get('approval')}"]}

    def decide(state: AgentState, config) -> dict:
        run = run_of(config)
        ledger.trace(run, 0, "decide", "node", None, op)
        objects, versions = ledger.objects()
        manifest = dict(state.get("manifest") or {})
        bound = {}
        for ident in IDENTITIES:
            bound[ident], manifest = resolve(run, run, manifest, ident)
        snapshot = stack.revalidator(scenario).snapshot(objects)
        order = objects["order"]
        text = render(bound["prompt:refund"], bound["model:refund"], bound["policy:refund"], order["customer_name"],
                      order["amount"])
        return {**step(state, "decide"), "snapshot": snapshot, "versions": versions, "manifest": manifest,
                "proposal": {"amount": order["amount"], "customer": order["customer_name"], "text": text}}

    def approve(state: AgentState, config) -> dict:
        run = run_of(config)
        ledger.trace(run, 1, "approve", "node", None, op)
        value = interrupt(state["proposal"])
        ledger.trace(run, 1, "approve", "consume", value, op)
        point(AFTER_RESUME_CONSUMED, "approve")
        new = {**state, "approval": str(value)}
        return {"approval": str(value), **step(new, "approve")}

    def act(state: AgentState, config) -> dict:
        run = run_of(config)
        ledger.trace(run, 2, ACT_NODE, "node", state.get("approval"), op)
        objects, versions = ledger.objects()
        outcome, evaluated = stack.check(scenario, state["snapshot"], state["versions"], objects, versions)
        manifest = dict(state.get("manifest") or {})
        prompt, manifest = resolve(run, run, manifest, "prompt:refund")
        model, manifest = resolve(run, run, manifest, "model:refund")
        released = outcome in SAFE
        proposal = state["proposal"]
        if outcome == REFRESH:  # re-render the payload from what holds now
            payload = render(prompt, model, None, objects["order"]["customer_name"], objects["order"]["amount"])
        else:
            payload = render(prompt, model, None, proposal["customer"], proposal["amount"])
        current = render(prompt, model, None, objects["order"]["customer_name"], objects["order"]["amount"])
        body = {"outcome": outcome, "released": released, "payload": payload if released else None,
                "payload_stale": released and payload != current, "evaluated": evaluated}
        fire(run, ACT_NODE, "outcome", json.dumps(body, sort_keys=True))
        point(AFTER_EFFECT, ACT_NODE)
        return {**step(state, ACT_NODE), "outcome": outcome, "manifest": manifest}

    def compose(child: NoticeState, config) -> dict:
        run = child["run"]
        workflow = f"{run}/notify"
        version, manifest = resolve(run, workflow, dict(child.get("manifest") or {}), "prompt:refund")
        return {"manifest": manifest, "text": f"[prompt@{version}] your refund request was handled"}

    notice = StateGraph(NoticeState)
    notice.add_node("compose", compose)
    notice.add_edge(START, "compose")
    notice.add_edge("compose", END)
    notice_graph = notice.compile()

    def notify(state: AgentState, config) -> dict:
        run = run_of(config)
        ledger.trace(run, 3, "notify", "node", state.get("approval"), op)
        ledger.event(run, "spawn", run, None, None, f"{run}/notify", op)
        out = notice_graph.invoke({"run": run, "manifest": stack.inherit(scenario, state.get("manifest") or {})})
        fire(run, "notify", "email", out["text"])
        return step(state, "notify")

    g = StateGraph(AgentState)
    for name, fn in (("decide", decide), ("approve", approve), ("act", act), ("notify", notify)):
        g.add_node(name, fn)
    g.add_edge(START, "decide")
    g.add_edge("decide", "approve")
    g.add_edge("approve", "act")
    g.add_edge("act", "notify")
    g.add_edge("notify", END)
    return g.compile(checkpointer=saver)
