"""DBOS Transact at a pinned release (``dbos@3.4``), inside its own environment, SQLite or PostgreSQL system database.

Serves issue 14 (every framework under the harness of "Resume Means Resume",
arXiv 2608.03836); the paper's artifact profiled DBOS 2.27.0 as an engine
baseline.  What DBOS does is left to DBOS, through its documented API:

- the graph is one ``@DBOS.workflow``: each node but the interrupt is a
  ``@DBOS.step`` whose body is the protocol's ``run_node`` (effects in the
  lab's ledger, a separate store); the interrupt is ``DBOS.recv(topic)``
  (parked until a message arrives) followed by a step that runs the
  interrupt node with the received value;
- the system database: SQLite ``<location>/<ns>dbos.sqlite`` or PostgreSQL
  schema ``<ns>`` (``dbos_system_schema``); notification polling, and the
  polling of DBOS's internal queue (which runs recovered and forked
  workflows), every ``options.polling_ms`` (50 ms) instead of DBOS's default
  second;
- on PostgreSQL, pools sized as a user sizes them to run k processes on one
  server: ``sys_db_pool_size`` :data:`PG_POOL` = 2 (DBOS's default 20) and the
  client's ``system_database_pool_size`` 1 (default 5; the adapter uses it
  from one thread).  A racer then holds 5 connections (pool 2, DBOS's LISTEN
  connection, the client, the lab's ledger; measured in pg_stat_activity), so
  k = 16 racers hold 82 of a stock server's 100; with pool 3 they held 98 and
  with the defaults 6-8 each, and the server refused connections.  2 is DBOS's
  floor: its own ``DBOS.migrate`` uses 2, and with 1 the first launch's
  migration (a lock connection beside the migrating one) times out.  On
  SQLite, DBOS's defaults;
- every process is one DBOS executor with an ``executor_id`` of its own
  (``driftlab-<pid>``), as DBOS asks of concurrent processes;  a workflow
  whose executor's process is gone is recovered with DBOS's own recovery of
  a dead executor (``DBOS._recover_pending_workflows([executor])``, what its
  Conductor or admin server calls): the workflow is re-enqueued, guarded on
  the dead executor's id, and one live executor dequeues it.  A process is
  dead when its pid is (one host): the lab's stand-in for Conductor's
  heartbeats;
- ``start`` = ``DBOS.start_workflow`` under ``SetWorkflowID(run)``, returning
  once the workflow waits in ``recv`` (its durable sleep is recorded and no
  message consumed) or ends; the process then ends, as a worker does;
- ``resume`` = ``DBOSClient.send(run, value, topic)`` (the documented way
  from another process), then this process launches DBOS, recovers the run
  if its executor is dead, and returns when the workflow is no longer
  PENDING (or the timeout).  A run that is not waiting is sent the message
  all the same (DBOS accepts it): reported as what DBOS answers;
- ``recover`` = the same recovery in a new process; ``fork`` =
  ``DBOS.fork_workflow(run, start_step)`` under ``SetWorkflowID(new_run)``
  (steps before ``start_step`` copied, the rest re-run), executed by this
  process's queue worker until it parks;
- ``checkpoints`` = the recorded outputs of the node steps
  (``DBOS.list_workflow_steps``), id ``<run>:<function id>``.

Named points: ``before_node``/``after_effect`` (``run_node``),
``after_node_before_checkpoint`` (the step's body returned; DBOS has not
recorded its output), ``parked`` (the workflow waits in ``recv``; the call has
not returned) and ``after_resume_consumed`` (the interrupt step's output,
holding the value, is recorded; the next step has not started).
``during_checkpoint_write`` is not reachable (pyproject's ``not_applicable``).
A request whose options carry ``pause_at`` = (point, node) and ``pause_dir``
stops its call there until the lab says go (:class:`PauseAtPoint`: the
nemesis's pause, ``runners/resume/nemesis_envs.py``); the fork server itself
only kills at a point.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSClient, DBOSConfig, SetWorkflowID
from dbos import error as dbos_error
from dbos._utils import INTERNAL_QUEUE_NAME

from .protocol import (Answer, AFTER_NODE_BEFORE_CHECKPOINT, AFTER_RESUME_CONSUMED, DONE, FAILED, PARKED,
                       REFUSED, Adapter, Ledger, current)

TOPIC = "decision"
RECV_TIMEOUT_S = 7 * 24 * 3600  # a human decision may take days: DBOS's recv would otherwise return None at 60 s
WAIT_S = 30
TERMINAL_OK, TERMINAL_FAIL = ("SUCCESS",), ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")



PG_POOL, PG_CLIENT_POOL = 2, 1  # system-database connections per process on PostgreSQL (module docstring)


def _run_id() -> str:
    return DBOS.workflow_id


@DBOS.step(name="driftlab.node")
def node_step(step: int, state: dict, resume: Any = None) -> dict:
    run_id = _run_id()
    new = current().run_node(run_id, step, state, resume=resume)
    current().point(AFTER_NODE_BEFORE_CHECKPOINT, run_id, step)
    return new


@DBOS.workflow(name="driftlab.graph")
def graph_workflow(initial: dict) -> dict:
    rt, state = current(), initial
    for step, node in enumerate(rt.graph.nodes):
        if node["interrupt"]:
            value = DBOS.recv(TOPIC, timeout_seconds=RECV_TIMEOUT_S)
            state = node_step(step, state, value)
            rt.point(AFTER_RESUME_CONSUMED, _run_id(), step)
        else:
            state = node_step(step, state)
    return state


PAUSE_S = 180.0  # the longest a paused call waits for the lab's go (then it goes on by itself)
LEDGER_ATTEMPTS, LEDGER_BACKOFF_S = 20, 0.5  # reconnecting the effect ledger after the pause (_reopen_ledger)


class PauseAtPoint:
    """The nemesis's pause (``runners/resume/nemesis.py``): at ``at`` = (point, node), say so and wait for the lab.

    The env's fork server can kill a call at a named point, not hold it there while a fault lands, and a request
    carries no pipe to the lab; so the lab names a folder (``pause_dir``, in the request's options) and the call,
    at its point, writes ``at`` there (the point, the node, the time and this process's pid: the process that
    holds DBOS's connections, which the lab SIGSTOPs or SIGKILLs) and polls for ``go``, at most ``limit_s``.
    Once only; every other point goes to the call's own hook (its crash point, if any).  At the go, ``after`` runs
    (the adapter opens its effect ledger's connection again: the ledger is the lab's record of the world, not the
    subject, so a store crash or partition aimed at DBOS never lands in the lab's instrument; DBOS's own
    connections are left as the fault left them)."""

    def __init__(self, inner, at: tuple[str, str], folder: Path, limit_s: float, after=None):
        self.inner, self.at, self.folder, self.limit_s, self.after = inner, at, folder, limit_s, after

    @property
    def op(self) -> str:
        return self.inner.op

    def point(self, name: str, run_id: str, step: int, node: str) -> None:
        if self.at is not None and (name, node) == self.at:
            self.at = None
            tmp = self.folder / "at.tmp"
            tmp.write_text(json.dumps({"at": name, "node": node, "t": time.time(), "pid": os.getpid()}))
            os.replace(tmp, self.folder / "at")
            deadline = time.monotonic() + self.limit_s
            while not (self.folder / "go").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            if self.after is not None:
                self.after()
        self.inner.point(name, run_id, step, node)


def _alive(executor: str) -> bool:
    """Whether the process of executor ``driftlab-<pid>`` (this host) still runs: a zombie (killed, not yet reaped
    by its parent) runs no code and holds no connection, so its executor is dead."""
    pid = executor.rpartition("-")[2]
    if not pid.isdigit():
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _sqlalchemy_url(dsn: str) -> str:
    """A libpq keyword DSN (``host=... dbname=...``) or URL as the URL DBOS takes.  A ``host`` that is a folder (a
    Unix socket's, as the nemesis's private cluster gives its driver) goes in the query, as libpq takes it there;
    ``connect_timeout`` is kept (a connection across a partitioned link then fails in that time, as libpq's)."""
    if "://" in dsn:
        return dsn
    kv = dict(part.split("=", 1) for part in dsn.split())
    auth = kv.get("user", "postgres") + (f":{kv['password']}" if "password" in kv else "")
    host, port, db = kv.get("host", "localhost"), kv.get("port", "5432"), kv.get("dbname", "postgres")
    query = [f"connect_timeout={kv['connect_timeout']}"] if "connect_timeout" in kv else []
    if host.startswith("/"):
        return f"postgresql://{auth}@/{db}?" + "&".join([f"host={host}", f"port={port}", *query])
    return f"postgresql://{auth}@{host}:{port}/{db}" + ("?" + "&".join(query) if query else "")


class DBOSAdapter(Adapter):
    """DBOS behind the durable-runtime interface (module docstring)."""

    name = "dbos"
    #: DBOS's answers (issue 24 §1): ``send`` to an unknown workflow id, a workflow in a terminal failed status
    #: (``ERROR`` after a step raised, ``CANCELLED``, ``MAX_RECOVERY_ATTEMPTS_EXCEEDED``)
    ANSWERS = (Answer(REFUSED, r"(DBOS Error \d+: )?Non-existent .*workflow ID: ",
                      "DBOS: DBOSNonExistentWorkflowError"),
               Answer(FAILED, r"workflow (ERROR|CANCELLED|MAX_RECOVERY_ATTEMPTS_EXCEEDED)\b",
                      "DBOS: a workflow's terminal failed statuses"))

    def __init__(self, backend, graph, hooks=None, options=None):
        super().__init__(backend, graph, hooks, options)
        if backend["kind"] == "sqlite":
            path = Path(backend["location"]) / f"{self.ns}dbos.sqlite"
            path.parent.mkdir(parents=True, exist_ok=True)
            self.url, self.schema = f"sqlite:///{path}", None
        else:
            self.url, self.schema = _sqlalchemy_url(backend["location"]), self.ns
        self.executor: str | None = None
        self._client: DBOSClient | None = None
        if self.options.get("pause_at"):  # the nemesis stops this call at a named point (PauseAtPoint)
            self.hooks = PauseAtPoint(self.hooks, tuple(self.options["pause_at"]), Path(self.options["pause_dir"]),
                                      float(self.options.get("pause_s", PAUSE_S)), self._reopen_ledger)

    # ------------------------------------------------------------------ DBOS in this process
    def _config(self, executor: str) -> DBOSConfig:
        config = DBOSConfig(name="driftlab", system_database_url=self.url, executor_id=executor,
                            application_version="driftlab", log_level="ERROR",
                            notification_listener_polling_interval_sec=self.options.get("polling_ms", 50) / 1000)
        if self.schema:
            config["dbos_system_schema"] = self.schema
            config["sys_db_pool_size"] = PG_POOL
        return config

    def launch(self) -> None:
        """This process becomes a DBOS executor of its own (``driftlab-<pid>``)."""
        if self.executor is None:
            self.executor = f"driftlab-{os.getpid()}"
            dbos = DBOS(config=self._config(self.executor))
            # DBOS's internal queue (recovery, forks) is polled every second by default: created here first, with
            # the notification polling interval, before launch creates it with the default
            dbos._registry._register_internal_queue(INTERNAL_QUEUE_NAME,
                                                    polling_interval_sec=self.options.get("polling_ms", 50) / 1000)
            DBOS.launch()

    def recover_dead(self, run_id: str) -> None:
        """If the run is PENDING on an executor whose process is gone, DBOS's recovery of that executor."""
        st = self._status(run_id)
        if st is None or st.status != "PENDING" or st.executor_id in (None, self.executor):
            return
        if not _alive(st.executor_id):
            DBOS._recover_pending_workflows([st.executor_id])

    def _reopen_ledger(self) -> None:
        """A fresh connection to the effect ledger (after the nemesis's pause: :class:`PauseAtPoint`), tried again
        while the store cannot be reached yet (a link just healed, a cluster just restarted), at most
        :data:`LEDGER_ATTEMPTS` times; the last failure is the lab's (its instrument), recorded as the lab's code's
        fault so that the call is never judged as DBOS's answer."""
        self.ledger.close()
        for attempt in range(1, LEDGER_ATTEMPTS + 1):
            try:
                self.ledger = Ledger(self.backend)
                return
            except Exception as exc:  # noqa: BLE001 - psycopg's OperationalError: tried again, then the lab's fault
                if attempt == LEDGER_ATTEMPTS:
                    self.faults.append(f"the effect ledger's connection after the pause: {type(exc).__name__}: "
                                       f"{str(exc).splitlines()[0] if str(exc) else ''}")
                    raise
                time.sleep(LEDGER_BACKOFF_S)

    def client(self) -> DBOSClient:
        if self._client is None:
            pg = {"dbos_system_schema": self.schema, "system_database_pool_size": PG_CLIENT_POOL}
            self._client = DBOSClient(system_database_url=self.url, **(pg if self.schema else {}))
        return self._client

    def setup(self) -> None:
        self.launch()  # creates and migrates the system database

    # ------------------------------------------------------------------ reading the system database
    def _status(self, run_id: str):
        return self.client().retrieve_workflow(run_id).get_status() if self._exists(run_id) else None

    def _exists(self, run_id: str) -> bool:
        return bool(self.client().list_workflows(workflow_ids=[run_id]))

    def _steps(self, run_id: str) -> list[dict]:
        return list(self.client().list_workflow_steps(run_id))

    def _waiting(self, run_id: str) -> bool:
        """The workflow waits in ``recv``: its durable sleep is recorded and no message consumed."""
        names = [s["function_name"] for s in self._steps(run_id)]
        return "DBOS.sleep" in names and "DBOS.recv" not in names

    def _wait(self, run_id: str, may_park: bool) -> None:
        """Until the run is not PENDING, or (``may_park``) waits in ``recv`` for three polls in a row."""
        deadline, stable = time.monotonic() + self.options.get("wait_s", WAIT_S), 0
        while time.monotonic() < deadline:
            st = self._status(run_id)
            if st is not None and st.status not in ("PENDING", "ENQUEUED"):
                return
            stable = stable + 1 if may_park and st is not None and self._waiting(run_id) else 0
            if stable >= 3:
                return
            time.sleep(self.options.get("polling_ms", 50) / 1000)

    # ------------------------------------------------------------------ calls
    def start(self, run_id: str, input: str) -> dict:
        self.launch()
        with SetWorkflowID(run_id):
            DBOS.start_workflow(graph_workflow, self.graph.initial_state(input))
        self._wait(run_id, may_park=True)
        return self.answer(run_id)

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> dict:
        if checkpoint_id is not None:  # the cells that need it are n/a (pyproject); never a refusal DBOS did not make
            raise RuntimeError("DBOS has no resume by checkpoint id (declared not applicable)")
        try:
            self.client().send(run_id, value, TOPIC)
        except dbos_error.DBOSNonExistentWorkflowError as exc:  # DBOS's answer: no such workflow
            return self.status(run_id, REFUSED, reason=str(exc).splitlines()[0])
        self.launch()
        self.recover_dead(run_id)
        self._wait(run_id, may_park=False)
        return self.answer(run_id)

    def recover(self, run_id: str) -> dict:
        self.launch()
        self.recover_dead(run_id)
        self._wait(run_id, may_park=True)
        return self.answer(run_id)

    def fork(self, run_id: str, checkpoint_id: str, new_run_id: str) -> dict:
        run, _, fid = checkpoint_id.rpartition(":")
        if run != run_id or not fid.isdigit():
            return self.status(new_run_id, REFUSED, reason=f"no checkpoint {checkpoint_id!r} in run {run_id!r}")
        if self._exists(new_run_id):
            return self.status(new_run_id, REFUSED, reason=f"workflow {new_run_id!r} exists")
        self.launch()
        with SetWorkflowID(new_run_id):
            DBOS.fork_workflow(run_id, int(fid) + 1)  # the steps up to the checkpoint copied, the rest re-run
        self._wait(new_run_id, may_park=True)
        return self.answer(new_run_id)

    # ------------------------------------------------------------------ reading
    def _node_outputs(self, run_id: str) -> list[dict]:
        return [s for s in self._steps(run_id) if s["function_name"] == "driftlab.node" and s["error"] is None]

    def checkpoints(self, run_id: str) -> list[dict]:
        out, parent = [], None
        for s in self._node_outputs(run_id):
            values = s["output"] or {}
            step = values.get("steps") if isinstance(values.get("steps"), int) else len(out) + 1
            nxt = self.graph.names[step] if step < len(self.graph.names) else None
            cid = f"{run_id}:{s['function_id']}"
            parked = nxt == self.graph.names[self.graph.interrupt_step]  # the checkpoint the run parks at
            out.append(self.checkpoint(cid, run_id, step, nxt, values, parent,
                                       (s["completed_at_epoch_ms"] or 0) / 1000, parked))
            parent = cid
        return out

    def state(self, run_id: str) -> dict:
        if not self._exists(run_id):
            return self.status(run_id, REFUSED, reason=f"no workflow {run_id!r}")
        st = self._status(run_id)
        cps = self.checkpoints(run_id)
        head = cps[-1] if cps else None
        values = head["values"] if head else None
        if st.status in TERMINAL_OK:
            return self.status(run_id, DONE, head and head["checkpoint"], None, values)
        if st.status in TERMINAL_FAIL:
            return self.status(run_id, FAILED, head and head["checkpoint"], head and head["next"], values,
                               reason=f"workflow {st.status}: {str(st.error).splitlines()[0] if st.error else ''}")
        return self.status(run_id, PARKED, head and head["checkpoint"], head["next"] if head else self.graph.names[0],
                           values)

    def close(self) -> None:
        if self._client is not None:
            self._client.destroy()
        if self.executor is not None:
            DBOS.destroy(destroy_registry=False)
        super().close()
