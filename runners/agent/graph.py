"""The refund agent as a LangGraph graph (LLM-free, deterministic), built for one mechanism stack.

Serves issue 15's agent family.  Four nodes, in the resume family's terms
(``vocabulary.agent.NODES``):

- ``decide`` reads the order and the policy, resolves ``prompt:refund``,
  ``model:refund`` and ``policy:refund`` and proposes the refund; it keeps in
  the state the versions of the rows it read and, with the ``premises``
  layer, driftlab_guard's park record of the declared premises;
- ``approve`` parks at ``interrupt(proposal)`` and consumes the approval;
- ``act`` (where the ``after_resume_consumed`` point is: the approval is
  consumed, this node has not begun) decides, before releasing, whether the
  action still holds (driftlab_guard's ``Revalidator`` with the ``premises``
  layer, else the agent's own version check), resolves the prompt and model
  again to render the message,
  and fires the ``outcome`` effect: the refund (KEEP / REFRESH), a replan
  request or a block notice;
- ``notify`` runs a subgraph (a child workflow) that resolves the prompt to
  compose the e-mail, then fires the ``email`` effect.

Resolution goes through driftlab_guard's ``Pins`` (a manifest channel of the
state, handed to the subgraph) with the ``pinning`` layer, else to the live
alias.  The two adapters below read the ledger for driftlab_guard:
:class:`LedgerSource` (the premises' fields, versioned by value) and
:class:`LedgerResources` (the live version behind each alias).

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
from vocabulary.agent import ACT_NODE, AFTER_EFFECT, AFTER_RESUME_CONSUMED, INTERRUPT_NODE, NODES, REFRESH, SAFE

IDENTITIES = ("prompt:refund", "model:refund", "policy:refund")


def render(prompt: int, model: int, policy: int | None, customer: str, amount: Any) -> str:
    """The deterministic "model": its message depends on every version it was given."""
    return f"[prompt@{prompt} model@{model}" + (f" policy@{policy}" if policy else "") + \
        f"] refund {amount} GBP to {customer}"


class LedgerSource:
    """driftlab_guard's premise source over the ledger: ``object.field`` -> (value, version = the value itself)."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger

    def read(self, refs):
        objects, _ = self.ledger.objects()
        out = {}
        for ref in refs:
            obj, _, fld = ref.partition(".")
            if fld in objects.get(obj, {}):
                out[ref] = (objects[obj][fld], json.dumps(objects[obj][fld], sort_keys=True))
        return out


def ledger_resources(ledger: Ledger, scenario):
    """driftlab_guard ``Resources`` whose live versions are the ledger's aliases (every declared version retained)."""
    import driftlab_guard

    class LedgerResources(driftlab_guard.Resources):
        def live(self, alias):
            return ledger.live(alias)

        def retained(self, alias):
            return sorted(scenario.resources.get(alias, ()), reverse=True)

        def get(self, alias, version):
            return None

    return LedgerResources(scenario.contracts)


def build(stack, scenario, ledger: Ledger, saver, op: str, point: Callable[[str, str], None], record: bool = True):
    """The compiled agent for ``stack``, recording into ``ledger`` under the call label ``op``.

    ``record=False`` leaves out the lab's own instrumentation (the trace and the resolution events the history
    is read from), so that a benchmark times the agent and its stack only; effects always fire."""
    once = stack.ledger_class()(ledger.conn).setup() if stack.once else None
    revalidator = premises = None
    if stack.premises_layer:
        import driftlab_guard
        premises = stack.premises(scenario)
        revalidator = driftlab_guard.Revalidator(LedgerSource(ledger), premises)
    pins = None
    if stack.pinning:
        import driftlab_guard
        pins = driftlab_guard.Pins(ledger_resources(ledger, scenario))
    manifest_type = pins.channel() if pins is not None else dict

    AgentState = TypedDict("AgentState", {  # noqa: N806 - a state class, built per stack (its manifest channel)
        "input": str, "approval": "str | None", "steps": int, "log": list, "proposal": dict, "parked": dict,
        "versions": dict, "pins": manifest_type, "outcome": str}, total=False)
    NoticeState = TypedDict("NoticeState", {"run": str, "pins": manifest_type, "text": str},  # noqa: N806
                            total=False)

    def nothing(*_args) -> None:
        return None

    trace, event = (ledger.trace, ledger.event) if record else (nothing, nothing)

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

    def resolver(run: str, workflow: str, state: dict):
        """resolve(identity) -> version, recorded; and the state update that pins what was bound."""
        binding = pins.bind(state) if pins is not None else None

        def resolve(identity: str) -> int:
            version = binding.resolve(identity).version if binding is not None else ledger.live(identity)
            event(run, "resolve", workflow, identity, version, None, op)
            return version
        return resolve, (lambda: binding.update() if binding is not None else {})

    def step(state: dict, node: str) -> dict:
        return {"steps": state.get("steps", 0) + 1, "log": [*state.get("log", []), f"{node}:{state.get('approval')}"]}

    def decide(state: dict, config) -> dict:
        run = run_of(config)
        trace(run, 0, "decide", "node", None, op)
        objects, versions = ledger.objects()
        resolve, pinned = resolver(run, run, state)
        bound = {ident: resolve(ident) for ident in IDENTITIES}
        order = objects["order"]
        text = render(bound["prompt:refund"], bound["model:refund"], bound["policy:refund"], order["customer_name"],
                      order["amount"])
        parked = revalidator.park(premises) if revalidator is not None else {}
        return {**step(state, "decide"), **pinned(), "parked": parked, "versions": versions,
                "proposal": {"amount": order["amount"], "customer": order["customer_name"], "text": text}}

    def approve(state: dict, config) -> dict:
        run = run_of(config)
        trace(run, 1, INTERRUPT_NODE, "node", None, op)
        value = interrupt(state["proposal"])
        trace(run, 1, INTERRUPT_NODE, "consume", value, op)
        return {"approval": str(value), **step({**state, "approval": str(value)}, INTERRUPT_NODE)}

    def act(state: dict, config) -> dict:
        run = run_of(config)
        point(AFTER_RESUME_CONSUMED, INTERRUPT_NODE)
        trace(run, 2, ACT_NODE, "node", state.get("approval"), op)
        objects, versions = ledger.objects()
        if revalidator is not None:
            verdict = revalidator.revalidate(state["parked"])
            outcome, evaluated = verdict.outcome.name, len(verdict.evaluated)
        else:  # the agent as written: compare the version of the row it acts on
            moved = versions[scenario.stock_check] != state["versions"][scenario.stock_check]
            outcome, evaluated = ("REPLAN" if moved else "KEEP"), 0
        resolve, pinned = resolver(run, run, state)
        prompt, model = resolve("prompt:refund"), resolve("model:refund")
        released = outcome in SAFE
        order, proposal = objects["order"], state["proposal"]
        current = render(prompt, model, None, order["customer_name"], order["amount"])
        payload = current if outcome == REFRESH else render(prompt, model, None, proposal["customer"],
                                                            proposal["amount"])
        body = {"outcome": outcome, "released": released, "payload": payload if released else None,
                "payload_stale": released and payload != current, "evaluated": evaluated}
        fire(run, ACT_NODE, "outcome", json.dumps(body, sort_keys=True))
        point(AFTER_EFFECT, ACT_NODE)
        return {**step(state, ACT_NODE), **pinned(), "outcome": outcome}

    def compose(child: dict, config) -> dict:
        run = child["run"]
        resolve, pinned = resolver(run, f"{run}/notify", child)
        return {**pinned(), "text": f"[prompt@{resolve('prompt:refund')}] your refund request was handled"}

    notice = StateGraph(NoticeState)
    notice.add_node("compose", compose)
    notice.add_edge(START, "compose")
    notice.add_edge("compose", END)
    notice_graph = notice.compile()

    def notify(state: dict, config) -> dict:
        run = run_of(config)
        trace(run, 3, "notify", "node", state.get("approval"), op)
        event(run, "spawn", run, None, None, f"{run}/notify", op)
        out = notice_graph.invoke({"run": run, "pins": stack.subgraph_manifest(state.get("pins") or {})})
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
