"""Scenario files of the resume family: the graph, the fault-matrix cells, the fault switches, the race grid.

Serves "Resume Means Resume" (arXiv 2608.03836).  The paper is silent on its
39 cells' exact shape; the lab's choices are written down here, one file per
cell in ``scenarios/resume/``, each with ``family = "resume"`` and a ``kind``:

- ``kind = "graph"`` — the lab's small graph: ``[[nodes]]`` with ``name``,
  ``effects`` (effect keys), ``interrupt`` (exactly one), ``work_ms``; an
  optional ``[hints]`` table for framework adapters (``parallel`` = sibling
  node names run in one step, ``state`` = how the state is declared).
  Framework-only graphs and cells live in ``scenarios/resume/frameworks/``
  (run by ``resume_frameworks`` only).
- ``kind = "cell"`` — one fault-matrix cell: ``graph``, ``operation`` and
  ``crash_point`` (for the table; ``"-"`` when none), ``replicas`` (identical
  runs, so that recoveries from one frontier can be compared), optional
  ``invalid_node``, and the literal ``[[steps]]`` each replica performs, in
  order, Hermitage-style::

      [[steps]]
      call = "resume"        # start | resume | fork | recover | replay | update (the last two: frameworks only)
      run = "a"              # the run (prefixed per cell, repetition and replica)
      value = "yes"          # resume value (resume only)
      at = "parked"          # resume/fork: address the run's parked checkpoint by id
      new_run = "f1"         # fork only
      key = "note"           # update only: the state key written with value
      crash = "after_effect" # optional: SIGKILL the call's process at this named point ...
      node = "act"           # ... of this node

  A call whose process is killed is followed by ``recover`` of the same run
  in a fresh process; if the run is still parked after a killed resume, the
  resume is sent again (the client retries a call that died).
- ``kind = "switch"`` — a fault switch of the independence matrix:
  ``runtime`` (registered name) and ``description``.
- ``kind = "concurrency"`` — the concurrent-resume grid: ``graph``,
  ``backends``, ``k``, ``jitter_ms``, ``repetitions`` per profile.

Every problem is ``<file>: <field>: <problem>``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scenarios import ScenarioError
from vocabulary.resume import POINTS, GraphSpec, NodeSpec

KINDS = ("graph", "cell", "switch", "concurrency")
CALL_NAMES = ("start", "resume", "fork", "recover", "replay", "update")


@dataclass(frozen=True)
class Step:
    call: str
    run: str
    value: str | None = None
    at: str | None = None  # "parked": address the run's parked checkpoint by id
    new_run: str | None = None
    crash: str | None = None
    node: str | None = None
    key: str | None = None  # update only: the state key written (with ``value``)


@dataclass(frozen=True)
class GraphScenario:
    name: str
    kind: str
    graph: GraphSpec
    description: str = ""
    path: str = ""  # the file it was read from


@dataclass(frozen=True)
class FaultCell:
    name: str
    kind: str
    graph: str
    operation: str
    crash_point: str
    replicas: int
    steps: tuple[Step, ...]
    invalid_node: str | None = None
    description: str = ""
    order: int = 0
    path: str = ""  # the file it was read from


@dataclass(frozen=True)
class Switch:
    name: str
    kind: str
    runtime: str
    description: str = ""
    path: str = ""  # the file it was read from


@dataclass(frozen=True)
class ConcurrencyGrid:
    name: str
    kind: str
    graph: str
    backends: tuple[str, ...]
    k: tuple[int, ...]
    jitter_ms: tuple[float, ...]
    repetitions: dict[str, int]
    value: str = "yes"
    description: str = ""
    quick_k: tuple[int, ...] = ()  # the quick profile's subset of k (empty: all)
    quick_jitter_ms: tuple[float, ...] = ()  # the quick profile's subset of jitters (empty: all)
    path: str = ""  # the file it was read from

    def grid(self, profile: str) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """(k values, jitter values) of a profile: the full grid for paper, the declared subset for quick."""
        if profile == "quick":
            return self.quick_k or self.k, self.quick_jitter_ms or self.jitter_ms
        return self.k, self.jitter_ms


def _need(path: Path, raw: dict, key: str, kind: type | tuple) -> Any:
    if key not in raw:
        raise ScenarioError(f"{path}: {key}: missing")
    if not isinstance(raw[key], kind):
        raise ScenarioError(f"{path}: {key}: {raw[key]!r} has the wrong type")
    return raw[key]


def _name(path: Path, raw: dict) -> str:
    name = _need(path, raw, "name", str)
    if not name or not all(c.isalnum() or c in "_-" for c in name):
        raise ScenarioError(f"{path}: name: {name!r} (letters, digits, _ and - only)")
    return name


def _graph(path: Path, raw: dict) -> GraphScenario:
    nodes = _need(path, raw, "nodes", list)
    specs = []
    for i, n in enumerate(nodes):
        if not isinstance(n, dict) or not isinstance(n.get("name"), str):
            raise ScenarioError(f"{path}: nodes[{i}]: needs a name")
        effects = n.get("effects", [])
        if not isinstance(effects, list) or not all(isinstance(e, str) for e in effects):
            raise ScenarioError(f"{path}: nodes[{i}].effects: a list of effect keys")
        work = n.get("work_ms", 0)
        if not isinstance(work, (int, float)) or work < 0:
            raise ScenarioError(f"{path}: nodes[{i}].work_ms: a number >= 0")
        specs.append(NodeSpec(n["name"], tuple(effects), bool(n.get("interrupt", False)), False, float(work)))
    try:
        hints = raw.get("hints", {})
        if not isinstance(hints, dict) or set(hints) - {"parallel", "state"}:
            raise ScenarioError(f"{path}: hints: a table with parallel and/or state")
        if not set(hints.get("parallel", ())) <= {n.name for n in specs}:
            raise ScenarioError(f"{path}: hints.parallel: names nodes the graph does not have")
        graph = GraphSpec(_name(path, raw), tuple(specs), hints=dict(hints))
    except ValueError as exc:
        raise ScenarioError(f"{path}: nodes: {exc}") from None
    return GraphScenario(graph.name, "graph", graph, str(raw.get("description", "")))


def _steps(path: Path, raw: dict) -> tuple[Step, ...]:
    steps = []
    for i, s in enumerate(_need(path, raw, "steps", list)):
        where = f"{path}: steps[{i}]"
        if not isinstance(s, dict):
            raise ScenarioError(f"{where}: a table")
        unknown = set(s) - {"call", "run", "value", "at", "new_run", "crash", "node", "key"}
        if unknown:
            raise ScenarioError(f"{where}: unknown field(s) {sorted(unknown)}")
        call = s.get("call")
        if call not in CALL_NAMES:
            raise ScenarioError(f"{where}.call: {call!r} is not one of {', '.join(CALL_NAMES)}")
        if not isinstance(s.get("run"), str):
            raise ScenarioError(f"{where}.run: missing")
        if call == "resume" and not isinstance(s.get("value"), str):
            raise ScenarioError(f"{where}.value: a resume needs a string value")
        if call == "fork" and (not isinstance(s.get("new_run"), str) or s.get("at") != "parked"):
            raise ScenarioError(f"{where}: a fork needs new_run and at = \"parked\"")
        if call == "replay" and s.get("at") != "parked":
            raise ScenarioError(f"{where}: a replay needs at = \"parked\" (the past checkpoint it re-runs from)")
        if call == "update" and not (isinstance(s.get("key"), str) and isinstance(s.get("value"), str)):
            raise ScenarioError(f"{where}: an update needs a key and a string value")
        if s.get("at") not in (None, "parked"):
            raise ScenarioError(f"{where}.at: only \"parked\" is known")
        if s.get("crash") is not None:
            if s["crash"] not in POINTS:
                raise ScenarioError(f"{where}.crash: {s['crash']!r} is not one of {', '.join(POINTS)}")
            if not isinstance(s.get("node"), str):
                raise ScenarioError(f"{where}.node: a crash names the node it lands in")
        steps.append(Step(call, s["run"], s.get("value"), s.get("at"), s.get("new_run"), s.get("crash"), s.get("node"),
                          s.get("key")))
    if not steps or steps[0].call != "start":
        raise ScenarioError(f"{path}: steps: the first step must start a run")
    return tuple(steps)


def _cell(path: Path, raw: dict) -> FaultCell:
    replicas = raw.get("replicas", 2)
    if not isinstance(replicas, int) or not 1 <= replicas <= 8:
        raise ScenarioError(f"{path}: replicas: an integer from 1 to 8")
    point = _need(path, raw, "crash_point", str)
    if point != "-" and point not in POINTS:
        raise ScenarioError(f"{path}: crash_point: {point!r} is not '-' or one of {', '.join(POINTS)}")
    invalid = raw.get("invalid_node")
    if invalid is not None and not isinstance(invalid, str):
        raise ScenarioError(f"{path}: invalid_node: a node name")
    return FaultCell(_name(path, raw), "cell", str(raw.get("graph", "approval")), _need(path, raw, "operation", str),
                     point, replicas, _steps(path, raw), invalid, str(raw.get("description", "")),
                     int(raw.get("order", 0)))


def _switch(path: Path, raw: dict) -> Switch:
    return Switch(_name(path, raw), "switch", _need(path, raw, "runtime", str), str(raw.get("description", "")))


def _ints(path: Path, raw: dict, key: str, kind=int) -> tuple:
    vals = _need(path, raw, key, list)
    if not vals or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in vals):
        raise ScenarioError(f"{path}: {key}: a non-empty list of numbers >= 0")
    return tuple(kind(v) for v in vals)


def _concurrency(path: Path, raw: dict) -> ConcurrencyGrid:
    backends = tuple(_need(path, raw, "backends", list))
    if not backends or any(b not in ("sqlite", "postgres") for b in backends):
        raise ScenarioError(f"{path}: backends: sqlite and/or postgres")
    k = _ints(path, raw, "k")
    if min(k) < 2:
        raise ScenarioError(f"{path}: k: at least 2 resumers")
    reps = _need(path, raw, "repetitions", dict)
    if set(reps) != {"quick", "paper"} or not all(isinstance(v, int) and v >= 1 for v in reps.values()):
        raise ScenarioError(f"{path}: repetitions: {{quick = N, paper = N}} with N >= 1")
    jitter = _ints(path, raw, "jitter_ms", float)
    quick = raw.get("quick", {})
    if not isinstance(quick, dict) or set(quick) - {"k", "jitter_ms"}:
        raise ScenarioError(f"{path}: quick: a table with k and/or jitter_ms (subsets of the grid)")
    qk = _ints(path, quick, "k") if "k" in quick else ()
    qj = _ints(path, quick, "jitter_ms", float) if "jitter_ms" in quick else ()
    if not set(qk) <= set(k) or not set(qj) <= set(jitter):
        raise ScenarioError(f"{path}: quick: its k and jitter_ms must be subsets of the grid's")
    return ConcurrencyGrid(_name(path, raw), "concurrency", str(raw.get("graph", "approval")), backends, k, jitter,
                           dict(reps), str(raw.get("value", "yes")), str(raw.get("description", "")), qk, qj)


def parse_scenario(path: Path, raw: dict[str, Any]):
    kind = raw.get("kind")
    if kind not in KINDS:
        raise ScenarioError(f"{path}: kind: {kind!r} is not one of {', '.join(KINDS)}")
    from dataclasses import replace

    parsed = {"graph": _graph, "cell": _cell, "switch": _switch, "concurrency": _concurrency}[kind](path, raw)
    return replace(parsed, path=str(path))


def by_kind(scenarios: dict[str, Any], kind: str) -> dict[str, Any]:
    return {n: s for n, s in scenarios.items() if s.kind == kind}


def cell_graph(cell: FaultCell, graphs: dict[str, GraphScenario], where: str = "") -> GraphSpec:
    """The graph a cell runs (with its invalid node, if any); a one-line ScenarioError if it does not fit."""
    if cell.graph not in graphs:
        raise ScenarioError(f"{where or cell.name}: graph: no graph scenario named {cell.graph!r}")
    graph = graphs[cell.graph].graph
    where = where or cell.name
    known = f"(graph {graph.name} has {', '.join(graph.names)})"
    if cell.invalid_node is not None and cell.invalid_node not in graph.names:
        raise ScenarioError(f"{where}: invalid_node: {cell.invalid_node!r} is not a node {known}")
    for i, s in enumerate(cell.steps):
        if s.node is not None and s.node not in graph.names:
            raise ScenarioError(f"{where}: steps[{i}].node: {s.node!r} is not a node {known}")
    return graph.with_invalid(cell.invalid_node)


def link(scenarios: dict[str, Any]) -> None:
    """Resolve the references between resume files when they load: every cell's graph, crash nodes and
    invalid node, and every concurrency grid's graph, exist; a ScenarioError names the file that refers.

    (A switch's runtime is a mechanism, which scenarios cannot import: the experiment checks it.)"""
    graphs = by_kind(scenarios, "graph")
    for s in scenarios.values():
        if s.kind == "cell":
            cell_graph(s, graphs, s.path)
        elif s.kind == "concurrency" and s.graph not in graphs:
            raise ScenarioError(f"{s.path}: graph: no graph scenario named {s.graph!r}")


def expected_effects(cell: FaultCell, graph: GraphSpec) -> int:
    """The oracle: firings the cell's runs make if every effect fires exactly once (pure graph arithmetic)."""
    per_start = len(graph.effect_keys())
    per_fork = len([1 for task, _ in graph.effect_keys() if int(task.split(":")[0]) >= graph.interrupt_step])
    starts = sum(1 for s in cell.steps if s.call == "start")
    forks = sum(1 for s in cell.steps if s.call == "fork")
    return cell.replicas * (starts * per_start + forks * per_fork)
