"""Prefect at a pinned release (``prefect@3.9``), a local Prefect server on SQLite, offline, inside its own environment.

Serves issue 29 (frameworks, round 2, under the harness of "Resume Means
Resume", arXiv 2608.03836).  Imported as ``driftlab_frameworks.prefect``:
``import prefect`` here is the framework (the folder is never on ``sys.path``).
What the framework does is left to it, through its documented API
(``prefect``: ``@flow``, ``@task``, ``suspend_flow_run(wait_for_input=...)``,
``resume_flow_run(id, run_input=...)``; ``prefect.flow_engine.run_flow``, the
engine call a worker and ``prefect flow-run retry --entrypoint`` make;
``PrefectClient``: deployments, flow runs, states):

- the server: ``prefect server start`` (``--no-ui --analytics-off
  --no-scheduler --no-late-runs``; ``PREFECT_HOME`` and the SQLite database
  ``PREFECT_API_DATABASE_CONNECTION_URL`` in its folder: a copy of a template
  database Prefect's own ``prefect server database upgrade -y`` migrated once
  per env, kept beside the env, ``<sys.prefix>/driftlab-prefect/``, as it
  belongs to that env's release; it spares each server start its migrations,
  about 5 s; the server still checks them at start), one per lab
  process (``<tmp>/driftlab-prefect-<its pid>/``), shared by the fork servers
  of Prefect's three rows (started under a file lock), as one Prefect server serves
  many flows: started by the first cell's ``setup()`` as a process of its own,
  so it outlives every process the cells SIGKILL, and shared by the next cells;
  a shell watchdog stops it (and removes its folder) when the lab process is
  gone or no call has come for five minutes (each call touches a lease file),
  as ``temporal.py`` does for Temporal's dev server.  Cells are isolated by the
  namespace: each cell's deployment is ``driftlab-graph/<ns>`` and its flow runs
  are named ``<ns>:<run>``.  Telemetry, analytics and logs to the API are off;
  nothing leaves the machine;
- the flow ``driftlab-graph`` (``persist_result=True``: ``suspend_flow_run``
  needs persisted results and a deployment) runs one task per graph node,
  named after it, whose body is the protocol's ``run_node`` on the state the
  previous task returned; before the interrupt node's task the flow calls
  ``suspend_flow_run(wait_for_input=str, key=<node>)``: the flow run is
  *suspended* (PAUSED, rescheduled on resume) and its process exits; when the
  run is executed again after ``resume_flow_run``, the same call returns the
  human's value (Prefect's saved run input), which the interrupt task
  consumes.  Task results are persisted (Prefect's local result storage,
  ``PREFECT_RESULTS_LOCAL_STORAGE_PATH`` = ``<location>/<ns>prefect-results/<run>``
  for every process that executes that run) and cached by the task's cache
  policy: the default row keeps Prefect's default policy (``DEFAULT`` =
  inputs + task source + flow run id, ``READ_COMMITTED``); the
  ``serializable-cache`` row (option ``isolation = "SERIALIZABLE"``) configures
  it as Prefect documents for concurrent executions of one cache key:
  ``DEFAULT.configure(isolation_level="SERIALIZABLE",
  lock_manager=FileSystemLockManager(<that folder>/locks))`` (its locks are
  taken with no acquire or hold timeout: a SIGKILLed holder's lock is never
  released, so it is not combined with the ``crashed-retry`` recovery, whose
  retry would wait on it forever; ``tests/test_resume_framework_prefect.py``);
- every call that runs the flow acts as the deployment's worker in its own
  process: it proposes ``Pending`` and submits the run only if the server
  accepts (``BaseWorker._propose_pending_state``), then
  ``run_flow(flow, flow_run=<the run read from the API>)``;
  ``start`` = ``create_flow_run_from_deployment(name=<ns>:<run>)`` and run it
  (it runs the tasks before the interrupt, suspends and exits: Prefect's
  ``Pause``); ``resume`` = ``resume_flow_run(id, run_input={"value": v})``
  (``NotPausedError`` when its client sees the run not paused: Prefect's
  refusal; the server's ABORT of a resume that lost the race after that check,
  "Cannot resume a flow run that is not paused", is not raised by
  ``resume_flow_run``, which raises on REJECT only) then run it (Prefect
  re-executes the flow from its start: finished tasks whose result is cached
  are not run again; a run another resumer submitted first is not Pending-able,
  so this worker skips it); ``recover`` (a new process after a SIGKILL) =
  nothing to run when the run is suspended (only ``resume`` with the human's
  value continues it) or completed; a scheduled run is run, as its worker
  would; a failed, crashed or cancelled run is retried as ``prefect flow-run
  retry --entrypoint`` does (``Scheduled`` forced, then ``run_flow``); a run
  still RUNNING is refused as that command refuses it (only terminal runs are
  retried): a SIGKILLed engine leaves its run RUNNING, stock Prefect detects
  such a run only through heartbeats and an automation the user adds.  The
  ``crashed-retry`` row (option ``zombies = "crashed"``) is that addition: the
  documented zombie-flow automation (flow run heartbeats, a proactive trigger
  on their absence, the action ``ChangeFlowRunState(CRASHED)``) would mark the
  run CRASHED once its window (at least the 30 s minimum heartbeat interval)
  passed; ``recover``, called only after the engine was SIGKILLed, takes that
  action at once (``set_flow_run_state(Crashed(...), force=True)``, the API call
  the action makes) and then retries as above.

The store is read (``checkpoints``, ``state``) from what Prefect persisted: one
checkpoint per persisted task result record of the run (the node's new state,
``step`` = its ``steps``, created = the record file's modification time, id
``results/<file>``); the run's state from the API (PAUSED: parked at the
interrupt; COMPLETED: done; FAILED, CRASHED, CANCELLED: failed; otherwise
parked at the next node its records say).  No fork, replay, update or resume by
id (the env's ``not_applicable``).

Named points: ``before_node``/``after_effect`` (``run_node`` in the task),
``after_node_before_checkpoint`` (the task's body returned; its result is not
yet persisted), ``parked`` (the call whose run suspended returns) and
``after_resume_consumed`` (the interrupt task's result is persisted; the next
task's body has begun, before ``run_node``).  Not reachable:
``during_checkpoint_write`` (Prefect writes a result record in one file write
inside the task's transaction commit).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


# imported in the env's fork server: its parent is the lab process, whose fork servers (one per row: the default, the
# serializable-cache and crashed-retry rows) share one Prefect server, each cell in its own deployment
_LAB = os.getppid()
_FOLDER = Path(tempfile.gettempdir()) / f"driftlab-prefect-{_LAB}"
# the folders of lab processes that are gone (a watchdog that stopped an idle server before its lab process ended
# leaves its folder behind): removed here, whoever left them
for _left in _FOLDER.parent.glob("driftlab-prefect-*"):
    _pid = _left.name.rpartition("-")[2]
    if _pid.isdigit() and _gone(int(_pid)):
        shutil.rmtree(_left, ignore_errors=True)
(_FOLDER / "home").mkdir(parents=True, exist_ok=True)  # Prefect makes its home at import, not its parents
# Prefect's documented settings, before prefect is imported: its home under the server's folder, no analytics, no
# logs sent to the API, quiet console (nothing of this is part of what the lab measures)
for _var, _val in (("PREFECT_HOME", str(_FOLDER / "home")), ("DO_NOT_TRACK", "1"),
                   ("PREFECT_SERVER_ANALYTICS_ENABLED", "false"), ("PREFECT_LOGGING_TO_API_ENABLED", "false"),
                   ("PREFECT_LOGGING_LEVEL", "ERROR"), ("PREFECT_CLI_PROMPT", "false")):
    os.environ.setdefault(_var, _val)

import fcntl  # noqa: E402
import json  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from contextlib import closing  # noqa: E402
from typing import Any  # noqa: E402

import prefect  # noqa: E402
from prefect import flow, resume_flow_run, suspend_flow_run, task  # noqa: E402
from prefect._internal.result_records import ResultRecord  # noqa: E402
from prefect.cache_policies import DEFAULT  # noqa: E402
from prefect.client.orchestration import get_client  # noqa: E402
from prefect.context import SettingsContext, get_settings_context  # noqa: E402
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName  # noqa: E402
from prefect.exceptions import Abort, Pause  # noqa: E402
from prefect.flow_engine import run_flow  # noqa: E402
from prefect.locking.filesystem import FileSystemLockManager  # noqa: E402
from prefect.settings import PREFECT_API_URL, PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings  # noqa: E402
from prefect.states import Crashed, Pending, Scheduled  # noqa: E402
from prefect.utilities.engine import propose_state_sync  # noqa: E402

from .protocol import (Answer, AFTER_NODE_BEFORE_CHECKPOINT, AFTER_RESUME_CONSUMED, DONE, FAILED, PARKED,  # noqa: E402
                       REFUSED, Adapter, current)

FLOW = "driftlab-graph"
SERVER_IDLE_S = 300  # the server stops this long after the last call (or when the lab process is gone)
WAIT_S = 55  # the server's start-up (16 s on an idle 2-core machine), within the setup call's 60 s limit
FINAL = ("FAILED", "CRASHED", "CANCELLED")
#: the message of the documented zombie-flow automation's ChangeFlowRunState action (Prefect's "Detect zombie flows")
ZOMBIE = "Flow run marked as crashed due to missing heartbeats."


def node_body(step: int, state: dict, resume: Any = None) -> dict:
    """One node, as a Prefect task's body (the adapter of this process: :func:`current`)."""
    rt = current()
    if step > 0 and rt.graph.nodes[step - 1]["interrupt"]:
        rt.point(AFTER_RESUME_CONSUMED, rt.run_id, step - 1)
    new = rt.run_node(rt.run_id, step, state, resume=resume)
    rt.point(AFTER_NODE_BEFORE_CHECKPOINT, rt.run_id, step)
    return new


def _sqlite_url(db: Path) -> str:
    return f"sqlite+aiosqlite:///{db}"


#: the migrated database every server of this env starts on a copy of: beside the env (its ``sys.prefix``, a folder
#: the lab names after the env's lock), so it is made by, and only ever used with, this env's Prefect release
TEMPLATE = Path(sys.prefix) / "driftlab-prefect" / f"template-{prefect.__version__}.db"


def template_db(path: Path = TEMPLATE) -> Path:
    """A database migrated by Prefect's own documented command (``prefect server database upgrade -y``, this env's
    Python, ``PREFECT_API_DATABASE_CONNECTION_URL`` on it), made once: under a file lock (two lab processes: one makes
    it, the other waits and uses it), written to a temporary file and renamed only when the command succeeded and the
    database holds its Alembic revision, so a killed build never leaves a half-made template."""
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.is_file():  # made by the holder we waited for
            return path
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        for left in path.parent.glob(f"{path.name}.*.tmp*"):  # a killed build's (it held the lock: it is gone)
            left.unlink(missing_ok=True)
        env = {**os.environ, "PREFECT_API_DATABASE_CONNECTION_URL": _sqlite_url(tmp)}
        env.pop("PREFECT_API_URL", None)
        done = subprocess.run([sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"], env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=WAIT_S)
        import sqlite3

        with closing(sqlite3.connect(tmp)) as db:  # the command's writes all in the file itself, then checked
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            revision = db.execute("SELECT version_num FROM alembic_version").fetchall() if done.returncode == 0 \
                and db.execute("SELECT 1 FROM sqlite_master WHERE name = 'alembic_version'").fetchone() else []
        if len(revision) != 1:
            tmp.unlink(missing_ok=True)
            raise RuntimeError(f"`prefect server database upgrade` did not migrate {tmp} (exit {done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-300:]}")
        for extra in ("-wal", "-shm"):
            Path(f"{tmp}{extra}").unlink(missing_ok=True)
        os.replace(tmp, path)
    return path


def server_database(folder: Path, port: int) -> Path:
    """The database of the server on ``port``: a copy of the migrated template of its own (one file per server)."""
    db = folder / f"prefect-{port}.db"
    shutil.copyfile(template_db(), db)
    return db


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrefectAdapter(Adapter):
    """Prefect behind the durable-runtime interface (module docstring)."""

    name = "prefect"
    #: Prefect's answers (issue 24 §1): resume_flow_run on a run that is not paused (NotPausedError) or that the
    #: server will not resume; `prefect flow-run retry` on a run not in a terminal state; a run that ended FAILED,
    #: CRASHED or CANCELLED
    ANSWERS = (Answer(REFUSED, r"NotPausedError: Cannot resume a run that isn't paused",
                      "Prefect: resume_flow_run (prefect/flow_runs.py)"),
               Answer(REFUSED, r"(RuntimeError: Cannot resume this run|FlowPauseTimeout: )",
                      "Prefect: resume_flow_run rejected by the server"),
               Answer(REFUSED, r"Flow run '[^']*' is in state '\w+' and cannot be retried",
                      "Prefect: `prefect flow-run retry` retries terminal runs only (prefect/cli/flow_run.py)"),
               Answer(FAILED, r"flow run (FAILED|CRASHED|CANCELLED)\b",
                      "Prefect: a flow run's final states other than COMPLETED"))

    def __init__(self, backend, graph, hooks=None, options=None):
        super().__init__(backend, graph, hooks, options)
        self.folder = _FOLDER
        self.info = self.folder / "server.json"
        self.root = Path(backend["location"]) / f"{self.ns}prefect-results"
        self.deployment = self.ns
        self.run_id = ""
        self.interrupt = self.graph.names[self.graph.interrupt_step]
        self._client = None
        self._url: str | None = None
        self._settings: dict[str | None, Any] = {}
        try:  # every call renews the server's lease (setup's watchdog stops an idle server)
            self.info.with_suffix(".lease").touch(exist_ok=True)
        except OSError:
            pass

    # ------------------------------------------------------------------ the server
    def url(self) -> str:
        if self._url is None:
            self._url = json.loads(self.info.read_text())["url"]
        return self._url

    def _healthy(self, url: str) -> bool:
        import httpx

        try:
            return httpx.get(f"{url}/health", timeout=2).status_code == 200
        except Exception:  # noqa: BLE001 - not up (yet)
            return False

    def setup(self) -> None:
        with open(self.folder / "start.lock", "a") as lock:  # two rows' fork servers: one starts it, one waits
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (self.info.exists() and self._healthy(self.url())):
                self._start_server()
        with self.settings():
            client = self.client()
            flow_id = client.create_flow_from_name(FLOW)
            client.create_deployment(flow_id=flow_id, name=self.deployment)

    def _start_server(self) -> None:
        self.info.unlink(missing_ok=True)
        self.folder.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        lease = self.info.with_suffix(".lease")
        lease.touch()
        env = {**os.environ, "PREFECT_HOME": str(self.folder / "home"),
               "PREFECT_API_DATABASE_CONNECTION_URL": _sqlite_url(server_database(self.folder, port)),
               "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_UI_ENABLED": "false", "DO_NOT_TRACK": "1"}
        env.pop("PREFECT_API_URL", None)
        watch = (f'"{sys.executable}" -m prefect server start --host 127.0.0.1 --port {port} --no-ui '
                 f'--analytics-off --no-scheduler --no-late-runs >"{self.folder}/server-{port}.log" 2>&1 & p=$!; '
                 f'while kill -0 {_LAB} 2>/dev/null && kill -0 $p 2>/dev/null && '
                 f'[ $(( $(date +%s) - $(stat -c %Y "{lease}" 2>/dev/null || echo 0) )) -lt {SERVER_IDLE_S} ]; '
                 f'do sleep 0.5; done; kill $p 2>/dev/null; wait $p; '
                 f'kill -0 {_LAB} 2>/dev/null || rm -rf "{self.folder}"')
        subprocess.Popen(["sh", "-c", watch], start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        url, deadline = f"http://127.0.0.1:{port}/api", time.monotonic() + WAIT_S
        while not self._healthy(url):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Prefect server did not start on {url} (log: {self.folder}/server-{port}.log)")
            time.sleep(0.25)
        self.info.write_text(json.dumps({"url": url}))
        self._url = url

    def client(self):
        """This adapter's API client, opened once (in the shared server's settings) and kept for its process's calls:
        each of Prefect's clients builds its own SSL context on opening, CA bundle and all, even for an http API
        (about 20 ms of CPU; 2026-12-06: building them was 23% of py-spy's samples over one paper repetition of
        prefect@3.9, about a third of that in the adapter's own clients, the rest in Prefect's)."""
        if self._client is None:
            with self.settings():
                client = get_client(sync_client=True)
                client.__enter__()
            self._client = client
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.__exit__(None, None, None)
            self._client = None
        super().close()

    def settings(self, run_id: str | None = None):
        """The API of the shared server and, for a run, its result storage (every process that runs it): what
        ``temporary_settings(updates=...)`` enters, its settings made once per process and run (a call enters them
        four or five times; each copy of Prefect's settings costs about 0.1 s)."""
        made = self._settings.get(run_id)
        if made is None:
            updates = {PREFECT_API_URL: self.url()}
            if run_id is not None:
                updates[PREFECT_RESULTS_LOCAL_STORAGE_PATH] = str(self.root / run_id)
            with temporary_settings(updates=updates) as made:
                self._settings[run_id] = made
        return SettingsContext(profile=get_settings_context().profile, settings=made)

    # ------------------------------------------------------------------ the flow
    def _flow(self, run_id: str):
        g = self.graph
        options: dict[str, Any] = {}
        if self.options.get("isolation") == "SERIALIZABLE":
            options["cache_policy"] = DEFAULT.configure(
                isolation_level="SERIALIZABLE", lock_manager=FileSystemLockManager(self.root / run_id / "locks"))
        tasks = [task(name=name, **options)(node_body) for name in g.names]

        @flow(name=FLOW, persist_result=True)
        def graph_flow(input: str) -> dict:
            state = g.initial_state(input)
            for step, node in enumerate(g.nodes):
                value = None
                if node["interrupt"]:
                    value = suspend_flow_run(wait_for_input=str, key=node["name"])
                state = tasks[step](step, state, resume=value)
            return state

        return graph_flow

    def _execute(self, run_id: str, flow_run_id, worker: bool = True) -> None:
        """The deployment's worker in this process (``worker``: it submits the run only if the server accepts its
        Pending proposal, as ``BaseWorker._propose_pending_state`` does; ``prefect flow-run retry`` calls the engine
        without it), then Prefect's engine runs the flow run (a suspension ends it)."""
        with self.settings(run_id):
            client = self.client()
            if worker:
                try:
                    state = propose_state_sync(client, Pending(), flow_run_id=flow_run_id)
                except Abort:  # the worker's "Aborted submission of flow run": the server sent an abort signal
                    return
                if not state.is_pending():  # the worker's "Server returned a non-pending state"
                    return
            flow_run = client.read_flow_run(flow_run_id)
            try:
                run_flow(self._flow(run_id), flow_run=flow_run, return_type="state")
            except Pause:  # the engine's signal that the run is suspended and this process should exit
                pass

    def _run(self, run_id: str):
        with self.settings():
            client = self.client()
            runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(
                any_=[f"{self.ns}:{run_id}"])))
        return runs[0] if runs else None

    # ------------------------------------------------------------------ calls
    def start(self, run_id: str, input: str) -> dict:
        if self._run(run_id) is not None:
            return self.status(run_id, REFUSED, reason=f"run {run_id!r} exists")
        self.run_id = run_id
        with self.settings():
            client = self.client()
            dep = client.read_deployment_by_name(f"{FLOW}/{self.deployment}")
            fr = client.create_flow_run_from_deployment(dep.id, parameters={"input": str(input)},
                                                        name=f"{self.ns}:{run_id}")
        self._execute(run_id, fr.id)
        return self.answer(run_id)

    def resume(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> dict:
        if checkpoint_id is not None:  # declared n/a (resume_by_id)
            raise RuntimeError("Prefect resumes a flow run, not a checkpoint (declared not applicable)")
        fr = self._run(run_id)
        if fr is None:
            return self.status(run_id, REFUSED, reason=f"no run {run_id!r}")
        self.run_id = run_id
        with self.settings():
            resume_flow_run(fr.id, run_input={"value": str(value)})
        self._execute(run_id, fr.id)
        return self.answer(run_id)

    def recover(self, run_id: str) -> dict:
        fr = self._run(run_id)
        if fr is None:
            return self.status(run_id, REFUSED, reason=f"no run {run_id!r}")
        self.run_id = run_id
        kind = fr.state.type.value if fr.state else "UNKNOWN"
        if kind in ("PAUSED", "COMPLETED"):
            return self.answer(run_id)
        if kind in ("RUNNING", "PENDING") and self.options.get("zombies") == "crashed":
            # the action of Prefect's documented zombie-flow automation (no heartbeat within its window: the run is
            # marked CRASHED), taken at once: this process is called only after the run's engine was SIGKILLed
            with self.settings():
                client = self.client()
                client.set_flow_run_state(fr.id, Crashed(message=ZOMBIE), force=True)
            kind = "CRASHED"
        if kind in FINAL:  # `prefect flow-run retry --entrypoint`: Scheduled (forced), then the engine locally
            with self.settings():
                client = self.client()
                client.set_flow_run_state(fr.id, Scheduled(message="Retried via CLI (local execution)"), force=True)
            self._execute(run_id, fr.id, worker=False)
        elif kind == "SCHEDULED":  # a scheduled run of the deployment: its worker submits it
            self._execute(run_id, fr.id)
        else:  # the same command's refusal of a run not in a terminal state
            return self.status(run_id, REFUSED, reason=(
                f"Flow run '{fr.id}' is in state '{kind}' and cannot be retried. Only flow runs in terminal "
                "states (COMPLETED, FAILED, CANCELLED, CRASHED) can be retried."))
        return self.answer(run_id)

    # ------------------------------------------------------------------ reading
    def checkpoints(self, run_id: str) -> list[dict]:
        folder = self.root / run_id
        if not folder.is_dir():
            return []
        records = []
        for path in folder.iterdir():
            if not path.is_file():
                continue
            try:
                record = ResultRecord.deserialize(path.read_bytes())
            except Exception:  # noqa: BLE001 - not a result record (a lock file, a partial write)
                continue
            values = record.result if isinstance(record.result, dict) else None
            if values is None or "steps" not in values:
                continue  # the flow's own return value is the last node's state too, kept once below
            records.append((path.stat().st_mtime_ns, path.name, values))
        records.sort()
        out, parent, n, seen = [], None, len(self.graph.names), set()
        for mtime, name, values in records:
            key = json.dumps(values, sort_keys=True)
            step = values["steps"] if isinstance(values.get("steps"), int) else len(out) + 1
            nxt = self.graph.names[step] if step < n else None
            if key in seen and nxt is None:
                continue  # the flow's result record: the same state as its last task's
            seen.add(key)
            cid = f"results/{name}"
            out.append(self.checkpoint(cid, run_id, step, nxt, values, parent, mtime / 1e9, nxt == self.interrupt))
            parent = cid
        return out

    def state(self, run_id: str) -> dict:
        fr = self._run(run_id)
        if fr is None:
            return self.status(run_id, REFUSED, reason=f"no run {run_id!r}")
        kind = fr.state.type.value if fr.state else "UNKNOWN"
        cps = self.checkpoints(run_id)
        head = cps[-1] if cps else None
        cid, values = (head["checkpoint"], head["values"]) if head else (None, None)
        if kind == "COMPLETED":
            return self.status(run_id, DONE, cid, None, values)
        if kind in FINAL:
            message = (fr.state.message or "").splitlines()[0] if fr.state and fr.state.message else ""
            return self.status(run_id, FAILED, cid, head and head["next"], values,
                               reason=f"flow run {kind}: {message}")
        if kind == "PAUSED":
            return self.status(run_id, PARKED, cid, self.interrupt, values)
        return self.status(run_id, PARKED, cid, head["next"] if head else self.graph.names[0], values)
