"""The isolation family's programs run by real LangGraph: each workflow a LangGraph thread, each step a node.

Serves "BEGIN AI TRANSACTION" (arXiv 2608.05412), whose "default runtime"
(paper Table 3) was measured on LangGraph: resources resolved through live
aliases.  This runtime runs the same scenario programs as
:mod:`runners.isolation.workflow_runtime` (same history format, same checkers), but
the workflow lives in LangGraph, not in the lab's memory:

- a workflow is a LangGraph thread (a ``SqliteSaver`` in a temporary file)
  of one small graph: a ``step`` node applies one operation to the state and
  the graph parks at ``interrupt`` waiting for the next; every operation is
  one ``invoke(Command(resume=op))``, so the state (the semantic manifest, as
  JSON) is carried from step to step by LangGraph's checkpoints only;
- **resolve** happens inside the node: the mechanism reads the registry's
  live alias at that moment (``SRC``: LangGraph's default behaviour) or the
  manifest from the checkpoint (``SSI``: the manifest carried in LangGraph's
  checkpoints);
- **pause** drops the compiled graph and the saver's connection, **resume**
  opens new ones and continues from the checkpoint (what survives is what
  LangGraph persisted);
- **child / fork / retry** start a new thread whose manifest the mechanism
  derives from the parent's state; **merge** reads the branches' states and
  asks the mechanism to admit the merge.

Rows for ``isolation_runtimes``: ``LangGraph`` (the ``SRC`` profile: live
aliases) and ``LangGraph+SSI`` (the ``SSI`` profile, its manifest in the
checkpoints); :func:`run_scenario_langgraph` is the drop-in for
``runners.isolation.workflow_runtime.run_scenario``.
"""
from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt

from runners.isolation.workflow_runtime import Runtime, Workflow, history_meta, to_history
from vocabulary import FAIL, History
from vocabulary.isolation import Manifest


class StepState(TypedDict):
    manifest: str  # Manifest.to_json(): the only copy of the workflow's manifest
    result: dict


class LangGraphRuntime(Runtime):
    """:class:`runners.isolation.workflow_runtime.Runtime` whose workflows are LangGraph threads (module docstring)."""

    def __init__(self, registry, mechanism, group=None, folder: str | None = None):
        super().__init__(registry, mechanism, group=group)
        self._own = folder is None
        self.folder = Path(folder or tempfile.mkdtemp(prefix="iso_lg_"))
        self.app = None
        self._conn = None
        self._open()

    # ------------------------------------------------------------ LangGraph
    def _open(self) -> None:
        self._conn = sqlite3.connect(str(self.folder / "threads.sqlite"), check_same_thread=False)
        saver = SqliteSaver(self._conn)
        registry, mechanism = self.registry, self.mechanism

        def step(state: StepState) -> dict:
            op = interrupt("next step")  # parked here between steps (and across a pause)
            manifest = Manifest.from_json(state["manifest"])
            if op["verb"] == "resolve":  # the node resolves: live alias or manifest, as the mechanism says
                r = mechanism.resolve(manifest, op["identity"], registry)
                return {"manifest": manifest.to_json(),
                        "result": {"version": r.version, "via": r.via, "reason": r.reason}}
            if op["verb"] == "bind":
                for x, v in op["bindings"].items():
                    manifest.bind(x, v)
            return {"manifest": manifest.to_json(), "result": {}}

        graph = StateGraph(StepState)
        graph.add_node("step", step)
        graph.add_edge(START, "step")
        graph.add_edge("step", "step")  # after each step, park again for the next one
        self.app = graph.compile(checkpointer=saver)

    def _close(self) -> None:
        self.app = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _cfg(self, wid: str) -> dict:
        return {"configurable": {"thread_id": wid}}

    def _begin_thread(self, wid: str, manifest: Manifest) -> None:
        self.app.invoke({"manifest": manifest.to_json(), "result": {}}, self._cfg(wid))  # parks at the first step

    def _do(self, wid: str, op: dict) -> dict:
        out = self.app.invoke(Command(resume=op), self._cfg(wid))
        return out.get("result", {})

    def _manifest(self, wid: str) -> Manifest:
        return Manifest.from_json(self.app.get_state(self._cfg(wid)).values["manifest"])

    # ------------------------------------------------------------ steps (manifests live in LangGraph only)
    def start(self, wid: str) -> None:
        if wid in self.workflows:
            raise ValueError(f"workflow {wid!r} already exists")
        self.workflows[wid] = Workflow(wid, None)
        self._begin_thread(wid, self.mechanism.begin(self.registry))
        self._op(wid, "start", workflow=wid)

    def resolve(self, wid: str, identity: str) -> int | None:
        w = self._live(wid)
        if w is None:
            return None
        self.resolutions += 1
        r = self._do(wid, {"verb": "resolve", "identity": identity})
        if r["version"] is None:
            self.refusals += 1
            w.state = "aborted"
            self._op(wid, "resolve", FAIL, workflow=wid, identity=identity, version=None, via=r["via"],
                     reason=r["reason"])
            return None
        self._op(wid, "resolve", workflow=wid, identity=identity, version=r["version"], via=r["via"])
        return r["version"]

    def pause(self, wid: str) -> None:
        w = self._live(wid)
        if w is None:
            return
        size = len(self.app.get_state(self._cfg(wid)).values["manifest"])
        w.state = "paused"
        self._close()  # nothing of the workflow stays in this process: only LangGraph's checkpoint
        self._op(wid, "pause", workflow=wid, checkpoint_bytes=size)

    def resume(self, wid: str) -> None:
        w = self.workflows.get(wid)
        if w is None or w.state != "paused":
            self.skipped += 1
            return
        if self.app is None:
            self._open()
        w.state = "running"
        self._op(wid, "resume", workflow=wid)

    def _live(self, wid: str) -> Workflow | None:
        w = super()._live(wid)
        if w is not None and self.app is None:
            self._open()
        return w

    def spawn(self, wid: str, child: str, relation: str) -> None:
        w = self._live(wid)
        if w is None:
            self.workflows.setdefault(child, Workflow(child, None, wid, relation, "aborted"))
            return
        if child in self.workflows:
            raise ValueError(f"workflow {child!r} already exists")
        self.workflows[child] = Workflow(child, None, wid, relation)
        self._begin_thread(child, self.mechanism.inherit(self._manifest(wid), relation))
        self._op(wid, "spawn", workflow=wid, child=child, relation=relation)

    def merge(self, wid: str, branches) -> bool:
        w = self._live(wid)
        if w is None:
            return False
        branches = list(branches)
        ws = [self.workflows[b] for b in branches]
        if any(b.state not in ("running", "ended") for b in ws):
            down = [b.id for b in ws if b.state not in ("running", "ended")]
            self._op(wid, "merge", FAIL, workflow=wid, branches=branches, path="none",
                     reason=f"branch {', '.join(down)} did not finish")
            return False
        d = self.mechanism.admit_merge(self._manifest(wid), [self._manifest(b) for b in branches], self.registry)
        for b in ws:
            b.state = "merged"
        if not d.admitted:
            self._op(wid, "merge", FAIL, workflow=wid, branches=branches, path=d.path, reason=d.reason)
            return False
        self._do(wid, {"verb": "bind", "bindings": dict(d.bindings)})
        self._op(wid, "merge", workflow=wid, branches=branches, path=d.path)
        return True

    def checkpoints(self, wid: str) -> int:
        """How many checkpoints LangGraph holds for a workflow (the tests read it)."""
        return sum(1 for _ in self.app.get_state_history(self._cfg(wid)))

    def close(self) -> None:
        self._close()
        if self._own:
            shutil.rmtree(self.folder, ignore_errors=True)


def run_scenario_langgraph(scenario, mechanism, group=None, folder: str | None = None) -> tuple[Any, History]:
    """``run_scenario`` on LangGraph: the scenario's program, its workflows as LangGraph threads."""
    reg = scenario.registry()
    rt = LangGraphRuntime(reg, mechanism, group=group, folder=folder)
    try:
        rt.run(scenario.steps)
    finally:
        rt.close()
    meta = history_meta(reg, scenario.contracts, scenario=scenario.name, runtime="langgraph",
                        mechanism=getattr(mechanism, "name", type(mechanism).__name__))
    return rt, to_history(rt.ops, meta)
