"""``resume_powerloss``: an approved run, the power fails within the flush window, the machine restarts.

Serves issue 31.  Per cell: the store's folder is a lazy file system
(``runners/resume/lazyfs.py``) and the effect ledger, the world, is outside it.
A child process starts the run (it parks for approval); optionally everything
is flushed (a run parked long ago); a second child resumes with the approval
and is SIGKILLed at the named point (``faults/resume/powerloss.py``), the
unsynced data is dropped (``power_loss`` or ``torn``), the file system is
remounted (no page cache survives); a third child, as the restarted machine,
opens the store (does it load?), reads where the run stands (is what the
framework acknowledged still there?), recovers as the framework documents
(LangGraph: ``invoke(None)``) if the run stopped mid-way, and re-sends the
approval if the run waits for it again, exactly as a caller holding it would
(the guard's refusal is followed by the recovery its README names).  Judged
from the world ledger and the store: effects fired (0 / 1 / more), liveness
(the run ends done), acknowledged progress kept, store loads.

Rows run each framework's **stock** durability (``[stock-durability]``: the
lab sets nothing on LangGraph's SQLite connection), and tunings are rows of
their own (``langgraph``: WAL with ``synchronous=NORMAL``, the setting the lab
uses in its SIGKILL cells for speed).  The SQLite settings in force are read
from the store's connection and recorded.

**Framework rows** (:data:`FRAMEWORK_ROWS`: CrewAI, pydantic-graph, Agent
Framework, DBOS on SQLite, LlamaIndex) run in their own environments through
their env fork servers (``runners/resume/envs.py``), exactly as
``resume_frameworks`` runs them: the adapter's ``backend["location"]`` (its
store's folder) is the lazy file system and ``backend["ledger_location"]``
(the world) is outside it.  Each call is a fresh child of the env's warm
server: ``start`` (parks), the optional flush, ``resume`` with ``crash`` at
the adapter's named point (:data:`ENV_POINTS`; the server SIGKILLs the child
there: the power failing), the fault, the remount, then the restart in NEW
children: ``state`` (does the store load? an error here is the finding, with
its one line), ``recover`` if the run stopped mid-way or failed, the approval
re-sent if the run waits for it again.  A point the adapter declares
unreachable is an n/a cell with its reason; an adapter's or env's error before
the loss stops the run (one line), never a result.  The release is the env's
declared one (the server refuses an env that holds another).
"""
from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from contextlib import closing
from pathlib import Path

from driftlab_guard.errors import STATE_LOST_REASON

from faults.resume.powerloss import BY_NAME, CRASH_ONLY, FAULTS, FLUSH, POINTS, POWER_LOSS, SENT, STRICT
from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, artifact
from runners.processes import fork_start, kill, wait
from runners.resume import lazyfs
from runners.resume.procs import build
from vocabulary.resume import DEFAULT_GRAPH, DONE, FAILED, PARKED, REFUSED, Backend

#: the rows: runtime -> what its configuration is (the table's ``configuration`` says it beside the pragmas read)
ROWS = {
    "langgraph[stock-durability]": "LangGraph SqliteSaver as shipped (WAL, the connection's default synchronous)",
    "langgraph": "tuning: WAL + synchronous=NORMAL (the lab's SIGKILL cells' setting)",
    "langgraph+guard[stock-durability]": "driftlab's guarded SqliteSaver as shipped, effect ledger outside",
    "langgraph+guard[any-saver]": "the guard wrapping the tuned saver (WAL + synchronous=NORMAL) with its claims in a "
                                  "SQLite file of their own at synchronous=FULL: the checkpoint can be rolled back "
                                  "behind a claim (issue 31 §4)",
    "sequencer": "the lab's own sequencer as the lab runs it in its SIGKILL cells (claim and checkpoints in one SQLite "
                 "file, WAL + synchronous=OFF: chosen for speed, never for a power loss; SQLite's default is FULL)",
}
#: the framework rows (issue 31 §3): each runs in its own environment through its env's fork server, exactly as
#: ``resume_frameworks`` runs it, its store on the lazy file system as the framework ships it (nothing tuned); what
#: each persistence does was read from the framework's source at the pinned release
FRAMEWORK_ROWS = {
    "crewai@1.15": "CrewAI @persist with SQLiteFlowPersistence as shipped (one SQLite file, the framework sets WAL, "
                   "synchronous is the connection's default)",
    "pydantic-graph@1.107": "FileStatePersistence as shipped (one JSON file per run, rewritten in place by "
                            "Path.write_bytes, no fsync)",
    "agent-framework@1.23": "FileCheckpointStorage as shipped (one JSON file per checkpoint, written to a temporary "
                            "file and os.replace'd over its name, no fsync of the file or its folder)",
    "dbos@3.4": "DBOS's system database on SQLite as shipped (the framework sets no journal mode or synchronous)",
    "llamaindex[step-boundary]@2.26": "the application's snapshot of ctx.to_dict() in a SQLite table, as "
                                      "LlamaIndex's docs show (the adapter sets WAL, synchronous is the default)",
    # the other framework rows whose store is files (paper profile, or named)
    "apache-burr@0.43": "Burr's SQLitePersister as shipped (one SQLite file, the framework sets no journal mode or "
                        "synchronous)",
    "google-adk@2.13": "ADK's DatabaseSessionService on SQLite (aiosqlite) as shipped (one SQLite file, no journal "
                       "mode or synchronous set)",
    "agno@3.1": "Agno's SqliteDb as shipped with checkpoint='runs', the default (one SQLite file, the framework sets "
                "WAL, synchronous is the default)",
    "openai-agents@0.24": "the application's saved RunState, as the SDK's docs show (one JSON file per saved state, "
                          "the adapter writes a temporary file, fsyncs it and renames it into place, the folder not "
                          "fsynced)",
}
#: the framework rows of the quick profile (at most 30 s of it, issue 31): the rows whose env servers start in a
#: second or two; CrewAI's server imports CrewAI and LanceDB (about 12 s per worker process), so its row runs in the
#: paper profile and whenever it is named (``--mechanisms crewai@1.15``)
QUICK_FRAMEWORK_ROWS = ("pydantic-graph@1.107", "agent-framework@1.23", "dbos@3.4", "llamaindex[step-boundary]@2.26")
#: a loss point -> the env adapter's named point (point, node) where its call's child is SIGKILLed; ``after_done``
#: has none (the resume call returned done, its child exited)
ENV_POINTS = {"after_effect": ("after_effect", "act"), "during_checkpoint_write": ("during_checkpoint_write", "act"),
              "after_save_returned": ("before_node", "notify"), "after_done": None}
QUICK_POINTS = ("after_effect", "after_save_returned", "after_done")
RUN, VALUE = "pl-run", "yes"
WAIT_S = 60.0  # a child that neither reaches its point nor ends in this time is a failure of the lab


def _send(fd: int, obj: dict) -> None:
    os.write(fd, (json.dumps(obj) + "\n").encode())


def _read(fd: int, timeout_s: float) -> dict | None:
    """One JSON line from the pipe, or None if the writer closed it (the child exited) first."""
    import select

    buf = b""
    deadline = time.monotonic() + timeout_s
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise DriftlabError(f"resume_powerloss: a child gave no answer in {timeout_s:g} s")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        buf += chunk
    return json.loads(buf.decode())


class _StopAt:
    """The harness's hook: at the named point, say so and wait for the SIGKILL."""

    op = "resume"

    def __init__(self, fd: int, point: str, node: str):
        self.fd, self.target = fd, (point, node)

    def point(self, name: str, run_id: str, step: int, node: str) -> None:
        if (name, node) == self.target:
            _send(self.fd, {"at": name})
            time.sleep(3600)


def _pragmas(rt) -> str:
    """The SQLite settings in force on the runtime's store, and on the guard's claim store of its own if it has one
    (``[any-saver]``: a ``SqliteClaims`` file, read from its connection)."""
    conn = getattr(rt, "_conn", None) or getattr(getattr(getattr(rt, "tables", None), "sql", None), "conn", None)
    claims = getattr(getattr(getattr(rt, "saver", None), "claims", None), "conn", None)
    said = _read_pragmas(conn)
    return said if claims is None else f"{said}; claims: {_read_pragmas(claims)}"


def _read_pragmas(conn) -> str:
    try:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(conn.execute("PRAGMA synchronous").fetchone()[0])
        return f"journal_mode={mode}, synchronous={sync}"
    except Exception:  # noqa: BLE001 - a runtime without a SQLite connection of its own
        return "?"


def _start(runtime: str, backend: Backend, fd: int) -> None:
    rt = build(runtime, backend, DEFAULT_GRAPH)
    rt.setup()
    st = rt.start(RUN, "in")
    _send(fd, {"state": st.state, "pragmas": _pragmas(rt)})


def _resume(runtime: str, backend: Backend, point: str, node: str, fd: int) -> None:
    rt = build(runtime, backend, DEFAULT_GRAPH, _StopAt(fd, point, node) if point else None)
    st = rt.resume(RUN, VALUE)
    _send(fd, {"at": "returned", "state": st.state})
    time.sleep(3600)  # after_done: the power fails a moment after the call returned


def _restart(runtime: str, backend: Backend, fd: int) -> None:
    """The machine after the restart: load, read, recover, re-send; what the world ledger holds."""
    out: dict = {"loads": True, "calls": []}
    try:
        rt = build(runtime, backend, DEFAULT_GRAPH)
        st = rt.state(RUN)
    except Exception as exc:  # noqa: BLE001 - the store does not load: that is the finding, with its error
        out.update(loads=False, error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        _send(fd, out)
        return
    out["before"] = {"state": st.state, "node": st.node, "parked": st.interrupt is not None}
    if st.state == PARKED and st.interrupt is None:  # stopped mid-way: the documented recovery
        st = rt.recover(RUN)
        out["calls"].append(("recover", st.state, st.reason))
    if st.state == PARKED and st.interrupt is not None or st.state == REFUSED:  # waiting again, or no run: re-sent
        st = rt.resume(RUN, VALUE)
        out["calls"].append(("resend", st.state, st.reason))
        if st.state == REFUSED and st.reason.startswith(STATE_LOST_REASON):  # the Status carries the reason only
            # the guard's refusal "state_lost" (a claim outlived the checkpoints behind it) names its recovery:
            # start the run again with its input, then invoke(None), which the guard hands the claimed value
            st = rt.start(RUN, "in")
            out["calls"].append(("start again", st.state, st.reason))
            st = rt.recover(RUN)
            out["calls"].append(("recover", st.state, st.reason))
        elif st.state == REFUSED:  # the guard's other refusals name invoke(None) as their recovery
            st = rt.recover(RUN)
            out["calls"].append(("recover", st.state, st.reason))
    out["final"] = st.state
    gated = DEFAULT_GRAPH.task(DEFAULT_GRAPH.names.index("act"))
    out["effects"] = sum(1 for e in rt.ledger.effects(RUN) if e.task == gated and e.key == "charge")
    _send(fd, out)


def _child(fn, args: tuple) -> tuple[int, int]:
    r, w = os.pipe()
    pid = fork_start(fn, (*args, w))
    os.close(w)
    return pid, r


def free_mount_point(point: Path) -> None:
    """A mount point in use is refused in one line (a file system already mounted there, or a folder holding
    files): the lab never mounts over another mount, nor hides files under its own (issue 31)."""
    if os.path.ismount(point):
        raise DriftlabError(f"resume_powerloss: the mount point {point} is in use (a file system is mounted there); "
                            f"unmount it (fusermount3 -u {point}) or run again with another --out")
    if point.is_dir() and any(point.iterdir()):
        raise DriftlabError(f"resume_powerloss: the mount point {point} is in use (it holds files); remove them or "
                            "run again with another --out")


def run_one(runtime: str, point_name: str, flush_at_park: bool, fault: str, scratch: Path) -> dict:
    """One power-loss cell (module docstring); the record."""
    if _is_framework(runtime):
        return run_one_env(runtime, point_name, flush_at_park, fault, scratch)
    lp = BY_NAME[point_name]
    backing, mount, world = scratch / "backing", scratch / f"{lazyfs.PREFIX}mnt", scratch / "world"
    world.mkdir(parents=True, exist_ok=True)
    backend = Backend("sqlite", str(mount), "pl", ledger_location=str(world))
    free_mount_point(mount)
    with lazyfs.Mount(backing, mount, STRICT.get(fault, ""), scratch=scratch) as fs:
        pid, r = _child(_start, (runtime, backend))
        started = _read(r, WAIT_S)
        wait(pid)
        os.close(r)
        if not started or started.get("state") != PARKED:
            raise DriftlabError(f"resume_powerloss: {runtime}: the run did not park before the loss ({started})")
        if flush_at_park:
            fs.send(FLUSH)
        pid, r = _child(_resume, (runtime, backend, lp.point, lp.node))
        reached = _read(r, WAIT_S)
        kill(pid)  # the power fails: the resumer dies with whatever it had not synced
        os.close(r)
        if reached is None or (lp.point and reached.get("at") != lp.point):
            raise DriftlabError(f"resume_powerloss: {runtime}: the resumer never reached {point_name} ({reached})")
        acknowledged_done = reached.get("state") == DONE
        fs.send(SENT[fault])
        fs.remount()
        pid, r = _child(_restart, (runtime, backend))
        after = _read(r, WAIT_S)
        wait(pid)
        os.close(r)
    if after is None:
        raise DriftlabError(f"resume_powerloss: {runtime}: the restarted process died before it answered")
    return judge(runtime, lp, flush_at_park, fault, started["pragmas"], after, acknowledged_done)


# ---------------------------------------------------------------------------------------------- framework rows
def _is_framework(runtime: str) -> bool:
    from mechanisms.resume.frameworks import declared

    return runtime in declared()


def env_point(runtime: str, point_name: str) -> tuple[tuple[str, str] | None, str]:
    """The env adapter's named point for a loss point (:data:`ENV_POINTS`), and why it is n/a ("" if it is not):
    the adapter's own ``not_applicable`` (the point, or the point at ``act``); ``after_save_returned`` is n/a where
    the adapter declares that no checkpoint is written after act (``during_checkpoint_write@act``)."""
    from mechanisms.resume.frameworks import declared

    na = declared()[runtime].not_applicable
    target = ENV_POINTS[point_name]
    if target is None:
        return None, ""
    if point_name == "after_save_returned":
        why = na.get("during_checkpoint_write@act", "")
        return target, (f"no checkpoint of act to lose after its save: {why}" if why else "")
    for key in (target[0], f"{target[0]}@{target[1]}"):
        if key in na:
            return target, na[key]
    return target, ""


class _Env:
    """The cell's calls to the framework's env fork server, as ``resume_frameworks`` makes them: every call a fresh
    child of the warm server; ``crash`` SIGKILLs the call's child at the named point (the power failing)."""

    def __init__(self, runtime: str, backend: Backend):
        self.runtime, self.backend = runtime, backend
        self.rt = build(runtime, backend, DEFAULT_GRAPH)  # the lab's handle: requests, and the world's ledger

    def call(self, call: str, crash: tuple[str, str] | None = None, **args) -> dict:
        from runners.resume.envs import server, where

        reply = server(self.runtime).call(self.rt.request(call, args, f"powerloss-{call}", crash, WAIT_S))
        if "error" in reply:
            return {"error": f"{where(self.runtime)}{reply['error']} (call {call})"}
        if crash is not None and reply.get("killed"):
            return {"killed": True}
        if "status" not in reply:
            raise DriftlabError(f"resume_powerloss: {where(self.runtime)}call {call} answered {sorted(reply)}, "
                                "not a status")
        return reply["status"]

    def must(self, call: str, crash: tuple[str, str] | None = None, **args) -> dict:
        """A call before the loss: an error is a failure of the lab (the adapter's or the env's), never a result."""
        got = self.call(call, crash, **args)
        if "error" in got:
            raise DriftlabError(f"resume_powerloss: {self.runtime}: {got['error']}")
        return got


def _restart_env(env: _Env) -> dict:
    """The machine after the restart, for a framework row: each call a NEW child of the env's server.  The store is
    read (``state``: does it load?); a run not done is recovered as the framework documents (the adapter's
    ``recover``, as a restarted worker does on boot); a run then waiting for the approval again, or unknown to
    the store, is sent the approval again, as a caller holding it would."""
    approve = DEFAULT_GRAPH.names[DEFAULT_GRAPH.interrupt_step]
    out: dict = {"loads": True, "calls": []}
    st = env.call("state", run_id=RUN)
    if "error" in st:  # the store does not load after the loss: the finding, with its one line
        out.update(loads=False, error=st["error"])
        return out
    waiting = st["state"] == PARKED and st["node"] == approve
    out["before"] = {"state": st["state"], "node": st["node"], "parked": waiting, "reason": st.get("reason", "")}
    if st["state"] != DONE:  # the restarted machine runs the framework's documented recovery, whatever it reads
        st = env.must("recover", run_id=RUN)
        out["calls"].append(("recover", st["state"], st.get("reason", "")))
        waiting = st["state"] == PARKED and st["node"] == approve
    if waiting or st["state"] == REFUSED:  # waiting again, or no run: the approval re-sent
        st = env.must("resume", run_id=RUN, value=VALUE)
        out["calls"].append(("resend", st["state"], st.get("reason", "")))
    out["final"] = st["state"]
    gated = DEFAULT_GRAPH.task(DEFAULT_GRAPH.names.index("act"))
    out["effects"] = sum(1 for e in env.rt.ledger.effects(RUN) if e.task == gated and e.key == "charge")
    return out


def _journals(folder: Path) -> str:
    """The journal mode of each SQLite file the framework left, read from its header (byte 18: 1 rollback journal,
    2 WAL; persistent in the file, unlike ``synchronous``), after the cell: the lab never opens the store."""
    out = []
    for f in sorted(folder.rglob("*")):
        try:
            head = f.read_bytes()[:20] if f.is_file() else b""
        except OSError:
            continue
        if head.startswith(b"SQLite format 3\0"):
            out.append(f"{f.name}: {'WAL' if head[18] == 2 else 'rollback journal'}")
    return ", ".join(out)


def run_one_env(runtime: str, point_name: str, flush_at_park: bool, fault: str, scratch: Path) -> dict:
    """One power-loss cell of a framework row (module docstring): the env's calls, the loss, the restart."""
    from mechanisms.resume.frameworks import declared

    lp = BY_NAME[point_name]
    d = declared()[runtime]
    target, na = env_point(runtime, point_name)
    base = {"runtime": runtime, "framework": d.framework, "release": d.release,
            "configuration": FRAMEWORK_ROWS.get(runtime, runtime), "point": lp.name, "flush_at_park": flush_at_park,
            "fault": fault}
    if na:
        return {**base, "store_loads": True, "effects": -1, "liveness": "n/a", "acknowledged_kept": True,
                "state_after_restart": "n/a", "witness": f"n/a: {na}"}
    backing, mount, world = scratch / "backing", scratch / f"{lazyfs.PREFIX}mnt", scratch / "world"
    world.mkdir(parents=True, exist_ok=True)
    backend = Backend("sqlite", str(mount), "pl", ledger_location=str(world))
    free_mount_point(mount)
    env = _Env(runtime, backend)
    with lazyfs.Mount(backing, mount, STRICT.get(fault, ""), scratch=scratch) as fs, closing(env.rt):
        env.rt.setup()  # the world's ledger tables (outside), the framework's own set-up (on the mount)
        started = env.must("start", run_id=RUN, input="in")
        if started["state"] != PARKED:
            raise DriftlabError(f"resume_powerloss: {runtime}: the run did not park before the loss ({started})")
        if flush_at_park:
            fs.send(FLUSH)
        got = env.must("resume", target, run_id=RUN, value=VALUE)
        if target is not None and not got.get("killed"):
            raise DriftlabError(f"resume_powerloss: {runtime}: the resume never reached {target[0]} of {target[1]} "
                                f"(it answered {got.get('state')})")
        acknowledged_done = got.get("state") == DONE
        fs.send(SENT[fault])  # the power fails: the killed child's (or the returned call's) unsynced data is gone
        fs.remount()
        # the disk as the loss left it, before the restart writes anything (read from the backing folder, which the
        # fresh mount holds no unsynced data over)
        empty, journals = _emptied(backing), _journals(backing)
        after = _restart_env(env)
    rec = judge(runtime, lp, flush_at_park, fault, "", after, acknowledged_done, base)
    seen = []
    if journals:
        seen.append(f"the SQLite files' journal modes, read from their headers: {journals}")
    if empty:
        seen.append(f"{len(empty)} file(s) of the store were empty: {', '.join(empty[:3])}"
                    + (f" and {len(empty) - 3} more" if len(empty) > 3 else ""))
    if seen:
        rec["witness"] = rec["witness"][:-1] + "; on disk right after the loss, " + "; ".join(seen) + "."
    return rec


def _emptied(folder: Path) -> list[str]:
    """The store's files that are empty on the disk after the loss (a SQLite journal, WAL or shared memory file, and
    a lock file, may be empty by design and are left out): a name the loss kept without its data."""
    skip = ("-wal", "-shm", "-journal", "lock")
    return sorted(str(f.relative_to(folder)) for f in folder.rglob("*")
                  if f.is_file() and f.stat().st_size == 0 and not f.name.endswith(skip))


def _release(framework: str) -> str:
    """The installed release the row ran: LangGraph's (the guard's own version beside it for its row)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        lg = version("langgraph")
        return f"{lg}, driftlab-guard {version('driftlab-guard')}" if "guard" in framework else lg
    except PackageNotFoundError:
        return "?"


def judge(runtime: str, lp, flush_at_park: bool, fault: str, pragmas: str, after: dict, acked_done: bool,
          base: dict | None = None) -> dict:
    """The record of one cell: effects, liveness, acknowledged progress kept, store loads, and the witness
    (``base``: the row's own columns, for a framework row; else the lab's LangGraph row's)."""
    names = DEFAULT_GRAPH.names
    framework = runtime.split("[")[0].split("@")[0]
    base = base or {"runtime": runtime, "framework": framework, "release": _release(framework),
                    "configuration": f"{ROWS.get(runtime, runtime)}; {pragmas}", "point": lp.name,
                    "flush_at_park": flush_at_park, "fault": fault}
    if not after["loads"]:
        return {**base, "store_loads": False, "effects": -1, "liveness": "invalid", "acknowledged_kept": False,
                "state_after_restart": "unreadable",
                "witness": f"{fault} {lp.says} ({'flushed' if flush_at_park else 'not flushed'} at park): after the "
                           f"restart the store does not load ({after['error']})."}
    before = after["before"]
    step = len(names) if before["state"] == DONE else names.index(before["node"]) if before["node"] in names else -1
    acked = lp.acknowledged if lp.acknowledged != "done" or acked_done else "approve"  # else: only the park
    kept = step >= (len(names) if acked == "done" else names.index(acked))
    where = ("done" if before["state"] == DONE else f"waiting for the approval at {before['node']}"
             if before["parked"] else "gone (the store holds no checkpoint of it)" if before["state"] == REFUSED
             else f"failed at {before['node']} ({before.get('reason') or 'no reason'})" if before["state"] == FAILED
             else f"stopped before {before['node']}")
    calls = "; ".join(f"{c[0]} -> {c[1]}" + (f" ({c[2]})" if c[1] in (REFUSED, FAILED) and c[2] else "")
                      for c in after["calls"]) or "nothing to do"
    effects = int(after["effects"])
    witness = (f"{fault} {lp.says} ({'flushed' if flush_at_park else 'not flushed'} at park): after the restart the "
               f"run was {where}; {calls}; effect charge fired {effects} time(s)"
               + ("" if kept else "; the progress the framework had acknowledged was lost") + ".")
    return {**base, "store_loads": True, "effects": effects, "liveness": "valid" if after["final"] == DONE else "invalid",
            "acknowledged_kept": bool(kept), "state_after_restart": where, "witness": witness}


class ResumePowerloss(Experiment):
    name = "resume_powerloss"
    family = "resume"
    description = "power loss within the flush window (a lazy FUSE file system): is an approved effect made once?"
    artifacts = (artifact("resume_powerloss", findings=True),)
    seconds_per_execution = 2.0

    @staticmethod
    def missing() -> str:
        return lazyfs.requirements()

    def check(self, options: Options) -> None:
        if self.skipped(options, self.missing(), "a FUSE file system"):
            return
        from mechanisms.resume.frameworks import declared
        from runners.resume import envs

        # the framework rows' environments, built (or reused) before any cell, each holding the release its row
        # declares (one line and exit 2 otherwise): a cell never pays a build, never runs another release
        for rt in options.mechanisms_for("resume") or FRAMEWORK_ROWS:
            if rt in declared():
                envs.ensure_row(declared()[rt])

    def prepare(self, options: Options) -> None:
        if self.missing():
            return
        for left in lazyfs.leftovers():  # a server killed with its run (its own watch never ran): its mount, and
            cell = Path(left).parent  # the cell's scratch folder holding it, go, named in one line
            ours = cell.name.startswith("powerloss-") and cell.parent.name == "scratch"
            lazyfs.clean_up(left, str(cell) if ours else "")
            print(f"resume: removed a lazy file system a killed run left mounted at {left}"
                  + (f", and its cell's scratch folder {cell}" if ours and not cell.exists() else ""), flush=True)

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        if self.missing():
            return []  # said in check(): skipped in a larger selection, refused when named
        rows = list(options.mechanisms_for("resume")
                    or (*ROWS, *(QUICK_FRAMEWORK_ROWS if profile == "quick" else FRAMEWORK_ROWS)))
        points = QUICK_POINTS if profile == "quick" else tuple(p.name for p in POINTS)
        flushes = (True,) if profile == "quick" else (True, False)
        faults = (POWER_LOSS,) if profile == "quick" else (*FAULTS, CRASH_ONLY)  # the control beside the losses
        return [Cell(self.name, (("runtime", rt), ("point", p), ("flush_at_park", f), ("fault", fault)), 1, seed)
                for rt in rows for p in points for f in flushes for fault in faults]

    def run_cell(self, cell: Cell, options: Options) -> CellOutput:
        p = cell.p
        base = Path(options.run_dir or "/tmp") / "scratch"
        scratch = base / f"powerloss-{uuid.uuid4().hex[:8]}"
        try:
            rec = run_one(p["runtime"], p["point"], bool(p["flush_at_park"]), p["fault"], scratch)
        except lazyfs.LazyFSError as exc:
            raise DriftlabError(str(exc)) from None
        finally:
            for left in lazyfs.leftovers():
                if str(scratch) in left:
                    lazyfs.unmount(left)
            shutil.rmtree(scratch, ignore_errors=True)
        keep = {k: v for k, v in rec.items() if k not in ("runtime", "point", "flush_at_park", "fault")}
        return CellOutput({k: [v] for k, v in {"repetition": 0, "seed": cell.seed, **keep}.items()})

