"""A framework release in its own environment, as a resume runtime of the lab (the lab's side of issue 14).

Serves issue 14 (every framework under the harness of "Resume Means Resume",
arXiv 2608.03836).  The adapter itself runs in the framework's env
(``mechanisms/resume/frameworks/<module>.py``, contract in
``mechanisms/resume/frameworks/protocol.py``); this class is what the lab's
harness holds instead: a :class:`DurableRuntime` whose every call is sent to
the env's fork server, and whose ``ledger`` is the lab's own reader of the
effect ledger the adapter writes (the checkers read effects and trace from
there, as for every runtime).  One class per runtime declared in
``data/envs/*/pyproject.toml`` (``[tool.driftlab.runtimes]``) is made below
and registered by name in ``mechanisms/resume/__init__.py``.

The connection to a server is injected by the runners (:data:`CONNECT`,
set by ``runners/resume/envs.py``): starting processes is a side effect and
lives there.  Calls that must be SIGKILLable go through the runners' executor
straight to the same server; the calls made here (set-up, reading the
checkpoints, the concurrency driver's start) run to completion.
"""
from __future__ import annotations

import re
from typing import Any, Callable, ClassVar

from mechanisms.resume.base import DurableRuntime
from mechanisms.resume.frameworks import Declared, declared
from vocabulary.resume import POINTS, Checkpoint, Status

#: runtime name -> a server with ``.call(request) -> reply`` (set by runners.resume.envs)
CONNECT: Callable[[str], Any] | None = None


class FrameworkCallFailed(RuntimeError):
    """The env's server answered a call with an error: the adapter's fault, never an outcome (issue 24 §1); the
    cell fails with this one line and the run stops (runners.experiment.compute)."""

    def __init__(self, runtime: str, what: str):
        super().__init__(f"{runtime}: {what}")


def status_from(d: dict) -> Status:
    return Status(d["run"], d["state"], d.get("checkpoint"), d.get("node"), None, d.get("values"), d.get("reason", ""))


class FrameworkRuntime(DurableRuntime):
    """The lab's handle on one framework runtime in its env (module docstring)."""

    declared: ClassVar[Declared]
    not_applicable: ClassVar[dict[str, str]] = {}
    #: an exception never is an outcome: the framework's documented ones are turned into refused/failed answers
    #: by the adapter's declared ANSWERS inside the env; anything else stops the run (issue 24 §1)
    errors_are_outcomes = False

    def request(self, call: str, args: dict, label: str = "", crash: tuple[str, str] | None = None,
                timeout: float = 60) -> dict:
        return {"runtime": self.name, "backend": self.backend.to_dict(), "graph": self.graph.to_dict(), "call": call,
                "args": args, "label": label, "crash": list(crash) if crash else None, "timeout": timeout}

    def _call(self, call: str, **args) -> Any:
        if CONNECT is None:
            raise FrameworkCallFailed(self.name, "framework runtimes are served by runners.resume.envs")
        reply = CONNECT(self.name).call(self.request(call, args, self.hooks.op))
        if "error" in reply:
            d = self.declared
            raise FrameworkCallFailed(self.name, f"environment {d.env}, adapter {d.adapter}: {reply['error']} "
                                                 f"(call {call} {self.hooks.op or ''})".replace(" )", ")"))
        if "status" not in reply:
            raise FrameworkCallFailed(self.name, f"environment {self.declared.env}: call {call} was killed or "
                                                 f"answered {sorted(reply)}, not a status")
        return reply.get("status")

    def setup(self) -> None:
        super().setup()  # the ledger's tables, by the lab
        self._call("setup")

    def start(self, run_id: str, input: str) -> Status:
        return status_from(self._call("start", run_id=run_id, input=input))

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> Status:
        return status_from(self._call("resume", run_id=run_id, value=value, checkpoint_id=checkpoint_id))

    def fork(self, run_id: str, checkpoint_id: str, new_run_id: str) -> Status:
        return status_from(self._call("fork", run_id=run_id, checkpoint_id=checkpoint_id, new_run_id=new_run_id))

    def recover(self, run_id: str) -> Status:
        return status_from(self._call("recover", run_id=run_id))

    def state(self, run_id: str) -> Status:
        return status_from(self._call("state", run_id=run_id))

    def checkpoints(self, run_id: str) -> list[Checkpoint]:
        return [Checkpoint(c["checkpoint"], c["run"], int(c["step"]), c.get("next"), c.get("values") or {},
                           c.get("parent"), float(c.get("created") or 0.0), bool(c.get("parked")))
                for c in self._call("checkpoints", run_id=run_id)]


def class_name(name: str) -> str:
    return "Framework_" + re.sub(r"\W", "_", name)


#: runtime name (aliases too) -> its class
CLASSES: dict[str, type] = {}
for _name, _d in declared().items():  # an alias is a class of its own, named as the user named the row
    _cls_name = class_name(_name)
    globals()[_cls_name] = type(_cls_name, (FrameworkRuntime,), {
        "name": _name, "declared": _d, "backends": _d.backends, "not_applicable": dict(_d.not_applicable),
        "points": frozenset(p for p in POINTS if p not in _d.not_applicable), "__module__": __name__})
    CLASSES[_name] = globals()[_cls_name]
