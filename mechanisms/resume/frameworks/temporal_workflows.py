"""The lab's graph as a Temporal workflow (deterministic; Temporal's sandbox re-imports this module).

Serves issue 14 (Temporal under the harness of "Resume Means Resume", arXiv
2608.03836).  Imports nothing but ``temporalio``: the node bodies are the
activity ``driftlab-node`` (``temporal.py``, run by the worker), so effects
and crash points live in activities, never in workflow code.

``GraphWorkflow.run(args)``: for each node in order, the activity with the
node's index and the state; at the interrupt node, first wait for the
decision (``workflow.wait_condition``), delivered by the signal ``decide``
(``{"value", "op"}``: the value and the label of the resume that sent it):
the first decision is kept, later ones are recorded by Temporal and ignored
here.  The nodes from the interrupt on carry the kept decision's label, so the
effects of a decision are stamped with the resume that made it, whichever
worker runs them.  Returns the final state.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

NODE_ACTIVITY = "driftlab-node"


@workflow.defn(name="driftlab-graph")
class GraphWorkflow:
    def __init__(self) -> None:
        self.decision: Any = None
        self.decision_op = ""
        self.decided = False

    @workflow.run
    async def run(self, args: dict) -> dict:
        state = args["initial"]
        timeout = timedelta(seconds=args.get("activity_timeout_s", 2.0))
        retry = RetryPolicy(initial_interval=timedelta(milliseconds=100), backoff_coefficient=1.0)
        for step, node in enumerate(args["nodes"]):
            resume = None
            if node.get("interrupt"):
                await workflow.wait_condition(lambda: self.decided)
                resume = self.decision
            state = await workflow.execute_activity(NODE_ACTIVITY, {"step": step, "state": state, "resume": resume,
                                                                    "op": self.decision_op},
                                                    start_to_close_timeout=timeout, retry_policy=retry)
        return state

    @workflow.signal
    def decide(self, decision: dict) -> None:
        if not self.decided:
            self.decision, self.decision_op, self.decided = decision["value"], decision.get("op", ""), True
