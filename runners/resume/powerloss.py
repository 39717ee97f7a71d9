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
"""
from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path

from faults.resume.powerloss import BY_NAME, FAULTS, FLUSH, POINTS, POWER_LOSS
from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, artifact
from runners.processes import fork_start, kill, wait
from runners.resume import lazyfs
from runners.resume.procs import build
from vocabulary.resume import DEFAULT_GRAPH, DONE, PARKED, REFUSED, Backend

#: the rows: runtime -> what its configuration is (the table's ``configuration`` says it beside the pragmas read)
ROWS = {
    "langgraph[stock-durability]": "LangGraph SqliteSaver as shipped (WAL, the connection's default synchronous)",
    "langgraph": "tuning: WAL + synchronous=NORMAL (the lab's SIGKILL cells' setting)",
    "langgraph+guard[stock-durability]": "driftlab's guarded SqliteSaver as shipped, effect ledger outside",
}
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
    conn = getattr(rt, "_conn", None)
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
        if st.state == REFUSED:  # the guard's refusal names its recovery: invoke(None)
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


def run_one(runtime: str, point_name: str, flush_at_park: bool, fault: str, scratch: Path) -> dict:
    """One power-loss cell (module docstring); the record."""
    lp = BY_NAME[point_name]
    backing, mount, world = scratch / "backing", scratch / f"{lazyfs.PREFIX}mnt", scratch / "world"
    world.mkdir(parents=True, exist_ok=True)
    backend = Backend("sqlite", str(mount), "pl", ledger_location=str(world))
    with lazyfs.Mount(backing, mount) as fs:
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
        fs.send(fault)
        fs.remount()
        pid, r = _child(_restart, (runtime, backend))
        after = _read(r, WAIT_S)
        wait(pid)
        os.close(r)
    if after is None:
        raise DriftlabError(f"resume_powerloss: {runtime}: the restarted process died before it answered")
    return judge(runtime, lp, flush_at_park, fault, started["pragmas"], after, acknowledged_done)


def _release(framework: str) -> str:
    """The installed release the row ran: LangGraph's (the guard's own version beside it for its row)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        lg = version("langgraph")
        return f"{lg}, driftlab-guard {version('driftlab-guard')}" if "guard" in framework else lg
    except PackageNotFoundError:
        return "?"


def judge(runtime: str, lp, flush_at_park: bool, fault: str, pragmas: str, after: dict, acked_done: bool) -> dict:
    """The record of one cell: effects, liveness, acknowledged progress kept, store loads, and the witness."""
    names = DEFAULT_GRAPH.names
    framework = runtime.split("[")[0].split("@")[0]
    base = {"runtime": runtime, "framework": framework, "release": _release(framework),
            "configuration": f"{ROWS.get(runtime, runtime)}; {pragmas}", "point": lp.name,
            "flush_at_park": flush_at_park, "fault": fault}
    if not after["loads"]:
        return {**base, "store_loads": False, "effects": -1, "liveness": "invalid", "acknowledged_kept": False,
                "state_after_restart": "unreadable",
                "witness": f"{fault} {lp.says}: after the restart the store does not load ({after['error']})."}
    before = after["before"]
    step = len(names) if before["state"] == DONE else names.index(before["node"]) if before["node"] in names else -1
    acked = lp.acknowledged if lp.acknowledged != "done" or acked_done else "approve"  # else: only the park
    kept = step >= (len(names) if acked == "done" else names.index(acked))
    where = ("done" if before["state"] == DONE else f"waiting for the approval at {before['node']}"
             if before["parked"] else "gone (the store holds no checkpoint of it)" if before["state"] == REFUSED
             else f"stopped before {before['node']}")
    calls = "; ".join(f"{c[0]} -> {c[1]}" for c in after["calls"]) or "nothing to do"
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
        return lazyfs.requirements() or ("" if os.geteuid() == 0 else "mounting FUSE here needs root")

    def check(self, options: Options) -> None:
        if self.skipped(options, self.missing(), "a FUSE file system"):
            return
        for left in lazyfs.leftovers():
            lazyfs.unmount(left)
            print(f"resume: removed a lazy file system a killed run left mounted at {left}", flush=True)

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        if self.missing():
            return []  # said in check(): skipped in a larger selection, refused when named
        rows = list(options.mechanisms_for("resume") or ROWS)
        points = QUICK_POINTS if profile == "quick" else tuple(p.name for p in POINTS)
        flushes = (True,) if profile == "quick" else (True, False)
        faults = (POWER_LOSS,) if profile == "quick" else FAULTS
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

