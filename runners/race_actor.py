"""One actor of a race history: a process of its own with its own database connection.

Serves the ATR paper's races result (§5): the two workers of a race pair
must commit *concurrently*.  Threads of one Python process would mostly take
turns (the interpreter lock and thread wake-up are slower than a SQLite
commit), so every actor of a history (``worker_a``, ``agent``,
``policy_admin``, ...) is a separate process, started by
:class:`runners.interleaving.Interpreter` as
``python -m runners.race_actor BACKEND LOCATION BINDING``.

It reads one JSON command per line on stdin — ``{"op", "case", "args"}``,
plus ``"at_ns"`` for a step of a :class:`~faults.races.Together` group, which
the actor starts by spinning until that ``perf_counter_ns`` instant (the
barrier: the system-wide monotonic clock, so two actors on two cores start
within microseconds) — performs it on its connection, and writes one JSON
line back: ``{"result", "start_ns", "end_ns"}``.  What the actor read (its
tokens) stays in the actor, as it would in a real worker.
"""
from __future__ import annotations

import json
import sys
import time
from typing import Any

from faults.races import justified
from runners.race_store import RaceStore, attach


class Actor:
    def __init__(self, store: RaceStore, binding: str):
        self.store, self.binding = store, binding
        self.conn = store.connect()
        self.case: int | None = None
        self.seen: dict[str, Any] = {}
        self.in_transaction = False

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
            store.end(conn)
            self.in_transaction = False
            return "committed"
        if op == "commit":
            policy = self.seen.get("policy", {}).get("version")
            ok = store.commit(conn, self.binding, case, self.seen["target"]["version"], policy)
            return "committed" if ok else "rejected"
        raise ValueError(f"unknown operation {op!r}")


def serve(actor: Actor, commands, replies) -> None:
    for line in commands:
        cmd = json.loads(line)
        at = cmd.get("at_ns")
        if at is not None:
            while time.perf_counter_ns() < at:  # spin: a sleep would wake up too late
                pass
        start = time.perf_counter_ns()
        try:
            result = actor.do(cmd["op"], cmd["case"], cmd.get("args") or {})
        except Exception as exc:  # noqa: BLE001 - the database's answer is the result, errors included
            text = str(exc).strip()
            result = f"error: {type(exc).__name__}: {text.splitlines()[0] if text else ''}"
        replies.write(json.dumps({"result": result, "start_ns": start, "end_ns": time.perf_counter_ns()}) + "\n")
        replies.flush()


def main(argv: list[str] | None = None) -> int:
    backend, location, binding = (argv or sys.argv[1:])[:3]
    actor = Actor(attach(backend, location), binding)
    try:
        serve(actor, sys.stdin, sys.stdout)
    finally:
        actor.conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
