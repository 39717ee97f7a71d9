"""pydantic-graph 1.107 (FileStatePersistence, iter_from_persistence) under the resume harness (issue 14).

The env is built from its lock on first use (``data/envs/pydantic-graph-1.107``), every crash is a real SIGKILL of
a child of the env's fork server and every recovery a new process.  One fault cell (a SIGKILL after the gated
effect of a resume, then recovery) and one k=2 race, as ``test_resume_framework_adapters.py`` does for the other
frameworks; the assertions tie each verdict to what the ledger and pydantic-graph's file hold, so that a wrong lab
or adapter fails, whatever the release under test does.
"""
from __future__ import annotations

import pytest
from test_adapter_conformance import env_group
from test_resume_framework_adapters import _fault, _fired

RUNTIME = "pydantic-graph@1.107"
pytestmark = env_group(RUNTIME)  # on the worker that holds the env's servers


def _calls(history, name: str) -> list:
    return [op for op in history.operations if op.actor == "driver" and op.name == name]


@pytest.mark.planted("driftlab_frameworks.protocol:KillAtPoint.point", 'os.write(self.wfd, b"R\\n")',
                     "return")  # in the env server: a 'crash' point that returns instead of dying
def test_fault_cell_sigkill_after_gated_effect():
    """SIGKILL after the gated effect (charge) of a resume, recovery in a new process: the kill is a real signal 9,
    EO is invalid exactly when the ledger holds a second charge, and the recovery's answer is what pydantic-graph's
    file allows: the node's snapshot was left 'running', so either the framework refused to restore it (failed, its
    GraphRuntimeError, no node re-run, no effect fired by the recovery, the run's newest snapshot the killed node's)
    or it re-ran and the ledger says so (planted bugs: a 'crash' that unwinds or returns instead of dying (planted),
    which lets pydantic-graph record the node 'error' or finish it; a recovery in the killed process; an adapter that
    runs the node itself behind pydantic-graph's back, or that hides the framework's error as parked/done)."""
    records, history = _fault(RUNTIME, "crash_resume_after_effect_act")
    verdicts = dict(zip(records["property"], records["verdict"]))
    witnesses = dict(zip(records["property"], records["witness"]))
    assert records["sigkills"][0] >= 1 and records["processes"][0] >= 3
    resumes = _calls(history, "resume")
    assert resumes and all(op.status == "indeterminate" and op.value.get("killed_by") == 9 for op in resumes)
    charges = _fired(history, "charge")
    twice = any(n > 1 for n in charges.values())
    assert (verdicts["EO"] == "invalid") == twice
    for prop, verdict in verdicts.items():
        assert verdict != "invalid" or witnesses[prop], f"{prop} invalid without a witness"
    effects = [op for op in history.operations if op.name == "effect"]
    traces = [op for op in history.operations if op.name == "trace"]
    for rec in _calls(history, "recover"):
        run, label = rec.value["run"], rec.value["op"]
        assert charges.get(run) >= 1  # the killed resume's charge is in the ledger
        mine_fx = [e for e in effects if e.value.get("op") == label]
        mine_tr = [t for t in traces if t.value.get("op") == label]
        if rec.value["state"] == "failed":  # pydantic-graph refused to restore a node left 'running'
            assert "GraphRuntimeError" in rec.value["reason"]
            assert not mine_fx and not mine_tr  # nothing ran in the recovery
            cps = [op.value for op in history.operations if op.name == "checkpoint" and op.value["run"] == run]
            assert cps[-1]["next"] == "act" and not any(cp["next"] is None for cp in cps)  # never finished
            assert charges[run] == 1
        else:  # the framework re-ran: the ledger must show it and EO judge it
            assert rec.value["state"] == "done"
            assert any(t.value.get("node") == "act" for t in mine_tr)
            assert (verdicts["EO"] == "invalid") == (charges[run] > 1)


#: pydantic-graph's own refusals: no 'created' snapshot left to restore, a claimed snapshot already running, or
#: (before any node ran in the racer's call) its FileStatePersistence lock file removed under it by the winner
REFUSALS = ("GraphRuntimeError: ", "GraphNodeStatusError: ", "FileNotFoundError: ")
LOCK = ".pydantic-graph-persistence-lock'"


@pytest.mark.planted("driftlab_frameworks.pydantic_graph:PydanticGraphAdapter.resume", "if checkpoint_id is not None:",
                     "if True:")  # a refusal invented by the adapter
def test_race_k2():
    """Two racers forked from the env's warm server resume one parked interrupt.  pydantic-graph claims snapshots
    one at a time under its file lock, so the interrupt is consumed once; what the other racer gets depends on
    timing, and the lab must judge each answer from the ledger: refused by pydantic-graph (nothing 'created' left,
    the snapshot it claimed already running, or its lock file gone before any node ran), failed with the framework's own error (e.g. its lock file unlinked
    under it: FileNotFoundError; loud, so CO holds), or served a later snapshot the winner had just persisted, with
    no value consumed (silently accepted: CO violated; a charge it fired, too).  Planted bugs: racers that never
    answer or whose answers are lost; an adapter that reads the file and runs the interrupt node itself (two
    consumptions); a refusal invented by the adapter instead of pydantic-graph's own, or a refused racer that ran a
    node; a CO or EO verdict that disagrees with the ledger and the racers' answers."""
    from runners.experiment import Options
    from runners.resume.concurrency import race_cell

    out = race_cell("resume_frameworks", RUNTIME, "sqlite", 2, 0.0, 1, 7, Options())
    r, history = out.records, out.history
    racers = [op for op in history.operations if op.actor.startswith("racer-")]
    states = [op.value["state"] for op in racers]
    assert r["indeterminate"] == [0] and len(racers) == 2
    assert (r["served"][0], r["refused"][0], r["failed"][0]) == (
        sum(s in ("parked", "done") for s in states), states.count("refused"), states.count("failed"))
    ledger = [op.value for op in history.operations if op.name in ("trace", "effect")]
    consumed = [v["op"] for v in ledger if v.get("kind") == "consume"]
    charged = [v["op"] for v in ledger if v.get("effect") == "charge"]
    assert len(consumed) == 1 and r["effects_fired"] == [len(charged)]
    assert set(charged) <= {op.value["op"] for op in racers}  # every charge in a racer's own call
    other = next(op.value for op in racers if op.value["op"] != consumed[0])
    if other["state"] == "refused":
        assert other["reason"].startswith(REFUSALS)
        assert not other["reason"].startswith("FileNotFoundError") or other["reason"].endswith(LOCK)
        assert not [v for v in ledger if v.get("op") == other["op"]]  # refused before any node ran
    elif other["state"] == "failed":
        assert other["reason"]
    silently_served = other["state"] in ("parked", "done")
    assert r["co_verdict"] == ["invalid" if silently_served or other["op"] in charged else "valid"]
    fired = [(op.value["task"], op.value["effect"]) for op in history.operations if op.name == "effect"]
    if len(fired) > len(set(fired)):  # an effect fired twice
        assert r["eo_verdict"] == ["invalid"]
    if sorted(fired) == sorted(set(fired)) and len(fired) == 3:  # prepare's, the charge and the email, once each
        assert r["eo_verdict"] == ["valid"]


#: runs in the pydantic-graph env's Python (the adapter imports pydantic_graph, which lives there only), the adapters'
#: folder loaded as ``driftlab_frameworks`` and the frameworks' protocol.py on the command line (an adapter's plant
#: applies there, as in an env server; ``tests/plant_site``)
READ = """
import importlib.util, json, sys, threading, time
from pathlib import Path
F = {frameworks!r}
spec = importlib.util.spec_from_file_location("driftlab_frameworks", F + "/__init__.py", submodule_search_locations=[F])
pkg = importlib.util.module_from_spec(spec); sys.modules["driftlab_frameworks"] = pkg; spec.loader.exec_module(pkg)
from driftlab_frameworks.pydantic_graph import read_snapshots
path = Path({path!r})
whole = json.dumps([{{"id": "a:1", "kind": "node"}}, {{"id": "b:2", "kind": "node"}}]).encode()
path.write_bytes(whole[:7])  # a racer's rewrite, caught between its truncate and its last byte
threading.Timer(0.2, path.write_bytes, (whole,)).start()
got = read_snapshots(path)
path.write_bytes(b"")  # a file no writer is finishing
t = time.monotonic()
try:
    read_snapshots(path, settle=0.3)
    stuck = None
except json.JSONDecodeError:
    stuck = round(time.monotonic() - t, 1)
print(json.dumps({{"got": [s["id"] for s in got], "stuck": stuck}}))
"""


@pytest.mark.planted("driftlab_frameworks.pydantic_graph:read_snapshots", "if time.monotonic() >= deadline:",
                     "if True:")
def test_a_read_inside_a_racers_rewrite_waits_for_the_whole_file(tmp_path):
    """pydantic-graph rewrites its file with ``Path.write_bytes`` under a lock the lab's reader does not take: the
    reader must wait out a rewrite in progress and return the whole file, and still stop on a file that stays broken.
    Bug class (CI, stop 37): a racer's answer read while the other racer rewrote the file stopped the run with
    ``JSONDecodeError`` (a failure of the lab's reader, not an answer of pydantic-graph); planted: a reader that
    gives up on the first cut read."""
    import json
    import subprocess
    from pathlib import Path

    from runners.resume.envs import ensure

    frameworks = Path(__file__).resolve().parents[1] / "mechanisms" / "resume" / "frameworks"
    script = READ.format(frameworks=str(frameworks), path=str(tmp_path / "pg-run.json"))
    out = subprocess.run([str(ensure("pydantic-graph-1.107").python), "-c", script, str(frameworks / "protocol.py")],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["got"] == ["a:1", "b:2"]
    assert got["stuck"] is not None and got["stuck"] >= 0.3
