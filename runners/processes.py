"""Process helpers every family shares: fork a step, serve steps, run actor processes, start them together.

Models nothing of any domain: no experiment's words appear here.  A family
uses these to put each participant of an execution in a process of its own
(the paper's "real processes"), to start several of them at one instant, and
to end one abruptly (SIGKILL) at a point it names.

**Forking a step.**  :func:`fork_call` runs a module-level function in a
forked child and waits for it; :class:`StepServer` is a small interpreter
(``python -m runners.processes``) that forks steps on request, so that a
caller whose process maps large libraries (pandas, pyarrow) or holds database
connections never forks itself.  A step is named by its dotted path
``package.module:function`` and called with JSON arguments; the server
imports the module on first use.  ``StepServer.start`` forks a step without
waiting, so that the caller can :meth:`StepServer.kill` it (SIGKILL) when it
signals a named point, or :meth:`StepServer.wait` for it.

**Actor processes.**  :class:`ActorProcess` starts ``python -m MODULE ARGS``
that reads one JSON object per line on stdin and answers one JSON object per
line on stdout (:func:`serve_json_lines` is the loop such a module runs).
:meth:`ActorProcess.request` never hangs: an actor that does not answer in
time is killed and the answer is ``None`` (its outcome is *unknown*, which
the caller must record as indeterminate, never guess).

**Starting together.**  Two ways to start k processes at one moment:

- a start *instant*: :func:`start_instant` gives a ``time.perf_counter_ns``
  value a little ahead; each process :func:`spin_until` it (the clock is the
  system-wide monotonic clock, so processes on different cores start within
  microseconds).  Send it as the ``"at_ns"`` key of a request to an actor
  that runs :func:`serve_json_lines`;
- a :class:`Barrier` (``multiprocessing.Barrier`` of k parties) handed to
  forked children, for k concurrent workers that meet at a named point.

**Ending children.**  :func:`kill` sends SIGKILL and reaps; :func:`reap`
collects every exited child of this process without blocking.
"""
from __future__ import annotations

import ctypes
import importlib
import json
import multiprocessing
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from typing import Any, Callable, Iterable, Mapping, NamedTuple, TextIO

__all__ = [
    "ActorProcess", "Answer", "Barrier", "StepServer", "StepFailed", "dotted", "fork_call", "kill", "reap", "resolve_step",
    "serve_json_lines", "serve_steps", "spin_until", "start_instant", "child_env", "PYTHON", "die_with_parent", "read_line",
]

#: Default lead of :func:`start_instant`: long enough for k requests to reach their actors.
LEAD_NS = 1_000_000


# ------------------------------------------------------------------ children that die with their parent
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """In a forked child: have the kernel SIGKILL us when our parent dies (Linux); exit if it already has."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent's own cleanup is all there is
        pass
    if os.getppid() != parent:
        os._exit(0)


def read_line(fd: int, timeout: float) -> bytes:
    """One line from ``fd`` within ``timeout`` seconds; ends with ``T`` if it timed out, shorter if the writer closed."""
    buf = b""
    deadline = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = max(0.0, deadline - time.monotonic())  # past the deadline: what is already there, no waiting
        if not select.select([fd], [], [], left)[0]:
            return buf + b"T"  # timed out
        chunk = os.read(fd, 65536)
        if not chunk:
            return buf
        buf += chunk
    return buf


# ------------------------------------------------------------------ naming steps
def dotted(fn: Callable) -> str:
    """The ``package.module:function`` path of a module-level function (the server's name for it)."""
    if "<locals>" in fn.__qualname__ or "." in fn.__qualname__:
        raise ValueError(f"{fn.__qualname__}: a step must be a module-level function")
    module = fn.__module__
    if module == "__main__":  # run as a script: name it by the module it really is
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        if spec is None:
            raise ValueError(f"{fn.__qualname__}: defined in a script run by path; run it with python -m")
        module = spec.name
    return f"{module}:{fn.__qualname__}"


def resolve_step(path: str) -> Callable:
    """The function a ``package.module:function`` path names."""
    module, _, name = path.partition(":")
    if not module or not name:
        raise ValueError(f"bad step path {path!r} (expected package.module:function)")
    return getattr(importlib.import_module(module), name)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the folder holding driftlab's packages


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a child interpreter: ours, with our ``sys.path`` as PYTHONPATH (and ``extra``).

    The working folder is left out (unless it is driftlab's own folder): a
    stray module there must never shadow a package in a child.  Children are
    started with ``python -P`` for the same reason.
    """
    cwd = os.path.realpath(os.getcwd())
    paths = [ROOT] + [p for p in sys.path if p and (os.path.realpath(p) != cwd or p == ROOT)]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)), **extra)


#: how children are started: ``-P`` keeps the working folder off their ``sys.path``
PYTHON = (sys.executable, "-P")


# ------------------------------------------------------------------ forking
def _flush() -> None:
    sys.stdout.flush()
    sys.stderr.flush()


def _child(fn: Callable, args: Iterable) -> None:
    """In a forked child: call, then ``os._exit`` (0 on success, ``sys.exit``'s code, else 1 with the traceback)."""
    code = 1
    try:
        fn(*args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported on stderr; the exit code carries it
        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(code)


def fork_start(fn: Callable, args: Iterable = ()) -> int:
    """Fork; the child runs ``fn(*args)`` and exits.  Returns the child's pid (reap it with :func:`wait`).

    The child dies with this process (:func:`die_with_parent`): a step never outlives whoever forked it."""
    _flush()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        die_with_parent(parent)
        _child(fn, args)
    return pid


def wait(pid: int) -> int:
    """Wait for a child; its exit code (negative: killed by that signal)."""
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def fork_call(fn: Callable, args: Iterable = ()) -> tuple[int, int]:
    """Run ``fn(*args)`` in a forked process and wait for it: (its pid, its exit code)."""
    pid = fork_start(fn, args)
    return pid, wait(pid)


def kill(pid_or_proc: "int | subprocess.Popen") -> int:
    """SIGKILL a child (a pid of ours or a Popen) and reap it; its exit code (``-9`` if the signal landed)."""
    if isinstance(pid_or_proc, subprocess.Popen):
        try:
            pid_or_proc.kill()
        except ProcessLookupError:
            pass
        return pid_or_proc.wait()
    try:
        os.kill(pid_or_proc, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return wait(pid_or_proc)


def reap() -> list[tuple[int, int]]:
    """Collect every child of this process that has exited, without blocking: [(pid, exit code)]."""
    done = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        if pid == 0:
            return done
        done.append((pid, os.waitstatus_to_exitcode(status)))


# ------------------------------------------------------------------ the step server
def serve_steps(requests: TextIO, replies: TextIO) -> None:
    """The step server's loop: one JSON request per line, one JSON reply per line.

    Requests: ``{"run": PATH, "args": [...]}`` forks the step and waits
    (reply ``{"pid", "code"}``); ``{"start": PATH, "args": [...]}`` forks it
    and replies ``{"pid"}`` at once; ``{"wait": PID}`` and ``{"kill": PID}``
    reap a started step (reply ``{"pid", "code"}``).  A request that cannot
    be served is answered ``{"error": "..."}``.
    """
    for line in requests:
        try:
            req = json.loads(line)
            if "run" in req:
                pid, code = fork_call(resolve_step(req["run"]), req.get("args", ()))
                reply: dict[str, Any] = {"pid": pid, "code": code}
            elif "start" in req:
                reply = {"pid": fork_start(resolve_step(req["start"]), req.get("args", ()))}
            elif "wait" in req:
                reply = {"pid": req["wait"], "code": wait(int(req["wait"]))}
            elif "kill" in req:
                reply = {"pid": req["kill"], "code": kill(int(req["kill"]))}
            else:
                reply = {"error": f"unknown request {sorted(req)}"}
        except Exception as exc:  # noqa: BLE001 - the caller gets one line, the server goes on
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


class StepFailed(RuntimeError):
    """A step exited with a non-zero code (or the server could not run it)."""


class StepServer:
    """A small process that forks each step on request (``python -m runners.processes``).

    It never opens a database or imports a family's modules until a step
    needs them, so no connection crosses a fork and forking is cheap.  Steps
    print to stderr; the server ignores Ctrl-C and ends when its stdin closes
    (or its parent dies).  Use as a context manager or call :meth:`close`.
    """

    def __init__(self, env: Mapping[str, str] | None = None):
        self.proc = subprocess.Popen([*PYTHON, "-m", "runners.processes"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=dict(env or child_env()))

    def _ask(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise StepFailed(f"the step server exited with code {self.proc.wait()}")
        reply = json.loads(line)
        if "error" in reply:
            raise StepFailed(f"step server: {reply['error']}")
        return reply

    def call(self, step: Callable | str, *args: Any) -> tuple[int, int]:
        """Run one step in its own process and wait for it: (its pid, its exit code)."""
        reply = self._ask({"run": step if isinstance(step, str) else dotted(step), "args": list(args)})
        return reply["pid"], reply["code"]

    def run(self, step: Callable | str, *args: Any) -> int:
        """Run one step in its own process and wait for it; its pid (:class:`StepFailed` if it failed)."""
        pid, code = self.call(step, *args)
        if code != 0:
            name = step if isinstance(step, str) else step.__name__
            raise StepFailed(f"step {name} (pid {pid}) exited with code {code}")
        return pid

    def start(self, step: Callable | str, *args: Any) -> int:
        """Fork one step without waiting; its pid (then :meth:`wait` or :meth:`kill` it)."""
        return self._ask({"start": step if isinstance(step, str) else dotted(step), "args": list(args)})["pid"]

    def wait(self, pid: int) -> int:
        """Wait for a started step; its exit code."""
        return self._ask({"wait": pid})["code"]

    def kill(self, pid: int) -> int:
        """SIGKILL a started step and reap it; its exit code (``-9``)."""
        return self._ask({"kill": pid})["code"]

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            kill(self.proc)
        self.proc.stdout.close()

    def __enter__(self) -> "StepServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _step_server_main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(os.getppid())  # Ctrl-C or SIGKILL of the cell's process ends the server (and its steps) at once
    replies = os.fdopen(os.dup(1), "w")  # replies on the original stdout; whatever steps print goes to stderr
    os.dup2(2, 1)
    try:
        serve_steps(sys.stdin, replies)
    except BrokenPipeError:  # the cell's process died (Ctrl-C) between a request and its reply: nothing to tell
        os._exit(0)


# ------------------------------------------------------------------ starting together
def start_instant(lead_ns: int = LEAD_NS) -> int:
    """A ``perf_counter_ns`` instant ``lead_ns`` ahead: send it to k processes, each :func:`spin_until` it."""
    return time.perf_counter_ns() + lead_ns


def spin_until(at_ns: int) -> None:
    """Busy-wait until the system-wide monotonic clock reaches ``at_ns`` (a sleep would wake up too late)."""
    while time.perf_counter_ns() < at_ns:
        pass


def Barrier(parties: int, timeout: float | None = None):  # noqa: N802 - reads as the class it returns
    """A barrier of ``parties`` processes (``multiprocessing.Barrier``, fork context), for forked children.

    Create it before forking; each child calls ``.wait()`` at its named point.
    A child that dies before the barrier breaks it for the others after
    ``timeout`` (``threading.BrokenBarrierError``), so nobody waits forever.
    """
    return multiprocessing.get_context("fork").Barrier(parties, timeout=timeout)


# ------------------------------------------------------------------ actor processes (JSON lines)
class Answer(NamedTuple):
    """A handler's result with side information (``info``: a JSON object sent beside the result)."""

    result: Any
    info: dict


def serve_json_lines(handle: Callable[[dict], Any], requests: TextIO, replies: TextIO) -> None:
    """An actor's loop: for each JSON request line, ``handle(request)`` -> one JSON reply line.

    A request may carry ``"at_ns"``: the actor :func:`spin_until` that
    instant first.  The reply is ``{"result", "start_ns", "end_ns"}`` (the
    handler's timing on the ``perf_counter_ns`` clock), plus ``"info"`` when
    the handler returns an :class:`Answer`; an exception becomes
    the result ``"error: <Type>: <first line>"``, so the caller sees what the
    other side answered.  Before the first request it writes ``{"up": PID}``:
    the actor is started (imports done, ``handle`` ready), which
    :meth:`ActorProcess.wait_up` reads, so that no step's reply time includes
    the actor's own start.
    """
    replies.write(json.dumps({"up": os.getpid()}) + "\n")
    replies.flush()
    for line in requests:
        req = json.loads(line)
        if req.get("at_ns") is not None:
            spin_until(req["at_ns"])
        start = time.perf_counter_ns()
        info = None
        try:
            result = handle(req)
            if isinstance(result, Answer):
                result, info = result
        except Exception as exc:  # noqa: BLE001 - the answer is the result, errors included
            text = str(exc).strip()
            result = f"error: {type(exc).__name__}: {text.splitlines()[0] if text else ''}"
        reply = {"result": result, "start_ns": start, "end_ns": time.perf_counter_ns()}
        if info:
            reply["info"] = info
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


class ActorProcess:
    """``python -m MODULE *ARGS``, speaking JSON lines (:func:`serve_json_lines`) over its stdin/stdout."""

    def __init__(self, name: str, module: str, args: Iterable[str] = (), env: Mapping[str, str] | None = None):
        self.name = name
        self.proc = subprocess.Popen([*PYTHON, "-m", module, *map(str, args)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=dict(env or child_env()), text=True, bufsize=1)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, request: Mapping[str, Any], at_ns: int | None = None) -> None:
        """Send one request (to start at ``at_ns`` if given); collect the answer with :meth:`reply`."""
        try:
            self.proc.stdin.write(json.dumps({**request, **({"at_ns": at_ns} if at_ns else {})}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:  # the process is gone: reply() says so (``exited``)
            pass

    def wait_up(self, timeout: float) -> bool:
        """True once the actor has said it is up (:func:`serve_json_lines`); False (:attr:`lost` says why) if not.

        As :meth:`reply`: an actor silent for ``timeout`` is killed; one that
        exits, or first says something else, is lost too.
        """
        said = self.reply(timeout)
        if said is None:
            if not self.exited:
                self.lost = f"{self.name} did not start within {timeout} s"
            return False
        if "up" not in said:
            self.lost = f"{self.name} answered before it was up: {json.dumps(said)[:200]}"
            kill(self.proc)
            return False
        return True

    def ready(self, timeout: float) -> bool:
        """True when an answer (or end of file) is waiting to be read."""
        return bool(select.select([self.proc.stdout], [], [], timeout)[0])

    def reply(self, timeout: float) -> dict | None:
        """The answer ``{"result", "start_ns", "end_ns"[, "info"]}``, or None if the actor died or gave none in time.

        An actor that gives no answer in time is killed: a later answer would
        be misread as the answer to a later request.  Either way the
        outcome of the request is unknown (see :attr:`lost`).
        """
        if not self.ready(timeout):
            self.lost = f"{self.name} gave no answer within {timeout} s"
            kill(self.proc)
            return None
        line = self.proc.stdout.readline()
        if not line:
            self.lost = f"{self.name} exited with code {self.proc.wait()}"
            self.exited = True
            return None
        return json.loads(line)

    lost: str = ""  # why the last reply() returned None
    exited: bool = False  # the last reply() found the process gone by itself (not killed for its silence)

    def request(self, request: Mapping[str, Any], timeout: float, at_ns: int | None = None) -> dict | None:
        """:meth:`send` then :meth:`reply`."""
        self.send(request, at_ns)
        return self.reply(timeout)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> int:
        """SIGKILL the actor and reap it."""
        return kill(self.proc)

    def close(self, timeout: float = 10) -> None:
        """Close its stdin (the end of requests: it exits); SIGKILL it if it does not within ``timeout``."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass  # it is already gone
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill(self.proc)
        self.proc.stdout.close()


if __name__ == "__main__":  # python -m runners.processes: the step server of StepServer
    _step_server_main()
