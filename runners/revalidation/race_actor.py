"""One actor of a race interleaving: a process of its own with its own database connection; and its domain.

Serves the ATR paper's races result (§5): the two workers of a race pair
must commit *concurrently*.  Threads of one Python process would mostly take
turns (the interpreter lock and thread wake-up are slower than a SQLite
commit), so every actor of an interleaving (``worker_a``, ``agent``,
``policy_admin``, ...) is a separate process, started by :class:`RaceDomain`
for the generic :class:`runners.interleaving.Interpreter` as
``python -m runners.revalidation.race_actor BACKEND LOCATION BINDING``.

It reads one JSON request per line on stdin — ``{"op", "case", "args"}``,
plus ``"at_ns"`` for a step of a :class:`~runners.interleaving.Together`
group (:func:`runners.processes.serve_json_lines` spins until that instant)
— performs it on its connection and answers one JSON line.  What the actor
read (its tokens) stays in the actor, as it would in a real worker; a commit
answers ``committed`` or ``rejected`` with its tokens and who refused it as
``info``.

The operations (the refund domain's, written in ``faults/revalidation/races.py``):
``begin`` (a deferred transaction: reads inside it take the tokens, the
writer lock waits for the first write), ``read_target``, ``read_policy``,
``validate`` (:func:`faults.revalidation.races.justified` over what the actor read),
``set_policy``, ``commit_txn`` and ``commit`` (the effect under the binding,
in the open transaction if there is one, else in its own).
"""
from __future__ import annotations

import os
import signal
import sys
from typing import Any

from faults.revalidation.races import justified
from runners.interleaving import Step
from runners.processes import ActorProcess, Answer, child_env, die_with_parent, serve_json_lines
from runners.revalidation.race_store import TIMEOUT_S, RaceStore, attach
from vocabulary import FAIL, OK

#: operations whose answer is a refusal when it is not the expected success
COMMIT_OPS = ("commit",)


class Actor:
    def __init__(self, store: RaceStore, binding: str):
        self.store, self.binding = store, binding
        self.conn = store.connect()
        self.case: int | None = None
        self.seen: dict[str, Any] = {}
        self.in_transaction = False

    def handle(self, request: dict) -> Any:
        return self.do(request["op"], request["case"], request.get("args") or {})

    def do(self, op: str, case: int, args: dict) -> Any:
        if case != self.case:  # a new execution: forget the previous one's reads
            self.case, self.seen = case, {}
        store, conn = self.store, self.conn
        if op == "read_target":
            self.seen["target"] = store.read_target(conn, case)
            return self.seen["target"]
        if op == "read_policy":
            self.seen["policy"] = store.read_policy(conn, case)
            return self.seen["policy"]
        if op == "validate":
            return justified(self.seen["target"], self.seen["policy"])
        if op == "begin":
            store.begin(conn)
            self.in_transaction = True
            return "ok"
        if op == "set_policy":
            rows = store.set_policy(conn, case, args)
            return ("updated" if self.in_transaction else "committed") if rows == 1 else f"rowcount {rows}"
        if op == "commit_txn":
            self.in_transaction = False
            store.end(conn)
            return "committed"
        if op == "commit":
            target = self.seen["target"]["version"]
            policy = self.seen.get("policy", {}).get("version")
            in_txn, self.in_transaction = self.in_transaction, False
            r = store.commit(conn, self.binding, case, target, policy, in_transaction=in_txn)
            info = {"intent": f"refund:{case}", "target_token": target, "binding": self.binding,
                    "in_transaction": in_txn}
            if self.binding == "policy_token":
                info["policy_token"] = policy
            if r.refused_by:
                info["refused_by"] = r.refused_by
            if r.retried:
                info["retried_after"] = r.retried
            return Answer("committed" if r.committed else "rejected", info)
        raise ValueError(f"unknown operation {op!r}")


class RaceDomain:
    """The refund races for :class:`runners.interleaving.Interpreter`: actors, fresh rows, the audit read."""

    def __init__(self, store: RaceStore, binding: str):
        self.store, self.binding = store, binding
        self._own = store.connect()  # the domain's: fresh rows before, the audit read after

    def start_actor(self, name: str) -> ActorProcess:
        env = child_env(**({"DRIFTLAB_POSTGRES_DSN": self.store.dsn} if hasattr(self.store, "dsn") else {}))
        return ActorProcess(name, "runners.revalidation.race_actor", (self.store.backend, self.store.location, self.binding), env)

    def request(self, step: Step, case: int) -> dict:
        return {"op": step.op, "case": case, "args": dict(step.args)}

    def prepare(self, script, case: int) -> dict:
        self.store.new_case(self._own, case, **script.setup)
        return {"case": case, "backend": self.store.backend, **script.setup, "refunds": 0, "version": 0,
                "policy_version": 0}

    def audit(self, script, case: int) -> dict:
        target = self.store.read_target(self._own, case)
        policy = self.store.read_policy(self._own, case)
        return {**target, "refund_limit": policy["refund_limit"], "refunds_enabled": policy["refunds_enabled"],
                "policy_version": policy["version"]}

    def status(self, op: str, result: Any) -> str:
        if op in COMMIT_OPS:
            return OK if result == "committed" else FAIL
        return OK

    def close(self) -> None:
        self._own.close()


def main(argv: list[str] | None = None) -> int:
    backend, location, binding = (argv or sys.argv[1:])[:3]
    if argv is None:  # run as its own process: it dies with the cell that started it (no orphan holds the store)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        die_with_parent(os.getppid())
    actor = Actor(attach(backend, location), binding)
    try:
        serve_json_lines(actor.handle, sys.stdin, sys.stdout)
    finally:
        actor.conn.close()
    return 0


REPLY_TIMEOUT_S = TIMEOUT_S + 20  # an actor silent this long is killed; its operation is indeterminate

if __name__ == "__main__":
    sys.exit(main())
