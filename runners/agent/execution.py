"""One execution of the refund agent under one stack: real processes, real SIGKILL, one history.

Serves issue 15's ``agent_matrix``.  Each call the scenario makes runs in a
process of its own (forked with :func:`runners.processes.fork_start`), which
opens its own connections, builds the agent (:mod:`runners.agent.graph`) and
answers one JSON line on a pipe:

1. ``start``: the agent decides and parks at its approval;
2. while it is parked, the parent (the "second actor" and the "deployer")
   applies the case's premise change and deployment to the ledger;
3. ``resume#1..k``: k approvers, forked together, meet at a barrier and call
   ``invoke(Command(resume=approval))`` at once;
4. at the case's crash point the approver's process writes ``K`` and waits;
   the parent sends it SIGKILL (:func:`runners.processes.kill`) and records
   the call *indeterminate*;
5. ``recover#1``: after a kill, a fresh process runs LangGraph's documented
   recovery, ``invoke(None, config)``.

Afterwards the stores are read back into one history (family ``agent``):
the calls, the change and the deployments, the resolutions (``resolve``,
``spawn``), one ``release`` (what the ``act`` node decided first, beside the
scenario's oracle), then the ``checkpoint``, ``effect`` and ``trace`` entries.
"""
from __future__ import annotations

import json
import os
import select
import time
from datetime import datetime
from typing import Any

from runners import processes
from runners.agent.graph import build
from runners.agent.stores import Ledger, Stores
from vocabulary import INDETERMINATE, OK, History, Operation
from vocabulary.agent import FAMILY, RESUME_FIELDS, resume_graph

CALL_TIMEOUT_S = 60.0


def _initial(scenario) -> dict:
    return {"input": scenario.input, "approval": None, "steps": 0, "log": []}


def _project(values: dict | None) -> dict | None:
    return None if values is None else {k: values.get(k) for k in RESUME_FIELDS if k in values}


def _call(wfd: int, stores: Stores, scenario, stack, call: str, run: str, label: str, value: Any, crash, durability: str,
          barrier) -> None:
    """In a forked child: one call of the agent; one JSON line on ``wfd`` (or ``K`` at the crash point)."""
    from langgraph.types import Command

    ledger = Ledger(stores)
    saver = stack.saver_class(stores.kind)(stores.checkpoint_conn())

    def point(name: str, node: str) -> None:
        if crash is not None and (name, node) == (crash.point, crash.node):
            os.write(wfd, b"K\n")
            while True:  # the parent's SIGKILL ends us here: nothing is unwound, nothing more commits
                time.sleep(3600)

    app = build(stack, scenario, ledger, saver, label, point)
    config = {"configurable": {"thread_id": run}}
    arg = _initial(scenario) if call == "start" else Command(resume=value) if call == "resume" else None
    if barrier is not None:
        barrier.wait()
    try:
        app.invoke(arg, config, durability=durability)
        snap = app.get_state(config)
        out = {"state": "parked" if snap.next else "done", "values": _project(snap.values)}
    except Exception as exc:  # noqa: BLE001 - the call's outcome, reported to the parent
        refused = type(exc).__name__ == "ResumeRefused"
        out = {"state": "refused" if refused else "failed", "reason": f"{type(exc).__name__}: {exc}"[:300]}
    os.write(wfd, (json.dumps(out, default=str) + "\n").encode())


def _spawn(args: tuple) -> tuple[int, int]:
    r, w = os.pipe()
    pid = processes.fork_start(_call, (w, *args))
    os.close(w)
    return pid, r


def _collect(children: list[tuple[int, int]], timeout: float) -> list[tuple[dict | None, float | None, int | None]]:
    """Per child: (its answer, when it answered, its exit code).  A child that reached its crash point (``K``) or
    stayed silent past ``timeout`` is SIGKILLed (exit code -9); one that died on its own keeps its exit code."""
    answers: list[tuple[dict | None, float | None]] = [(None, None)] * len(children)
    bufs = {r: b"" for _, r in children}
    pending = {r: i for i, (_, r) in enumerate(children)}
    deadline = time.monotonic() + timeout
    while pending:
        ready, _, _ = select.select(list(pending), [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        for r in ready:
            chunk = os.read(r, 65536)
            bufs[r] += chunk
            if b"\n" in bufs[r] or not chunk:
                i = pending.pop(r)
                line = bufs[r].split(b"\n", 1)[0]
                if line and line != b"K":
                    answers[i] = (json.loads(line), time.time())
    out = []
    for i, (pid, r) in enumerate(children):
        answered, crashed = answers[i][0] is not None, bufs[r].startswith(b"K")
        code = processes.kill(pid) if crashed or (not answered and r in pending) else processes.wait(pid)
        out.append((*answers[i], code))
        os.close(r)
    return out


def execute(scenario, case, stack, stores: Stores, run: str, group: str) -> History:
    """Run one execution of ``case`` under ``stack`` on fresh ``stores``; its history (family ``agent``)."""
    durability = scenario.durability(case)
    crash = scenario.crashes.get(case.crash)
    ops: list[dict] = []

    def add(name, actor, start, end, status=OK, **value):
        ops.append({"name": name, "actor": actor, "start": start, "end": end, "status": status,
                    "value": {**value, "group": group}})

    def calls(kind: str, labels: list[str], value: Any, crash_at=None) -> None:
        barrier = processes.Barrier(len(labels)) if len(labels) > 1 else None
        t0 = time.time()
        children = [_spawn((stores, scenario, stack, kind, run, label, value, crash_at, durability, barrier))
                    for label in labels]
        for label, (answer, t1, code) in zip(labels, _collect(children, CALL_TIMEOUT_S)):
            if answer is None:  # SIGKILLed (at its crash point or silent too long), or died: outcome unknown
                add(kind, label, t0, None, INDETERMINATE, run=run, op=label, resume=value, workflow=run,
                    exit_code=code, **({"killed_by": 9} if code == -9 else {}))
            else:
                add(kind, label, t0, t1, OK, run=run, op=label, resume=value, workflow=run, state=answer["state"],
                    values=answer.get("values"), reason=answer.get("reason", ""))

    calls("start", ["start"], None)
    ledger = Ledger(stores)
    try:
        if case.change != "none":
            ch = scenario.changes[case.change]
            t = time.time()
            ledger.change(ch.field, ch.value)
            add("mutate", "second_actor", t, time.time(), field=ch.field, to=ch.value, change=case.change)
        for ident, version in (scenario.deployments.get(case.deployment) or {}).items():
            t = time.time()
            ledger.deploy(ident, version)
            add("deploy", "deployer", t, time.time(), identity=ident, version=version)
    finally:
        ledger.close()
    calls("resume", [f"resume#{i + 1}" for i in range(case.approvers)], scenario.approval, crash)
    if any(o["status"] == INDETERMINATE for o in ops):
        calls("recover", ["recover#1"], None)
    return _history(scenario, case, stack, stores, run, group, ops)


def _history(scenario, case, stack, stores: Stores, run: str, group: str, ops: list[dict]) -> History:
    ledger = Ledger(stores)
    try:
        effects, trace, events = ledger.rows("effects"), ledger.rows("trace"), ledger.rows("events")
    finally:
        ledger.close()
    for e in events:
        value = {"run": e["run"], "workflow": e["workflow"], "group": group}
        if e["kind"] == "resolve":
            value.update(identity=e["identity"], version=e["version"])
        else:
            value.update(child=e["child"], relation="child")
        ops.append({"name": e["kind"], "actor": e["op"], "start": e["at"], "end": e["at"], "status": OK, "value": value})
    first = next((e for e in effects if e["effect"] == "outcome"), None)
    if first is not None:
        body = json.loads(first["payload"])
        ops.append({"name": "release", "actor": first["op"], "start": first["at"], "end": first["at"], "status": OK,
                    "value": {"run": run, "group": group, "oracle": scenario.oracle(case.change),
                              "outcome": body["outcome"], "released": body["released"],
                              "payload_stale": body["payload_stale"], "mechanism": stack.name,
                              "change": case.change, "evaluated": body["evaluated"]}})
    ops.sort(key=lambda o: (o["start"] if o["start"] is not None else float("inf")))
    stored = []
    for cp in _checkpoints(stack, stores, run):
        stored.append({"name": "checkpoint", "actor": "store", "start": cp["created"], "end": cp["created"],
                       "status": OK, "value": {**cp, "group": group}})
    for e in effects:
        stored.append({"name": "effect", "actor": "ledger", "start": e["at"], "end": e["at"], "status": OK,
                       "value": {"run": e["run"], "task": e["task"], "effect": e["effect"], "payload": e["payload"],
                                 "op": e["op"], "pid": e["pid"], "at": e["at"], "group": group}})
    for t in trace:
        stored.append({"name": "trace", "actor": "ledger", "start": t["at"], "end": t["at"], "status": OK,
                       "value": {"run": t["run"], "step": t["step"], "node": t["node"], "kind": t["kind"],
                                 "resume": None if t["resume"] is None else json.loads(t["resume"]), "op": t["op"],
                                 "pid": t["pid"], "at": t["at"], "group": group}})
    operations = tuple(Operation(i, o["actor"], o["name"], o["status"], o["start"], o["end"], o["value"])
                       for i, o in enumerate(ops + stored))
    meta = {"graph": resume_graph(), "contracts": list(scenario.contracts),
            "versions": {x: list(vs) for x, vs in scenario.resources.items()}, "scenario": scenario.name,
            "case": case.name, "stack": stack.name, "backend": stores.kind, "durability": scenario.durability(case)}
    return History(FAMILY, operations, meta)


def _checkpoints(stack, stores: Stores, run: str) -> list[dict]:
    """The run's checkpoints (top-level namespace), projected onto the resume family's state schema."""
    conn = stores.checkpoint_conn()
    try:
        saver = stack.saver_class(stores.kind)(conn)
        out = []
        for tup in saver.list({"configurable": {"thread_id": run}}):
            conf = tup.config["configurable"]
            if conf.get("checkpoint_ns", ""):
                continue
            values = tup.checkpoint.get("channel_values", {})
            if not any(k in values for k in RESUME_FIELDS):
                continue  # LangGraph's record of the input before the first step: no state of the run yet
            parked = any(ch == "__interrupt__" for _t, ch, _v in tup.pending_writes or ())
            out.append({"run": run, "checkpoint": conf["checkpoint_id"], "step": int(values.get("steps", 0)),
                        "values": _project(values),
                        "created": datetime.fromisoformat(tup.checkpoint["ts"]).timestamp(), "parked": parked})
        return sorted(out, key=lambda c: c["created"])
    finally:
        conn.close()


def setup(stack, scenario, stores: Stores) -> None:
    """Fresh stores for one execution: the ledger seeded with the scenario's state, the saver's tables."""
    ledger = Ledger(stores)
    try:
        ledger.setup(scenario.state, scenario.resources)
    finally:
        ledger.close()
    conn = stores.checkpoint_conn()
    try:
        stack.saver_class(stores.kind)(conn).setup()
        if stack.once:  # driftlab_guard's effect ledger (in the ledger database)
            led = Ledger(stores)
            try:
                stack.ledger_class()(led.conn).setup()
            finally:
                led.close()
    finally:
        conn.close()
