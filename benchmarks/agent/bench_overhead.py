"""Microbenchmark of the agent's stacks: one checkpointed step and one resume, each stack beside stock.

Serves issue 15's ``agent_overhead`` (the aim: the full stack at most 1.2x
stock per step and per resume, on SQLite and PostgreSQL).  One
pytest-benchmark session times, for every backend and stack, in the same
interpreter and interleaved per repetition:

- ``step``: the refund agent's start, ``decide`` and its checkpoint up to the
  park at the approval (one checkpointed step: the premises layer's park
  record and the pinning layer's first bindings are in it);
- ``resume``: one ``Command(resume=...)`` of a parked run to the end (the
  consume-once claim, ``approve``, ``act`` with its revalidation and
  resolutions and its effect, ``notify`` with its subgraph and effect).

Each round uses a fresh thread; a resume round's parked run is made by the
round's untimed setup; one untimed warm-up round precedes each benchmark, and
the stacks' order rotates per repetition.  The lab's own instrumentation (the trace and the
resolution events its histories are read from) is off: the agent's effects
fire, nothing else is written beyond what the stack writes.  Sizes come from the environment the
``agent_overhead`` experiment sets (``DRIFTLAB_AGENT_ROUNDS``,
``DRIFTLAB_AGENT_REPETITIONS``, ``DRIFTLAB_AGENT_BACKENDS``,
``DRIFTLAB_AGENT_STACKS``); run by hand: ``pytest benchmarks/agent/bench_overhead.py``.
"""
from __future__ import annotations

import itertools
import os
from contextlib import ExitStack
from pathlib import Path

import pytest

from mechanisms.agent.stacks import stack
from runners.agent import execution
from runners.agent.graph import build
from runners.agent.stores import Ledger, fresh
from scenarios import read_toml
from scenarios.agent.loader import parse_scenario
from vocabulary.agent import STACKS

ROUNDS = int(os.environ.get("DRIFTLAB_AGENT_ROUNDS", "20"))
REPETITIONS = int(os.environ.get("DRIFTLAB_AGENT_REPETITIONS", "3"))
BACKENDS = os.environ.get("DRIFTLAB_AGENT_BACKENDS", "sqlite,postgres").split(",")
CHOSEN = os.environ.get("DRIFTLAB_AGENT_STACKS", ",".join(STACKS)).split(",")
SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "agent" / "refund_agent.toml"

_counter = itertools.count()


class Agent:
    """One stack's agent on one backend: stores, saver and compiled graph, made once for the session."""

    def __init__(self, exits: ExitStack, backend: str, name: str):
        from langgraph.types import Command

        self.command = Command
        self.scenario = parse_scenario(SCENARIO, read_toml(SCENARIO))
        self.stack = stack(name)
        stores = exits.enter_context(fresh(backend))
        execution.setup(self.stack, self.scenario, stores)
        ledger = Ledger(stores)
        exits.callback(ledger.close)
        conn = stores.checkpoint_conn()
        exits.callback(conn.close)
        saver = self.stack.saver_class(backend)(conn)
        self.app = build(self.stack, self.scenario, ledger, saver, "bench", lambda name, node: None, record=False)

    def config(self) -> dict:
        return {"configurable": {"thread_id": f"t{next(_counter)}"}}

    def start(self, config: dict) -> None:
        self.app.invoke({"input": self.scenario.input, "approval": None, "steps": 0, "log": []}, config,
                        durability="sync")

    def resume(self, config: dict) -> None:
        self.app.invoke(self.command(resume=self.scenario.approval), config, durability="sync")


@pytest.fixture(scope="session")
def agents():
    made: dict[tuple[str, str], Agent] = {}
    with ExitStack() as exits:
        def get(backend: str, name: str) -> Agent:
            if (backend, name) not in made:
                made[backend, name] = Agent(exits, backend, name)
            return made[backend, name]
        yield get


def _rotated(names: list[str], by: int) -> list[str]:
    """The stacks in a different order each repetition (no stack always first after a switch of kind)."""
    k = by % len(names)
    return names[k:] + names[:k]


CASES = [(rep, backend, kind, name) for rep in range(REPETITIONS) for backend in BACKENDS
         for kind in ("step", "resume") for name in _rotated(CHOSEN, rep)]


@pytest.mark.parametrize("repetition, backend, kind, name", CASES,
                         ids=[f"{r}-{b}-{k}-{n}" for r, b, k, n in CASES])
def test_agent(benchmark, agents, repetition, backend, kind, name):
    agent = agents(backend, name)
    benchmark.extra_info.update(repetition=repetition, backend=backend, kind=kind, stack=agent.stack.name)
    if kind == "step":
        benchmark.pedantic(agent.start, setup=lambda: ((agent.config(),), {}), rounds=ROUNDS, iterations=1,
                           warmup_rounds=1)
        return

    def parked():
        config = agent.config()
        agent.start(config)
        return (config,), {}
    benchmark.pedantic(agent.resume, setup=parked, rounds=ROUNDS, iterations=1, warmup_rounds=1)
