"""A framework in its own environment as a resumer of the nemesis: the victim's pause, relayed from its env server.

Serves issue 25 §4 (``resume_nemesis``: "DBOS with its PostgreSQL system
database").  The nemesis stops its victim at a named point while the fault
lands (``faults/resume/nemesis.py``).  A runtime of the lab's own process
reaches its points in the resumer itself (``runners/resume/nemesis.py``,
``_PauseAt``).  A framework's call runs elsewhere: in a child of a hosted
server (``runners/resume/envs.py``, ``host``), which the worker's warm env
server forks for the resumer and which enters the resumer's host, so that it
and its children reach the store over the host's link like any resumer.
That server can SIGKILL a call at a point, not hold it there, and its
request carries no pipe back.

So, for a framework runtime, the resumer's request names a folder in its
options (``pause_at``, ``pause_dir``; the adapter's ``PauseAtPoint``,
``mechanisms/resume/frameworks/dbos.py``) and a thread of the resumer relays:
once the call has written ``at`` there, the thread tells the parent on the
resumer's pipe (with the pid of the call's own process, which holds the
framework's connections: the process the nemesis SIGSTOPs or SIGKILLs), and at
the parent's go it writes ``go``.  What it trades away: a poll of 10 ms at
each end (the fault lands that much later than at a pipe), and only adapters
that read those options can be paused (DBOS's, today); a framework whose
adapter does not is refused in one line before any cell runs.
"""
from __future__ import annotations

import json
import re
import shutil
import threading
import time
from pathlib import Path

POLL_S = 0.01
#: adapters that read ``pause_at`` / ``pause_dir`` (their call stops at the point until the lab's ``go``)
PAUSABLE = ("dbos:DBOSAdapter",)


#: what the env server says when the lab's own node code raised inside a call (protocol.Adapter.judge): the lab's
#: failure, never the framework's outcome
LAB_CODE = "the lab's code raised inside"
#: adapter -> the start of a ``failed`` reason that reports the run's terminal status read from the framework's
#: store: a definite answer, even when the status's error names a lost connection (DBOS: adapter ``state``)
TERMINAL = {"dbos:DBOSAdapter": re.compile(r"workflow (ERROR|CANCELLED|MAX_RECOVERY_ATTEMPTS_EXCEEDED)\b")}


def definite(runtime: str, reason: str) -> bool:
    """True when a framework's ``failed`` answer is the run's own terminal status (:data:`TERMINAL`), not a call that
    lost its connection."""
    from mechanisms.resume.frameworks import declared

    d = declared().get(runtime)
    pattern = TERMINAL.get(d.adapter) if d else None
    return bool(pattern and pattern.match(reason or ""))


def is_framework(runtime: str) -> bool:
    """True for a runtime served by a framework's environment (``data/envs/*/pyproject.toml``)."""
    from mechanisms.resume.frameworks import declared

    return runtime in declared()


def unpausable(runtime: str) -> str:
    """'' if the nemesis can pause ``runtime``'s calls at a named point, else the one-line reason."""
    from mechanisms.resume.frameworks import declared

    d = declared().get(runtime)
    if d is None or d.adapter in PAUSABLE:
        return ""
    return (f"{runtime}: its adapter {d.adapter} cannot be paused at a named point inside its environment's server "
            f"(the nemesis pauses {', '.join(PAUSABLE)})")


class Relay:
    """The resumer's side of one paused framework call (module docstring): wraps ``rt.request``; ``close`` ends it.

    ``hold(said)`` is the resumer's own pause (it writes ``said`` on the pipe to the parent and waits for its go)."""

    def __init__(self, rt, pause: tuple[str, str], folder: Path, hold, limit_s: float):
        self.folder, self.hold, self.limit_s = folder, hold, limit_s
        folder.mkdir(parents=True, exist_ok=True)
        self.stop = threading.Event()
        base = rt.request

        def request(call: str, args: dict, label: str = "", crash=None, timeout: float = 60) -> dict:
            req = base(call, args, label, crash, timeout)
            req["options"] = {**req.get("options", {}), "pause_at": list(pause), "pause_dir": str(folder),
                              "pause_s": limit_s}
            return req

        rt.request = request  # this instance only: every call it sends asks its child to stop at ``pause``
        self.thread = threading.Thread(target=self._relay, daemon=True)
        self.thread.start()

    def _relay(self) -> None:
        deadline = time.monotonic() + self.limit_s
        at = self.folder / "at"
        while not at.exists():
            if self.stop.is_set() or time.monotonic() > deadline:
                return
            time.sleep(POLL_S)
        said = json.loads(at.read_text())
        self.hold({"at": said["at"], "t": said["t"], "pid": said["pid"]})
        (self.folder / "go").touch()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(1.0)
        shutil.rmtree(self.folder, ignore_errors=True)
