"""The adapter conformance harness (issue 24 §2; DESIGN.md "adapter conformance harness").

An adapter is the lab's eyes on a framework: before its verdicts count it must
show, point by point, that it reports what the framework did.  One table of
rows, every framework adapter declared in ``data/envs/*/pyproject.toml`` ×
every crash point it declares reachable (a real SIGKILL of a child of the
env's fork server) and every answer kind, on the lab's tiny graph (prepare →
approve (interrupt) → act → notify), asserting the effect ledger and the
framework's store at each point:

- ``before_node`` N: none of N's effects, N never traced by the killed call;
- ``after_effect`` N: N's first effect recorded by the killed call;
- ``after_node_before_checkpoint`` N: all of N's effects, and no checkpoint past N;
- ``during_checkpoint_write`` N: all of N's effects;
- ``parked``: the nodes before the interrupt ran, nothing consumed;
- ``after_resume_consumed``: the consumption recorded, none of the next node's effects;
- after every kill, a recovery in a new process *advances* the run (re-runs a node, or is done, or the run is
  durably parked at its interrupt) or answers one of the framework's declared refusals/failures.

Answer kinds: parked (start), done (resume; the newest of several saved states restored: the value reached the
nodes after the interrupt, and the done answer names the newest saved state and its values), a second resume of a
finished run and a resume of an unknown run (a refusal or the framework's documented answer, no node run by it,
nothing fired), and for DBOS a workflow in ``ERROR`` (what DBOS records after a step raised): failed, in ``state``
and in a resume, never done.

Process-heavy rows share one warm fork server per environment and adapter (:func:`server`), started once per test
process; an environment's rows are one xdist group (:func:`by_env`), so one test process starts it, and the
framework's own test module joins that group (:func:`env_group`) and uses the same servers.  The planted adapters
(``tests/planted_adapters.py``, LangGraph's adapter with one bug each) must fail:
those that raise, exit, hang, answer malformed or give an undeclared refusal are refused by the env's server (the lab
stops the run on such a reply, ``test_planted_adapter_stops_the_run``); those that move a crash point or answer a
recovery without re-running the killed node fail the harness's own assertions.
"""
from __future__ import annotations

import itertools
from dataclasses import replace
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mechanisms.resume.frameworks import Declared, declared
from vocabulary.resume import DEFAULT_GRAPH, Backend

HERE = Path(__file__).resolve().parent
PLANTED = HERE / "planted_adapters.py"
PLANTED_DBOS = HERE / "planted_dbos.py"
GRAPH = DEFAULT_GRAPH
NAMES = [n.name for n in GRAPH.nodes]
INTERRUPT = next(i for i, n in enumerate(GRAPH.nodes) if n.interrupt)
#: (point, node, the call the kill lands in): each point at the node the fault matrix uses it
POINT_ROWS = (
    ("before_node", "prepare", "start"), ("after_effect", "prepare", "start"),
    ("after_node_before_checkpoint", "prepare", "start"), ("during_checkpoint_write", "prepare", "start"),
    ("parked", "approve", "start"), ("after_resume_consumed", "approve", "resume"),
    ("before_node", "act", "resume"), ("after_effect", "act", "resume"),
    ("after_node_before_checkpoint", "act", "resume"), ("during_checkpoint_write", "act", "resume"),
)
ADAPTERS = sorted({d.name: d for name, d in declared().items() if name == d.name and "sqlite" in d.backends}.values(),
                  key=lambda d: d.name)


def applicable(d: Declared, point: str, node: str) -> bool:
    return point not in d.not_applicable and f"{point}@{node}" not in d.not_applicable


def planted(cls: str, module: Path = PLANTED, runtime: str = "langgraph@1.2.24") -> Declared:
    """A planted adapter in the real environment of ``runtime`` (LangGraph 1.2.24's unless named)."""
    base = declared()[runtime]
    return replace(base, name=f"planted-{cls}", adapter=f"{module}:{cls}", aliases=())


# ---------------------------------------------------------------------------------------------- the driver
_RUNS = itertools.count()


def server(d: Declared):
    """One warm fork server per environment, adapter and options in this test process (started on first use): the
    lab's own (``runners.resume.envs.server_of``), so a test of the same worker that runs the framework through the
    lab (``test_resume_framework_*.py``, in the env's group: :func:`env_group`) uses the same server."""
    from runners.resume.envs import server_of

    return server_of(d)


class Cell:
    """One fresh SQLite backend, the lab's ledger on it, and the calls of one run through the env's server."""

    def __init__(self, d: Declared, tmp: Path):
        from mechanisms.resume.store import EffectLedger

        self.d = d
        self.backend = Backend("sqlite", str(tmp), f"c{os.getpid()}_{next(_RUNS)}")
        self.ledger = EffectLedger(self.backend)
        self.ledger.setup()
        self.run = "run-1"
        self.calls = 0
        assert "error" not in self.call("setup", {}, "setup")

    def call(self, call: str, args: dict, label: str, crash: tuple[str, str] | None = None, timeout: float = 60) -> dict:
        return server(self.d).call({"runtime": self.d.name, "backend": self.backend.to_dict(), "graph": GRAPH.to_dict(),
                                    "call": call, "args": args, "label": label,
                                    "crash": list(crash) if crash else None, "timeout": timeout})

    def op(self, call: str, crash: tuple[str, str] | None = None, **args) -> tuple[str, dict]:
        self.calls += 1
        label = f"{self.run}/{call}#{self.calls}"
        return label, self.call(call, {"run_id": self.run, **args}, label, crash)

    def effects(self, label: str | None = None) -> list:
        return [e for e in self.ledger.effects(self.run) if label is None or e.op == label]

    def traces(self, label: str | None = None, kind: str | None = None) -> list:
        return [t for t in self.ledger.traces(self.run) if (label is None or t.op == label)
                and (kind is None or t.kind == kind)]

    def checkpoints(self) -> list[dict]:
        reply = self.call("checkpoints", {"run_id": self.run}, "read")
        assert "status" in reply, reply
        return reply["status"]


def effects_of(node: str) -> list[str]:
    return list(GRAPH.nodes[NAMES.index(node)].effects)


def task(node: str) -> str:
    return GRAPH.task(NAMES.index(node))


def conform_point(d: Declared, tmp: Path, point: str, node: str, call: str) -> None:
    """The harness's assertions for one crash point (module docstring); AssertionError names what broke."""
    c = Cell(d, tmp)
    if call == "resume":
        _, started = c.op("start", input="order-1")
        assert started.get("status", {}).get("state") == "parked", f"start before the kill answered {started}"
    args = {"input": "order-1"} if call == "start" else {"value": "yes"}
    label, killed = c.op(call, crash=(point, node), **args)
    assert killed.get("killed"), f"{d.name}: the declared point {point} of {node} was never reached: {killed}"
    assert killed["code"] == -9, f"{d.name}: the call's child ended with {killed['code']}, not SIGKILL"
    mine = c.effects(label)
    ran = [t.node for t in c.traces(label, "node")]
    if point == "before_node":
        assert not [e for e in mine if e.task == task(node)], f"{d.name}: effects of {node} before it ran: {mine}"
        assert node not in ran, f"{d.name}: {node} traced before its before_node point"
    elif point == "after_effect":
        assert [e.key for e in mine if e.task == task(node)] == effects_of(node)[:1], \
            f"{d.name}: after_effect of {node}: the ledger holds {[e.key for e in mine]}"
    elif point in ("after_node_before_checkpoint", "during_checkpoint_write"):
        assert [e.key for e in mine if e.task == task(node)] == effects_of(node), \
            f"{d.name}: {point} of {node}: the ledger holds {[e.key for e in mine]}"
        if point == "after_node_before_checkpoint":
            past = [cp for cp in c.checkpoints() if cp["step"] > NAMES.index(node)]
            assert not past, f"{d.name}: a checkpoint past {node} before its checkpoint point: {past[-1]}"
    elif point == "parked":
        assert [e.key for e in c.effects()] == effects_of("prepare"), f"{d.name}: parked with {c.effects()}"
        assert not c.traces(kind="consume"), f"{d.name}: a consumption before the resume"
    elif point == "after_resume_consumed":
        assert c.traces(label, "consume"), f"{d.name}: after_resume_consumed with no consumption recorded"
        nxt = NAMES[INTERRUPT + 1]
        assert not [e for e in mine if e.task == task(nxt)], f"{d.name}: {nxt} fired before the consume point"
    # a recovery in a new process advances the run, or answers what the framework declares
    rlabel, rec = c.op("recover")
    assert "status" in rec, f"{d.name}: recover after a kill at {point} of {node}: {rec.get('error')}"
    state = rec["status"]["state"]
    if state in ("refused", "failed"):
        return  # a declared answer of the framework (the server refuses undeclared ones): a liveness finding
    reran = bool(c.traces(rlabel, "node"))
    durably_parked = state == "parked" and rec["status"]["node"] == NAMES[INTERRUPT] and any(
        cp["parked"] or cp["next"] == NAMES[INTERRUPT] for cp in c.checkpoints())
    assert state == "done" or reran or durably_parked, (
        f"{d.name}: recover after a kill at {point} of {node} answered {state} at {rec['status']['node']} "
        "without re-running a node")


# ---------------------------------------------------------------------------------------------- the rows
def by_env(d: Declared):
    """One xdist group per environment: its rows run on one worker, which starts the env's fork server (and a
    server-backed framework's own server: Prefect's, Temporal's) once, not once per worker (the module took 38
    worker-seconds less on 2026-12-05)."""
    return pytest.mark.xdist_group(f"conformance-{d.env}")


def env_group(runtime: str):
    """:func:`by_env` of a framework runtime (``"crewai@1.15"``): a test module that runs it marks itself with it, so
    that its tests run on the worker that already holds the env's fork server (and Prefect's or Temporal's own
    server), instead of each worker that gets one starting them again."""
    return by_env(declared()[runtime])


ROWS = [pytest.param(d, point, node, call, id=f"{d.name}-{point}-{node}", marks=by_env(d))
        for d in ADAPTERS for point, node, call in POINT_ROWS if applicable(d, point, node)]


@pytest.mark.parametrize("d,point,node,call", ROWS)
def test_crash_point(d, point, node, call, tmp_path):
    """Every adapter at every crash point it declares: the ledger and store are what the point names, and a
    recovery advances the run (the same check fails on the planted adapters BeforeNodeLate and RecoverAnswersHead:
    test_planted_adapter_fails_the_harness)."""
    conform_point(d, tmp_path, point, node, call)


def conform_answers(d: Declared, tmp: Path) -> None:
    """parked, done (from the newest of several saved states), a second resume and a resume of an unknown run."""
    c = Cell(d, tmp)
    _, st = c.op("start", input="order-1")
    assert st.get("status", {}).get("state") == "parked" and st["status"]["node"] == "approve", st
    assert len(c.checkpoints()) >= 1
    _, done = c.op("resume", value="yes")
    assert done.get("status", {}).get("state") == "done", done
    # the newest saved state (the park) was restored: the value reached the nodes after the interrupt; how often
    # each effect fired is the framework's behaviour, judged by the checkers (EO), not by the harness
    assert {e.key for e in c.effects()} == {"charge", "email", "reserve"}
    assert [e.payload for e in c.effects() if e.key == "charge"][-1].endswith(":yes"), c.effects()
    saved = c.checkpoints()
    assert len(saved) >= 2, f"{d.name}: several states saved by the end of the run, got {saved}"
    if done["status"]["checkpoint"] is not None:  # the answer names the newest saved state and its values
        assert done["status"]["checkpoint"] == saved[-1]["checkpoint"], (done, saved[-1])
        assert done["status"]["values"] == saved[-1]["values"], (done, saved[-1])
    label, again = c.op("resume", value="no")
    assert "status" in again, again  # refused, or whatever the framework does with a stray resume: never an error
    if again["status"]["state"] == "refused":
        assert not c.traces(label, "node"), f"{d.name}: refused after running a node"
    c.run = "never-started"
    label, unknown = c.op("resume", value="yes")
    assert "status" in unknown, unknown
    if unknown["status"]["state"] == "refused":  # LangGraph starts a new thread instead: its behaviour, recorded
        assert not c.effects(label) and not c.traces(label, "node"), f"{d.name}: refused after running a node"


@pytest.mark.parametrize("d", [pytest.param(d, id=d.name, marks=by_env(d)) for d in ADAPTERS])
def test_answer_kinds(d, tmp_path):
    """Each answer kind well formed and accepted by the server, a refusal never after a node ran, the done answer
    naming the newest saved state (the same check fails on the planted adapter OldestState:
    test_planted_oldest_state_fails_the_answer_kinds; the server refuses MalformedResume and SwallowsIntoRefused:
    test_planted_adapter_reply_is_an_error)."""
    conform_answers(d, tmp_path)


def test_planted_oldest_state_fails_the_answer_kinds(tmp_path):
    """An adapter that reads a run's oldest saved state instead of its newest (its done answer names the first
    checkpoint) fails the answer kinds."""
    with pytest.raises(AssertionError):
        conform_answers(planted("OldestState"), tmp_path)


def conform_errored(d: Declared, tmp: Path) -> None:
    """A DBOS workflow that ended in ``ERROR`` (what DBOS records after a step raised: the status in its own system
    database): ``state`` and a resume answer failed with DBOS's status, and the resume runs no node."""
    import sqlite3

    c = Cell(d, tmp)
    _, st = c.op("start", input="order-1")
    assert st["status"]["state"] == "parked", st
    with sqlite3.connect(Path(c.backend.location) / f"{c.backend.namespace.lower()}dbos.sqlite") as db:
        assert db.execute("UPDATE workflow_status SET status = 'ERROR' WHERE workflow_uuid = ?",
                          (c.run,)).rowcount == 1
    _, state = c.op("state")
    label, resumed = c.op("resume", value="yes")
    for reply in (state, resumed):
        assert reply.get("status", {}).get("state") == "failed", f"{d.name}: an errored workflow answered {reply}"
        assert reply["status"]["reason"].startswith("workflow ERROR"), reply
    assert not c.traces(label, "node"), f"{d.name}: a node ran in a resume of an errored workflow"


def test_an_errored_workflow_is_failed_never_done(tmp_path):
    """DBOS's ``ERROR`` is the framework's failed answer, never done or parked (planted: ErrorReadAsDone, DBOS's
    adapter with ERROR among its successes, which would make an errored run count as done, liveness and all)."""
    conform_errored(declared()["dbos@3.4"], tmp_path / "real")
    with pytest.raises(AssertionError, match="an errored workflow answered"):
        conform_errored(planted("ErrorReadAsDone", PLANTED_DBOS, "dbos@3.4"), tmp_path / "planted")


@pytest.mark.planted("driftlab_frameworks.langgraph:LangGraphAdapter.recover", 'if head["state"] == DONE:',
                     'if head["state"] in (DONE, REFUSED):')
@pytest.mark.parametrize("d", [pytest.param(declared()[n], id=n, marks=by_env(declared()[n]))
                               for n in ("langgraph@1.2.24", "langgraph+remit@1.2.9")])
def test_a_recovery_of_a_thread_with_no_checkpoint_is_langgraphs_failure(d, tmp_path):
    """A start SIGKILLed before its first checkpoint was stored (LangGraph's async durability stores it from another
    thread, so a kill at ``before_node`` of the first node can land first) leaves a thread with nothing: the
    recovery's ``invoke(None)`` raises LangGraph's ``EmptyInputError``, its answer (failed), never an error of the
    lab (a fresh-clone CI run on 2026-12-05: REMIT's row at that point).  A recovery of a run never started is that
    thread, every time.
    Planted bug: an adapter that answers for LangGraph (its own refusal of a thread it finds empty, where a user's
    ``invoke(None)`` gets LangGraph's error).  Left undeclared, the answer would stop the run: the server's rule,
    test_planted_adapter_reply_is_an_error."""
    c = Cell(d, tmp_path)
    c.run = "never-started"
    label, rec = c.op("recover")
    assert "status" in rec, rec.get("error")
    assert rec["status"]["state"] == "failed" and rec["status"]["reason"].startswith("EmptyInputError: "), rec
    assert not c.effects(label) and not c.traces(label, "node")


# ---------------------------------------------------------------------------------------------- planted adapters
@pytest.mark.parametrize("cls,points", [("BeforeNodeLate", ("before_node",)),
                                        ("RecoverAnswersHead", ("before_node", "after_effect"))])
def test_planted_adapter_fails_the_harness(cls, points, tmp_path):
    """A crash point moved after the node's effects, and a recovery that answers the store's head without re-running
    the killed node: each fails its row.  The recovery's plant is tried at two kills of act (before it, after its
    effect) and must fail at least one: at either, LangGraph may already have written what makes the store's head
    the right answer when the kill lands late, so one kill alone failed to expose it under load."""
    failed = 0
    for point in points:
        try:
            conform_point(planted(cls), tmp_path / point, point, "act", "resume")
        except AssertionError:
            failed += 1
    assert failed, f"planted {cls} passed the harness at {points}"


@pytest.mark.parametrize("cls,says", [("RaisesInResume", "resume raised RuntimeError: planted"),
                                      ("ExitsInResume", "exited with code 3"),
                                      ("MalformedResume", "resume answered a status without 'run'"),
                                      ("SwallowsIntoRefused", "undeclared reason"),
                                      ("RaisesInNode", "the lab's code raised inside node act")])
def test_planted_adapter_reply_is_an_error(cls, says, tmp_path):
    """The env's server answers an error, never a status, for an adapter that raises, exits, answers malformed,
    gives a refusal its framework never documented, or whose node code raised under a framework that turned it into
    a failed run."""
    c = Cell(planted(cls), tmp_path)
    _, st = c.op("start", input="order-1")
    assert st["status"]["state"] == "parked"
    _, reply = c.op("resume", value="yes")
    assert "status" not in reply and says in reply["error"], reply


def test_planted_hang_is_an_error(tmp_path):
    """A resume that never answers is cut at the call's limit and is an error (never 'failed' or 'refused')."""
    c = Cell(planted("HangsInResume"), tmp_path)
    c.op("start", input="order-1")
    reply = c.call("resume", {"run_id": c.run, "value": "yes"}, "run-1/resume#2", timeout=1)
    assert "status" not in reply and "no answer within" in reply["error"], reply


def test_planted_racer_that_raises_fails_the_race(tmp_path):
    """A racer whose resume raises is never counted as refused or failed: the race's answer names it as an error,
    and the lab's EnvRacers stops the cell (planted bug of issue 24: a raising racer recorded as refused)."""
    from runners.plugins import PluginFailed
    from runners.resume import envs

    d = planted("RaisesInResume")
    c = Cell(d, tmp_path)
    c.op("start", input="order-1")
    reply = server(d).call({"call": "race", "runtime": d.name, "backend": c.backend.to_dict(),
                            "graph": GRAPH.to_dict(), "run": c.run, "value": "yes", "labels": ["a", "b"],
                            "jitters": [0, 0], "timeout": 30})
    assert all("error" in a and "RuntimeError: planted" in a["error"] for a in reply["answers"]), reply
    racers = envs.EnvRacers(2, d.name, c.backend, GRAPH)
    original = envs.server
    envs.server = lambda name: server(d)
    try:
        with pytest.raises(PluginFailed, match="racer a: in the race: resume raised RuntimeError"):
            racers.race(c.run, "yes", ["a", "b"], [0.0, 0.0])
    finally:
        envs.server = original


PLANTED_ENV = """
[tool.driftlab.runtimes."planted-{name}@1"]
adapter = "{path}:{cls}"
framework = "planted-{name}"
release = "{release}"
backends = ["sqlite"]
"""


def scratch_envs(tmp: Path, cls: str) -> Path:
    """A scratch data/envs holding the langgraph-1.2.24 env (same lock: the built env is reused) declaring only the
    planted runtime."""
    src = declared()["langgraph@1.2.24"]
    root = tmp / "envs"
    folder = root / src.env
    folder.mkdir(parents=True)
    from mechanisms.resume.frameworks import ENVS

    (folder / "uv.lock").write_bytes((ENVS / src.env / "uv.lock").read_bytes())
    text = (ENVS / src.env / "pyproject.toml").read_text().split("[tool.driftlab.runtimes")[0]
    (folder / "pyproject.toml").write_text(text + PLANTED_ENV.format(name=cls.lower(), path=PLANTED, cls=cls,
                                                                     release=src.release))
    return root


@pytest.mark.parametrize("cls,says", [("RaisesInResume", "resume raised RuntimeError: planted"),
                                      ("ExitsInResume", "exited with code 3")])
def test_planted_adapter_stops_the_run(cls, says, tmp_path):
    """The whole lab on a planted adapter: one line on stderr naming the environment, the adapter, the cell and the
    call, exit 2, and no record of the failed cell (planted bug of issue 24: an adapter that fails in every resume
    recorded as 'completed and refused', the run exiting 0 and the parked baseline judged live)."""
    env = {**os.environ, "DRIFTLAB_ENVS": str(scratch_envs(tmp_path, cls))}
    out = subprocess.run([sys.executable, "-m", "runners.cli", "reproduce", "--only", "resume_frameworks",
                          "--profile", "quick", "--jobs", "1", "--out", str(tmp_path / "run"),
                          "--mechanisms", f"planted-{cls.lower()}@1"],
                         capture_output=True, text=True, env=env, cwd=HERE.parent, timeout=600)
    assert out.returncode == 2, out.stderr[-2000:]
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("driftlab:") and "failed" in ln]
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    line = lines[0]
    for part in ("environment langgraph-1.2.24", f"planted_adapters.py:{cls}", "cell ", "call resume", says):
        assert part in line, (part, line)
    assert not list((tmp_path / "run" / "records").rglob("*.parquet"))


def test_a_server_that_hangs_itself_is_cut_and_named(tmp_path, monkeypatch):
    """A fork server that stops answering (itself, not a call's child: here SIGSTOPped) is killed once the call's
    limit and the grace have passed, and the lab's error names the adapter and the call (issue 24: before, a
    hanging server held the run forever)."""
    import signal

    from runners.resume import envs

    monkeypatch.setattr(envs, "SERVER_GRACE_S", 1.0)
    d = declared()["langgraph@1.2.24"]
    s = envs.EnvServer(d)
    try:
        c = Cell(d, tmp_path)
        os.kill(s.proc.pid, signal.SIGSTOP)
        with pytest.raises(envs.EnvError, match=r"did not answer call state .* within 2 s \(killed\)"):
            s.call({"runtime": d.name, "backend": c.backend.to_dict(), "graph": GRAPH.to_dict(), "call": "state",
                    "args": {"run_id": "r"}, "label": "x", "crash": None, "timeout": 1})
        assert s.proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        s.close()
