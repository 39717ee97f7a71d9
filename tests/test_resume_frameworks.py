"""Framework environments and their adapters under the resume harness (issue 14), and REMIT beside the guard.

Each framework runtime runs in its own uv-locked env (built from its lock on
first use, then reused); every crash is a real SIGKILL of a child of the env's
fork server; the verdicts come from the family's checkers.  One fault cell and
one k=2 race per framework this file's owner wrote (LangGraph 1.2.9 and
today's release); DBOS, Agent Framework, LlamaIndex and Temporal have theirs in
their own test modules.  Each test names the planted bug it catches.
"""
from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from pathlib import Path

import pytest

from mechanisms.resume.frameworks import protocol
from vocabulary.resume import DEFAULT_GRAPH, POINTS, GraphSpec

FRAMEWORKS = ("langgraph@1.2.9", "langgraph@1.2.24")


# ---------------------------------------------------------------------------------------------- the protocol
@pytest.mark.planted("mechanisms.resume.frameworks.protocol:Graph.apply",
                     'new["steps"] = (steps + 1) if isinstance(steps, int) else steps',
                     'new["steps"] = (steps + 2) if isinstance(steps, int) else steps')
def test_protocol_semantics_equal_the_lab_graph():
    """The env's node semantics and names are the lab's (planted bug: protocol.Graph.apply or a point name drifting
    from vocabulary.resume, so that a framework doing exactly what the graph says is judged a violation)."""
    assert protocol.POINTS == POINTS
    for spec in (DEFAULT_GRAPH, DEFAULT_GRAPH.with_invalid("act")):
        g = protocol.Graph(spec.to_dict())
        state = spec.initial_state("order-1")
        for step in range(len(spec.nodes)):
            resume = "yes" if spec.nodes[step].interrupt else None
            assert g.apply(step, state, resume) == spec.apply(step, state, resume)
            assert g.task(step) == spec.task(step)
            for key in spec.nodes[step].effects:
                assert g.payload(step, key, state) == spec.payload(step, key, state)
            state = spec.apply(step, state, resume)


class SwallowingAdapter(protocol.Adapter):
    """Planted bug: a node raises, the adapter catches it and answers 'done' although nothing was persisted."""

    def start(self, run_id, input):
        try:
            raise RuntimeError("the framework failed in node prepare")
        except RuntimeError:
            return self.status(run_id, protocol.DONE, "cp-1", None, self.graph.initial_state(input))

    def state(self, run_id):
        return self.status(run_id, protocol.REFUSED, reason=f"no run {run_id!r}")


def _ledger(folder: str, ns: str) -> None:
    conn = sqlite3.connect(str(Path(folder) / f"{ns}ledger.sqlite"))
    conn.execute("CREATE TABLE effects (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, task TEXT, key TEXT, "
                 "payload TEXT, idem TEXT UNIQUE, pid BIGINT, op TEXT, at REAL)")
    conn.execute("CREATE TABLE trace (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, step INTEGER, node TEXT, "
                 "kind TEXT, value TEXT, pid BIGINT, op TEXT, at REAL)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("read_line", [
    pytest.param(protocol._read_line, id="env server", marks=pytest.mark.planted(
        "mechanisms.resume.frameworks.protocol:_read_line", "        if not ready:\n",
        "        if left <= 0 or not ready:\n")),
    pytest.param(__import__("runners.processes").processes.read_line, id="lab", marks=pytest.mark.planted(
        "runners.processes:read_line", "if not select.select([fd], [], [], left)[0]:",
        "if left <= 0 or not select.select([fd], [], [], left)[0]:"))])
def test_a_spent_race_deadline_still_reads_the_answers_already_written(read_line):
    """A race reads its k racers against one deadline, so a late reader may have no time left: it must still take
    a line already in the pipe (planted bug: a spent deadline reported every later racer as silent, or the old
    per-racer timeout, k x 60 s for a hung race); with nothing there it times out at once."""
    rfd, wfd = os.pipe()
    try:
        assert read_line(rfd, 0.0) == b"T"
        os.write(wfd, b'{"status": "done"}\n')
        assert read_line(rfd, 0.0) == b'{"status": "done"}\n'
    finally:
        os.close(rfd)
        os.close(wfd)


@pytest.mark.planted("mechanisms.resume.frameworks.protocol:Server._child",
                     'if head.get("state") != result["state"]:',
                     'if False:')
def test_swallowed_exception_is_not_a_pass(tmp_path):
    """An adapter that swallows an exception and answers 'done' is reported as an error, which stops the lab's run
    (issue 24 §1; planted bug: a server that trusts the adapter's answer, so a crashed framework scores as a
    conforming run)."""
    _ledger(str(tmp_path), "t")
    server = protocol.Server(SwallowingAdapter)
    reply = server.call({"backend": {"kind": "sqlite", "location": str(tmp_path), "namespace": "t"},
                         "graph": DEFAULT_GRAPH.to_dict(), "call": "start", "args": {"run_id": "r", "input": "o"},
                         "label": "r/start#1", "crash": None, "timeout": 20})
    assert "status" not in reply and reply["code"] == 0
    assert "adapter answered 'done'" in reply["error"] and "'refused'" in reply["error"]


@pytest.mark.planted("mechanisms.resume.frameworks.protocol:KillAtPoint.point",
                     'os.write(self.wfd, b"R\\n")',
                     'raise RuntimeError("a crash that unwinds")')
def test_crash_point_is_a_real_sigkill(tmp_path):
    """A crash point kills the call's child with signal 9 (planted bug: an adapter hook that raises or returns, so a
    'crash' unwinds finally-blocks and closes transactions that a real SIGKILL would leave open)."""

    class Parks(SwallowingAdapter):
        def start(self, run_id, input):
            self.run_node(run_id, 0, self.graph.initial_state(input))
            raise AssertionError("the kill point did not stop the child")

    _ledger(str(tmp_path), "t")
    reply = protocol.Server(Parks).call({"backend": {"kind": "sqlite", "location": str(tmp_path), "namespace": "t"},
                                         "graph": DEFAULT_GRAPH.to_dict(), "call": "start",
                                         "args": {"run_id": "r", "input": "o"}, "label": "r/start#1",
                                         "crash": ["after_effect", "prepare"], "timeout": 20})
    assert reply["killed"] and reply["code"] == -9
    rows = sqlite3.connect(str(tmp_path / "tledger.sqlite")).execute("SELECT key, op FROM effects").fetchall()
    assert rows == [("reserve", "r/start#1")]  # the effect before the point is durable, nothing after it


@pytest.mark.planted("mechanisms.resume.frameworks.protocol:Server.learn", "importlib.import_module(name)", "pass")
def test_server_learns_what_its_children_imported_and_survives_what_it_cannot_import(tmp_path, monkeypatch):
    """A module a call's child imported lazily is imported by the server afterwards, so the next children inherit
    it; a name the server cannot import is left to the children (planted bugs: a server that never learns, so
    every forked call imports the framework's lazy modules again; a learned name that fails to import here and
    takes the server down; a call's answer lost in the reply's new form)."""
    import sys
    import types

    lazy = "driftlab_lazy_probe"
    (tmp_path / f"{lazy}.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    class Lazy(SwallowingAdapter):
        def state(self, run_id):
            __import__(lazy)
            sys.modules["driftlab_not_importable"] = types.ModuleType("driftlab_not_importable")
            return self.status(run_id, protocol.REFUSED, reason="no run")

    _ledger(str(tmp_path), "t")
    server = protocol.Server(Lazy)
    reply = server.call({"backend": {"kind": "sqlite", "location": str(tmp_path), "namespace": "t"},
                         "graph": DEFAULT_GRAPH.to_dict(), "call": "state", "args": {"run_id": "r"}, "timeout": 20})
    assert reply["status"]["state"] == protocol.REFUSED and reply["status"]["reason"] == "no run"
    assert lazy not in sys.modules and set(server.learned) >= {lazy, "driftlab_not_importable"}
    server.learn()
    monkeypatch.delitem(sys.modules, lazy)  # imported by learn (raises if it was not), removed after the test
    assert "driftlab_not_importable" not in sys.modules
    assert server.unlearnable == {"driftlab_not_importable"} and server.learned == []


@pytest.mark.planted("mechanisms.resume.frameworks:lock_problems", "locked = _locked(lock.read_text())",
                     "locked = lock_problems.__dict__.setdefault(str(lock), _locked(lock.read_text()))")
def test_an_edited_lock_is_read_again_in_the_same_process(tmp_path):
    """Bug class: the parsed-lock cache (``_locked``) keyed on the file instead of its content, so a lock rewritten
    within one process (``driftlab env add``, a user's ``uv lock``) is judged by the pins it held before."""
    import tomllib

    from mechanisms.resume.frameworks import lock_problems

    src = Path(__file__).resolve().parents[1] / "data" / "envs" / "langgraph-1.2.24"
    (tmp_path / "pyproject.toml").write_text((src / "pyproject.toml").read_text())
    doc = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    lock = (src / "uv.lock").read_text()
    (tmp_path / "uv.lock").write_text(lock)
    assert lock_problems(tmp_path / "pyproject.toml", doc) == []
    (tmp_path / "uv.lock").write_text(lock.replace('name = "langgraph"\nversion = "1.2.24"',
                                                   'name = "langgraph"\nversion = "1.2.23"', 1))
    assert any("langgraph==1.2.24 is not what uv.lock holds (langgraph 1.2.23)" in p
               for p in lock_problems(tmp_path / "pyproject.toml", doc))


# ---------------------------------------------------------------------------------------------- the environments
@pytest.mark.planted("runners.resume.envs:folder_of",
                     'hashlib.sha256(lock + "\\0".join(SYNC).encode())',
                     'hashlib.sha256("\\0".join(SYNC).encode())')
def test_env_is_built_from_its_lock_once_and_reused(tmp_path, monkeypatch):
    """A second use of an env reuses the folder keyed by its lock's hash, and records the installed versions
    (planted bug: a cache keyed by name only, so a changed lock or build command silently reuses the old env, or a
    rebuild per run)."""
    from runners.resume import envs

    first = envs.ensure("langgraph-1.2.9")
    lock = (envs.ENVS / "langgraph-1.2.9" / "uv.lock").read_bytes()
    assert first.installed["langgraph"] == "1.2.9" and first.path == envs.folder_of("langgraph-1.2.9", lock)
    assert envs.folder_of("langgraph-1.2.9", lock + b"\n") != first.path
    monkeypatch.setattr(envs, "SYNC", envs.SYNC[:-1])
    assert envs.folder_of("langgraph-1.2.9", lock) != first.path
    monkeypatch.undo()
    envs._BUILT.clear()
    again = envs.ensure("langgraph-1.2.9")
    assert again.reused and again.path == first.path


@pytest.mark.planted("runners.resume.envs:_build", "shutil.rmtree(stale, ignore_errors=True)", "pass")
def test_a_build_killed_midway_is_never_marked_built_and_is_rebuilt(tmp_path, monkeypatch):
    """Issue 24 §5: an env's build is SIGKILLed (with its uv) while uv installs into the temporary folder; nothing is
    in the env's place, and the next use builds it whole and removes the killed build's temporary folder (bug
    classes: a killed first build left marked built, every later run failing on an ImportError until the folder is
    deleted by hand; planted bug: the next build that leaves the killed build's temporary folder in the cache)."""
    import signal
    import subprocess
    import sys
    import time

    from runners.resume import envs

    cache = tmp_path / "cache"
    env = {**os.environ, "DRIFTLAB_ENV_CACHE": str(cache)}
    code = "from runners.resume import envs; envs.ensure('langgraph-1.2.9')"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=Path(__file__).resolve().parents[1],
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and not list(cache.glob(".langgraph-1.2.9-*.tmp-*/lib")):
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    lock = (envs.ENVS / "langgraph-1.2.9" / "uv.lock").read_bytes()
    place = envs.folder_of("langgraph-1.2.9", lock).name
    assert proc.returncode == -9 and list(cache.glob(".langgraph-1.2.9-*.tmp-*")), "killed while building"
    assert not (cache / place).exists()
    monkeypatch.setenv("DRIFTLAB_ENV_CACHE", str(cache))
    monkeypatch.setattr(envs, "_BUILT", {})
    built = envs.ensure("langgraph-1.2.9")
    assert not built.reused and built.installed["langgraph"] == "1.2.9" and (built.path / envs.MARK).exists()
    assert not list(cache.glob(".langgraph-1.2.9-*.tmp-*"))
    ok = subprocess.run([str(built.python), "-c", "import langgraph.graph"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr


@pytest.mark.planted("runners.resume.envs:EnvError.__init__", 'f"environment {env}: {step} failed: {reason}"',
                     'f"environment {env}: failed: {reason}"')
@pytest.mark.parametrize("broken,step", [("missing", "read"), ("badlock", "sync")])
def test_env_failure_is_one_line_naming_env_and_step(tmp_path, monkeypatch, broken, step):
    """A missing or unbuildable env is one line naming it and the failing step, and an unbuildable one is never
    marked built (planted bug: a message that does not name the failing step.  uv's many lines are cut to one twice,
    by envs._run, which keeps uv's last line, and by EnvError, which joins what it is given into one line: a bug in
    either alone still gives one line, so neither is planted here)."""
    from runners.resume import envs

    monkeypatch.setenv("DRIFTLAB_ENV_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "envs"
    if broken == "badlock":
        (root / "badlock").mkdir(parents=True)
        (root / "badlock" / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0"\n'
                                                         'dependencies = ["no-such-package-driftlab==0"]\n')
        (root / "badlock" / "uv.lock").write_text("version = 1\n")
    with pytest.raises(envs.EnvError) as err:
        envs.ensure(broken, root)
    assert str(err.value).startswith(f"environment {broken}: {step} failed:") and "\n" not in str(err.value)
    assert not list((tmp_path / "cache").glob(f"{broken}-*/driftlab-env.json"))


# ---------------------------------------------------------------------------------------------- the frameworks
def _verdicts(runtime: str, cell: str):
    from runners.experiment import Options
    from runners.resume import common as rc

    records, _ = rc.run_fault_cell("resume_frameworks", runtime, cell, 1, 7, Options(), "sqlite")
    return dict(zip(records["property"], records["verdict"])), records


@pytest.mark.planted("analysis.resume.checkers:EffectExactlyOnce.judge", "if len(rows) > 1:", "if len(rows) > 2:")
@pytest.mark.parametrize("runtime", FRAMEWORKS)
def test_fault_cell_sigkill_reexecutes_the_gated_effect(runtime):
    """A SIGKILL after the gated effect, then a recovery in a new process: stock LangGraph fires it again, and the
    history says so with a real signal-9 kill (planted bug: a crash that is not a SIGKILL of the env's child, or a
    recovery in the killed process, either of which hides the re-execution the paper reports for 1.2.9); and
    ``driftlab check`` on the stored history says the same (planted bug: a history missing the env's ledger)."""
    from runners.cli import main
    from runners.experiment import Options
    from runners.resume import common as rc
    from vocabulary import history_to_jsonl

    records, history = rc.run_fault_cell("resume_frameworks", runtime, "crash_resume_after_effect_act", 1, 7,
                                         Options(), "sqlite")
    verdicts = dict(zip(records["property"], records["verdict"]))
    assert records["sigkills"][0] >= 1 and records["processes"][0] >= 3
    assert verdicts["EO"] == "invalid" and verdicts["liveness"] == "valid"
    stored = Path(tempfile.mkdtemp()) / "history.jsonl"  # driftlab check re-judges the framework's stored history
    stored.write_text(history_to_jsonl(history))
    assert main(["check", str(stored)]) == 1


@pytest.mark.planted("driftlab_frameworks.protocol:Server.race",  # in the env server: racers' answers lost
                     'answers.append(json.loads(line) if line.endswith(b"\\n") else None)', "answers.append(None)")
@pytest.mark.parametrize("runtime", FRAMEWORKS)
def test_race_k2_forks_two_racers_from_the_env_server(runtime):
    """Two racers forked from the env's warm server both resume one parked interrupt: both are answered, and the
    checkers see stock LangGraph's double consumption (planted bug: racers that never overlap or whose answers are
    lost, which would read as consume-once)."""
    from runners.experiment import Options
    from runners.resume.concurrency import race_cell

    out = race_cell("resume_frameworks", runtime, "sqlite", 2, 0.0, 1, 7, Options())
    r = out.records
    assert r["indeterminate"] == [0] and r["served"][0] + r["refused"][0] + r["failed"][0] == 2
    assert (r["effects_fired"][0] > 1) == (r["co_verdict"][0] == "invalid")


# ---------------------------------------------------------------------------------------------- REMIT
@pytest.mark.planted("analysis.resume.checkers:ConsumeOnce.judge",
                     'and self.refusal_required:',
                     ':')
def test_remit_two_readings_of_a_stray_second_resume():
    """REMIT makes a stray second resume inert (accepted, no effect): the lab's CO (refusal required) says invalid,
    REMIT's reading says valid, and both are recorded (planted bug: scoring one guard by the other's definition)."""
    pytest.importorskip("remit")
    from runners.experiment import Options
    from runners.resume import common as rc

    records, _ = rc.run_fault_cell("resume_faults", "langgraph+remit", "second_resume_head", 1, 7, Options(), "sqlite")
    got = dict(zip(records["property"], records["verdict"]))
    assert got["CO"] == "invalid" and set(records["co_inert"]) == {"valid"} and got["EO"] == "valid"


def test_remit_gate_serves_one_of_two_racers():
    """With its cross-process gate on, REMIT serves one racer and refuses the other before any node runs (planted
    bug: the gate left off, REMIT's default, which serves both)."""
    pytest.importorskip("remit")
    from runners.experiment import Options
    from runners.resume.concurrency import race_cell

    r = race_cell("resume_concurrency", "langgraph+remit", "sqlite", 2, 0.0, 1, 7, Options()).records
    assert r["effects_fired"] == [1] and r["served"] == [1] and r["refused"] == [1]


@pytest.mark.planted("analysis.resume.checkers:ConsumeOnce.judge",
                     'if fired:',
                     'if fired and self.refusal_required:')
def test_co_read_two_ways_never_forgives_a_refired_effect():
    """REMIT's reading of CO forgives only an inert stray resume; the lab's CO keeps its refusal clause (planted bugs:
    an inert reading that also forgives a stray resume re-firing the gated effect, or a lab CO that lost the
    clause 'a second resume must be refused')."""
    from runners.experiment import Options
    from runners.resume import common as rc

    inert, _ = rc.run_fault_cell("resume_faults", "naive", "second_resume_head", 1, 7, Options(), "sqlite")
    refired, _ = rc.run_fault_cell("resume_faults", "sequencer+double_consume", "second_resume_head", 1, 7, Options(),
                                   "sqlite")
    co = lambda r: dict(zip(r["property"], r["verdict"]))["CO"]  # noqa: E731
    assert co(inert) == "invalid" and set(inert["co_inert"]) == {"valid"}
    assert co(refired) == "invalid" and set(refired["co_inert"]) == {"invalid"}


@pytest.mark.parametrize("cell,reason", [("replay_past_checkpoint", "naive has no replay operation"),
                                         ("update_undeclared_key", "naive has no update operation"),
                                         pytest.param("parallel_sibling_done", "graph hint 'parallel' not expressed",
                                                      marks=pytest.mark.planted(
                                                          "runners.resume.common:not_applicable",
                                                          "if not hasattr(cls, \"declared\"):", "if False:"))])
def test_framework_only_cells_are_na_with_a_reason_for_the_lab_runtimes(cell, reason):
    """A cell a runtime cannot express is n/a with a one-line reason, never dropped and never run half-way
    (planted bug: the lab's naive runtime running the parallel graph in order and scoring it, or a replay step
    silently skipped so the cell looks conforming)."""
    from runners.experiment import Options
    from runners.resume import common as rc

    records, _ = rc.run_fault_cell("resume_frameworks", "naive", cell, 1, 7, Options(), "sqlite")
    assert set(records["verdict"]) == {"not applicable"} and len(records["verdict"]) == 7
    assert all(reason in w for w in records["witness"])


@pytest.mark.planted("runners.resume.frameworks:ResumeFrameworks.waits",
                     'return not cell.p["k"] and d is not None and bool(d.fault_cells_wait)',
                     'return d is not None and bool(d.fault_cells_wait)')
def test_only_fault_cells_of_a_runtime_declaring_that_they_wait_run_beside_the_computing_ones():
    """Temporal and Prefect declare that their fault cells wait (out an activity timeout; on a heartbeat thread's
    1 s sleeps): those, and nothing else, run in the waiting lane (planted bugs: a race marked waiting, whose
    saturation then depends on a more loaded machine; the mark read from the wrong runtime, so a CPU-bound
    framework's cells oversubscribe the cores)."""
    from runners.experiment import Options
    from runners.resume.frameworks import ResumeFrameworks

    rows = ("temporal@1.35", "prefect[crashed-retry]@3.9", "langgraph@1.2.24")
    exp, options = ResumeFrameworks(), Options(mechanisms=rows)
    cells = exp.cells("quick", 1, options)
    assert {(c.p["runtime"], c.p["fault_cell"] == "concurrent_resume") for c in cells} == {
        (row, race) for row in rows for race in (False, True)}
    waiting = {(c.p["runtime"], c.p["fault_cell"] == "concurrent_resume") for c in cells if exp.waits(c, options)}
    assert waiting == {("temporal@1.35", False), ("prefect[crashed-retry]@3.9", False)}


@pytest.mark.planted("runners.resume.frameworks:framework_rows", "if declared()[r].framework not in QUICK_LEFT_OUT",
                     "if True")
def test_the_quick_profile_runs_one_configuration_per_framework_and_leaves_out_the_costliest():
    """The quick profile's framework rows: each framework release's default configuration, none of ``QUICK_LEFT_OUT``;
    the paper profile runs every declared row, and a row the user names runs in either (planted bug: the quick
    profile running a left-out framework's rows, the quick profile's time then over its budget)."""
    from mechanisms.resume.frameworks import declared
    from runners.experiment import Options
    from runners.resume.frameworks import QUICK_LEFT_OUT, framework_rows

    every = list(dict.fromkeys(d.name for d in declared().values()))
    quick = framework_rows(Options(), "quick")
    assert framework_rows(Options(), "paper") == every
    assert set(quick) < set(every) and {"langgraph@1.2.24", "temporal@1.35", "dbos@3.4"} <= set(quick)
    assert not [r for r in quick if declared()[r].framework in QUICK_LEFT_OUT]
    assert len({(declared()[r].framework, declared()[r].release) for r in quick}) == len(quick)  # one per release...
    assert {declared()[r].framework for r in quick} == {declared()[r].framework for r in every} - set(QUICK_LEFT_OUT)
    assert framework_rows(Options(mechanisms=("prefect@3.9",)), "quick") == ["prefect@3.9"]  # ...named: it runs
