"""The agent family's use of the guard's layers, each test naming the planted bug it catches.

Real LangGraph and driftlab_guard; the execution tests run the refund agent in
real forked processes on real SQLite files (runners/agent/execution.py).
"""
from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import TypedDict

import pytest

pytest.importorskip("driftlab_guard")

import driftlab_guard  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402

from analysis.agent.checkers import judge  # noqa: E402
from mechanisms.agent.stacks import stack  # noqa: E402
from runners.agent import execution  # noqa: E402
from runners.agent.stores import fresh  # noqa: E402
from scenarios import read_toml  # noqa: E402
from scenarios.agent.loader import AgentCase, parse_scenario  # noqa: E402
from vocabulary import Verdict  # noqa: E402
from vocabulary.agent import CHANGE_CLASSES, SAFE, STOCK  # noqa: E402

pytestmark = pytest.mark.xdist_group("test_agent_layers")  # one worker: its module-scoped fixture runs once

SCENARIO = Path(__file__).parents[1] / "scenarios" / "agent" / "refund_agent.toml"


@pytest.fixture(scope="module")
def scenario():
    return parse_scenario(SCENARIO, read_toml(SCENARIO))


def revalidate(st, scenario, change: str) -> str:
    """The premises layer's outcome for one premise change, on driftlab_guard's in-memory source."""
    flat = {f"{o}.{f}": v for o, fields in scenario.state.items() for f, v in fields.items()}
    source = driftlab_guard.DictSource(flat)
    premises = st.premises(scenario)
    guard = driftlab_guard.Revalidator(source, premises)
    parked = guard.park(premises)
    ch = scenario.changes[change]
    source.write(ch.field, ch.value)
    return guard.revalidate(parked).outcome.name


def test_premises_layer_agrees_with_the_oracle_on_every_premise_change(scenario):
    """Catches a revalidation layer (or its declaration of the premises) that disagrees with the scenario's
    declared rules: every class's outcome must be the oracle's, so 0 false allows and 0 false blocks."""
    got = {c: revalidate(stack("premises"), scenario, c) for c in CHANGE_CLASSES}
    assert got == {c: scenario.oracle(c) for c in CHANGE_CLASSES}


@pytest.mark.parametrize("planted, change", [("skip:payload", "presentation"), ("skip:rule", "blocking"),
                                              ("skip:rule", "replanning")])
def test_a_layer_that_skips_one_premise_class_is_caught(scenario, planted, change):
    """Catches a layer that skips one premise class (planted: no REFRESH premise for the payload fields, or no
    business rule): the oracle comparison names the class it gets wrong, as a false allow."""
    outcome = revalidate(stack("premises", [planted]), scenario, change)
    assert outcome != scenario.oracle(change)
    assert outcome in SAFE and scenario.oracle(change) != "KEEP"  # released where the rules say otherwise


def run_case(scenario, st, case: AgentCase):
    with fresh("sqlite") as stores:
        execution.setup(st, scenario, stores)
        history = execution.execute(scenario, case, st, stores, "r0", "0")
    return history, judge(history)


@pytest.mark.planted("analysis.isolation.checkers:ContextEscape.scan", "if u != v:", "if False:")  # escape unseen
def test_a_manifest_not_inherited_by_the_subgraph_is_a_context_escape(scenario):
    """Catches a pinning layer whose manifest is not inherited by a subgraph (planted: the notify subgraph starts
    with an empty manifest): after the prompt is redeployed the child resolves it live, and the isolation family's
    context_escape checker, reached through the shared registry, names the steps."""
    case = AgentCase("prompt_only", "none", "prompt", 1, "none")
    _, ok = run_case(scenario, stack("pinning"), case)
    assert ok["isolation", "context_escape"].verdict is Verdict.VALID
    assert ok["isolation", "semantic_read_skew"].verdict is Verdict.VALID
    history, bad = run_case(scenario, stack("pinning", ["no_subgraph_inheritance"]), case)
    escape = bad["isolation", "context_escape"]
    assert escape.verdict is Verdict.INVALID
    assert "r0/notify" in escape.witnesses[0].explanation and "prompt:refund@2" in escape.witnesses[0].explanation


@pytest.mark.parametrize("case, failing", [
    ("presentation_prompt_k2", (("revalidation", "oracle_agreement"), ("isolation", "semantic_read_skew"),
                                ("isolation", "compatibility_skew"), ("resume", "CO"))),
    ("blocking_policy_crash_effect", (("revalidation", "oracle_agreement"), ("resume", "EO"))),
    ("replanning_prompt_crash_consumed", (("agent", "completes"),)),
])
def test_stock_shows_its_failures_and_all_layers_show_none(scenario, case, failing):
    """Catches a judgement that misses a failure, or a full stack that leaks one: two approvers at once with a
    redeployment and a presentation change give stock a needless replan, read and compatibility skew and a second
    approval accepted; a SIGKILL after the effect, a double effect and a stale release; a SIGKILL after the
    approval was consumed under durability "exit", a run that never completes -- each from its own family's
    checker; all three layers give none of them, and no other verdict but valid."""
    _, stock = run_case(scenario, stack(STOCK), scenario.case(case))
    for key in failing:
        assert stock[key].verdict is Verdict.INVALID, key
    _, full = run_case(scenario, stack("once+premises+pinning"), scenario.case(case))
    assert {k: r.verdict for k, r in full.items() if r.verdict is not Verdict.VALID} == {}


class Two(TypedDict, total=False):
    log: list


def two_approvals(saver):
    """A graph that parks twice on one thread (a manager's approval, then finance's)."""
    def manager(state):
        return {"log": [*state.get("log", []), f"manager:{interrupt('manager?')}"]}

    def finance(state):
        return {"log": [*state.get("log", []), f"finance:{interrupt('finance?')}"]}

    g = StateGraph(Two)
    g.add_node("manager", manager)
    g.add_node("finance", finance)
    g.add_edge(START, "manager")
    g.add_edge("manager", "finance")
    g.add_edge("finance", END)
    return g.compile(checkpointer=saver)


def test_a_claim_keyed_without_the_interrupt_id_refuses_the_second_interrupt(tmp_path):
    """Catches a consume-once claim keyed without the interrupt id (planted: keyed by thread alone): the second
    interrupt of a thread looks consumed and its approval is refused, so the run never completes; keyed by
    interrupt id, both approvals are served exactly once."""
    for planted, completes in ((), True), (("claim_without_interrupt_id",), False):
        cls = stack("once", planted).saver_class("sqlite")
        saver = cls(sqlite3.connect(tmp_path / f"{uuid.uuid4().hex}.sqlite", check_same_thread=False))
        app = two_approvals(saver)
        config = {"configurable": {"thread_id": "t"}}
        app.invoke({"log": []}, config)
        app.invoke(Command(resume="yes"), config)
        if completes:
            app.invoke(Command(resume="ok"), config)
            assert app.get_state(config).values["log"] == ["manager:yes", "finance:ok"]
            with pytest.raises(driftlab_guard.ResumeRefused):  # and a repeat of the second approval is refused
                app.invoke(Command(resume="ok"), config)
        else:
            with pytest.raises(driftlab_guard.ResumeRefused):
                app.invoke(Command(resume="ok"), config)
            assert app.get_state(config).next == ("finance",)


def fan_in(pinning: bool):
    """Two parallel branches resolve model:refund while a deployment lands between them, then merge: the
    operations as an isolation history (start, spawn, resolve, deploy, merge), for the isolation checkers."""
    import threading
    from typing import Annotated

    from analysis.checkers import checkers
    from vocabulary import History, Operation

    resources = driftlab_guard.Resources(["prompt:refund@2 requires model:refund@2"])
    for v in (1, 2):
        resources.deploy("model:refund", v, live=(v == 1))
    pins = driftlab_guard.Pins(resources)
    ops: list[tuple[str, str, dict]] = [("start", "ok", {"workflow": "w"})]
    first_bound = threading.Event()
    channel = pins.channel() if pinning else Annotated[dict, lambda a, b: {**(a or {}), **(b or {})}]
    State = TypedDict("State", {"pins": channel, "seen": Annotated[list, lambda a, b: (a or []) + (b or [])]},
                      total=False)

    def branch(name: str, wait: bool):
        def node(state):
            if wait:
                first_bound.wait(5)
            b = pins.bind(state) if pinning else None
            v = b.resolve("model:refund").version if b else resources.live("model:refund")
            ops.append(("resolve", "ok", {"workflow": name, "identity": "model:refund", "version": v}))
            if not wait:  # the deployer publishes @2 right after the first branch bound @1
                resources.deploy("model:refund", 2)
                ops.append(("deploy", "ok", {"identity": "model:refund", "version": 2}))
                first_bound.set()
            return {**(b.update() if b else {"pins": {"model:refund": v}}), "seen": [name]}
        return node

    g = StateGraph(State)
    g.add_node("a", branch("w/a", False))
    g.add_node("b", branch("w/b", True))
    g.add_node("join", lambda state: {"seen": ["join"]})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge(["a", "b"], "join")
    g.add_edge("join", END)
    ops += [("spawn", "ok", {"workflow": "w", "child": c, "relation": "fork"}) for c in ("w/a", "w/b")]
    try:
        g.compile().invoke({"pins": {}, "seen": []})
        merged = "ok"
    except driftlab_guard.PinningError:
        merged = "fail"  # the fan-in refused
    ops.append(("merge", merged, {"workflow": "w", "branches": ["w/a", "w/b"]}))
    ops.sort(key=lambda o: {"start": 0, "spawn": 1}.get(o[0], 2))
    history = History("agent", tuple(Operation(i, "t", n, s, float(i), float(i), {**v, "group": "0"})
                                     for i, (n, s, v) in enumerate(ops)),
                      {"contracts": ["prompt:refund@2 requires model:refund@2"], "versions": {"model:refund": [1, 2]}})
    return checkers("isolation")["merge_skew"].check(history), merged


@pytest.mark.planted("driftlab_guard.pinning:Pins.merge", "if have is not None and have != v:",
                     "if False:")  # the fan-in merged by a plain union
@pytest.mark.planted("analysis.isolation.checkers:MergeSkew.scan", "if problem:", "if False:")  # skew unseen
def test_pinning_refuses_a_fan_in_whose_branches_bound_two_versions():
    """Catches a fan-in without the manifest's merge check (planted: the branches' manifests merged by a plain
    dict union): a deployment between two parallel branches' first bindings gives two versions of one alias;
    without the check the merge is admitted and the isolation family's merge_skew checker says invalid; with
    driftlab_guard's Pins the fan-in is refused and the checker says valid."""
    loose, merged = fan_in(pinning=False)
    assert merged == "ok" and loose.verdict is Verdict.INVALID
    pinned, merged = fan_in(pinning=True)
    assert merged == "fail" and pinned.verdict is Verdict.VALID
