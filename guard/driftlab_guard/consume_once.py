"""Layer 1, consume-once: what the four guarded savers share (one claim, one set of checks).

Serves "Resume Means Resume" (arXiv 2608.03836), consume-once (CO): LangGraph
records a second resume value and never consults it, re-runs the nodes after an
addressed checkpoint with the old value, and serves every one of k concurrent
resumers.  The guarded savers (:mod:`driftlab_guard.sqlite`, :mod:`driftlab_guard.postgres`)
store checkpoints exactly as the stock savers do and add one table,
``driftlab_guard_claims``, keyed by (thread, namespace, interrupt id).

**The claim.**  When a graph is invoked with ``Command(resume=value)``, the
saver's first load of that invocation (which LangGraph makes before it
schedules any node) claims every interrupt recorded on the loaded checkpoint in
one transaction (``INSERT ... ON CONFLICT DO NOTHING RETURNING``; all or none).
The same transaction stores LangGraph's own resume write (the one LangGraph
would write next; the saver then skips that write), so a resume costs the
commits it costs stock LangGraph.  Of k concurrent or repeated resumers exactly
one inserts the rows and proceeds; every other gets :class:`ResumeRefused`
before any node runs.  A resume of a checkpoint with no interrupt (a finished
run), of a thread with no checkpoint, or addressed to a consumed checkpoint is
refused too.

**Durability.**  A claimed resume (and a recovery that continues one) runs
with ``durability="sync"`` whatever the caller asked for: the step that
consumed the value is durable before the next step starts, so a crash after it
never makes a recovery consume the value again (under ``"exit"`` LangGraph
would otherwise persist nothing until the end).  ``_pregel.py`` does this.

**Recovery.**  The claim row keeps the value: a recovery (``invoke(None,
config)``) of a claimed checkpoint whose resume write is missing is handed the
claimed value instead of parking again.

**State lost behind a claim.**  A saver whose store is rolled back (a power
loss under a fast ``synchronous`` setting) while the claim store keeps the claim
leaves a claim without the checkpoints behind it.  A resume or a recovery of a
thread the saver holds no checkpoint of, but whose claims are in the store, is
refused ``state_lost`` (never "nothing is parked": the run would be stuck).  The
recovery: start the run again with its input; LangGraph gives the restarted
park a new interrupt id (it hashes the task, whose id hashes the checkpoint
id), so ``invoke(None)`` at that park, never claimed, re-keys the lost claim to
it (:func:`lost_park`, :func:`adopt`) and continues with the claimed value; a
``Command(resume=...)`` sent there instead is a new claim, as on any park.
Handed on only when the saver holds the thread's whole
history back to its input checkpoint (a pruned history lacks old checkpoints
too).

The claim is written once, as a generator of SQL requests (:func:`claim`,
:func:`claimed_value`); :func:`drive` and :func:`adrive` run it on a sync or
an async connection.  Each saver only says how it executes one statement.
"""
from __future__ import annotations

import json
import os
import socket
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Generator, Iterable, NoReturn, Sequence

from langchain_core.runnables import RunnableConfig

from langgraph.checkpoint.base import (WRITES_IDX_MAP, BaseCheckpointSaver, ChannelVersions, Checkpoint,
                                      CheckpointMetadata, CheckpointTuple)
from langgraph.types import Command
from pydantic import TypeAdapter, ValidationError

from driftlab_guard._pregel import Invocation, loading_invocation
from driftlab_guard.errors import STATE_LOST_REASON, InvalidState, ResumeRefused
from driftlab_guard.schema import StateSchema, as_schema

# LangGraph's reserved channel / task names (langgraph._internal._constants; stable since 0.2).
INTERRUPT = "__interrupt__"
RESUME = "__resume__"
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"

CLAIMS_DDL = """CREATE TABLE IF NOT EXISTS driftlab_guard_claims (
    thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', interrupt_id TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL, claimant TEXT NOT NULL, value_type TEXT, value {blob}, claimed_at {real} NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, interrupt_id)){suffix}"""


@dataclass(frozen=True)
class Dialect:
    """The statements of the claim in one SQL dialect (``?`` placeholders are rewritten for psycopg)."""

    begin: str
    write: str  # the stock saver's statement for one pending write (its resume write)
    mark: str = "?"
    insert: str = ("INSERT INTO driftlab_guard_claims (thread_id, checkpoint_ns, interrupt_id, checkpoint_id, claimant, "
                   "value_type, value, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING "
                   "RETURNING interrupt_id")
    holder: str = ("SELECT claimant, checkpoint_id FROM driftlab_guard_claims WHERE thread_id = ? AND checkpoint_ns = ? "
                   "AND interrupt_id = ?")
    value: str = ("SELECT value_type, value FROM driftlab_guard_claims WHERE thread_id = ? AND checkpoint_ns = ? "
                  "AND interrupt_id = ?")
    latest: str = ("SELECT claimant, checkpoint_id, interrupt_id FROM driftlab_guard_claims WHERE thread_id = ? "
                   "AND checkpoint_ns = ? ORDER BY claimed_at DESC LIMIT 1")
    #: every claim of one thread and namespace, as one row holding a JSON array of [claimant, checkpoint id,
    #: interrupt id, claimed at] (SQLite's JSON functions; :data:`PG_THREAD_CLAIMS` is PostgreSQL's)
    thread_claims: str = ("SELECT json_group_array(json_array(claimant, checkpoint_id, interrupt_id, claimed_at)) "
                          "FROM driftlab_guard_claims WHERE thread_id = ? AND checkpoint_ns = ?")
    commit: str = "COMMIT"
    rollback: str = "ROLLBACK"

    def __post_init__(self) -> None:
        if self.mark != "?":
            for name in ("insert", "holder", "value", "latest", "thread_claims"):
                object.__setattr__(self, name, getattr(self, name).replace("?", self.mark))


#: :attr:`Dialect.thread_claims` in PostgreSQL (its ``?`` are rewritten like the others')
PG_THREAD_CLAIMS = ("SELECT json_agg(json_build_array(claimant, checkpoint_id, interrupt_id, claimed_at)) "
                    "FROM driftlab_guard_claims WHERE thread_id = ? AND checkpoint_ns = ?")

Request = tuple[str, Any]  # (statement, parameters or None) -> the first row it returns, or None
Procedure = Generator[Request, Any, Any]
Row = tuple[Any, ...]


def claim(d: Dialect, rows: list[Row], resume_write: Row | None) -> Procedure:
    """Insert every claim row and the resume write in one transaction; on a conflict roll back, return the holder."""
    yield d.begin, None
    for row in rows:
        if (yield d.insert, row) is None:
            holder = yield d.holder, row[:3]
            yield d.rollback, None
            return tuple(holder) if holder else ("?", "?")
    if resume_write is not None:
        yield d.write, resume_write
    yield d.commit, None
    return None


def claimed_value(d: Dialect, key: tuple[str, str], ids: list[str]) -> Procedure:
    """The (type, bytes) of the value claimed for the first of ``ids`` that has a claim, or None."""
    for iid in ids:
        row = yield d.value, (*key, iid)
        if row is not None:
            return row[0], bytes(row[1])
    return None


def latest_claim(d: Dialect, key: tuple[str, str]) -> Procedure:
    """(claimant, checkpoint id, interrupt id) of the thread's newest claim, or None."""
    row = yield d.latest, key
    return None if row is None else tuple(row)


#: one claim as :func:`thread_claims` lists it: (claimant, checkpoint id, interrupt id, claimed at)
Claim = tuple[str, str, str, float]


def thread_claims(d: Dialect, key: tuple[str, str]) -> Procedure:
    """Every claim of a thread and namespace, oldest first (the question "what did this thread consume?")."""
    row = yield d.thread_claims, key
    got = None if row is None else row[0]
    items = json.loads(got) if isinstance(got, (str, bytes)) else (got or [])
    claims = [(str(c), str(cp), str(iid), float(at)) for c, cp, iid, at in items]
    return sorted(claims, key=lambda c: (c[3], c[2]))


def lost_park(claims: Sequence[Claim], held: set[str]) -> list[Claim]:
    """The claims of the one park whose value a restarted run is handed next, or [] (none pending).

    ``held``: the checkpoint ids the saver holds for the thread.  A claim whose checkpoint is not held was made on
    state the saver lost; the lost parks, oldest first, are handed in order to the restarted run's parks: the
    next one is the first not yet handed on, i.e. as many lost parks are skipped as there are parks claimed on held
    checkpoints after the first lost claim (each a park of the restarted run already resumed)."""
    lost = [c for c in claims if c[1] not in held]
    if not lost:
        return []
    parks = list(dict.fromkeys(c[1] for c in lost))
    since = {c[1] for c in claims if c[1] in held and c[3] > lost[0][3]}
    if len(since) >= len(parks):
        return []
    return [c for c in lost if c[1] == parks[len(since)]]


def adopt(d: Dialect, key: tuple[str, str], lost_ids: list[str], claimant: str, ids: list[str], cp: str,
          serde: Any) -> Procedure:
    """Claim ``ids`` (a restarted run's park at checkpoint ``cp``) with the value and claimant of the lost claim of
    ``lost_ids``; the (type, bytes) handed to the run, or None (a lost resume map: not handed on).  A concurrent
    recovery that claimed ``ids`` first wins: its value is returned."""
    got = yield from claimed_value(d, key, lost_ids[:1])
    if got is None:
        return None
    vtype, blob = got
    value = serde.loads_typed((vtype, blob))
    if isinstance(value, dict) and value and set(value) <= set(lost_ids):
        return None
    rows = [(*key, iid, cp, claimant, vtype, blob, time.time()) for iid in ids]
    if (yield from claim(d, rows, None)) is not None:
        return (yield from claimed_value(d, key, ids))
    return vtype, blob


def drive(proc: Procedure, execute: Callable[[str, Any], Any], rollback: str) -> Any:
    """Run a procedure on a sync connection (``execute(sql, params) -> first row or None``)."""
    try:
        request = next(proc)
        while True:
            request = proc.send(execute(*request))
    except StopIteration as done:
        return done.value
    except BaseException:
        try:
            execute(rollback, None)
        except Exception:  # noqa: BLE001 - no transaction open: nothing to roll back
            pass
        raise


async def adrive(proc: Procedure, execute: Callable[[str, Any], Any], rollback: str) -> Any:
    """Run a procedure on an async connection (``await execute(sql, params) -> first row or None``)."""
    try:
        request = next(proc)
        while True:
            request = proc.send(await execute(*request))
    except StopIteration as done:
        return done.value
    except BaseException:
        try:
            await execute(rollback, None)
        except Exception:  # noqa: BLE001
            pass
        raise


def recorded_interrupts(tup: CheckpointTuple) -> list[str]:
    """Ids of the interrupts recorded on a checkpoint (its INTERRUPT pending writes), in order."""
    ids: list[str] = []
    for _task, channel, value in tup.pending_writes or ():
        if channel != INTERRUPT:
            continue
        for item in value if isinstance(value, (list, tuple)) else (value,):
            iid = getattr(item, "id", None)
            if iid is not None and iid not in ids:
                ids.append(str(iid))
    return ids


def has_resume_write(tup: CheckpointTuple) -> bool:
    return any(channel == RESUME for _t, channel, _v in tup.pending_writes or ())


def default_claimant() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class Plan:
    """What one load decides: ``claim`` (ids, value), ``refuse`` (reason), ``unparked`` (a resume of a checkpoint
    with no interrupt: the thread's claims tell why) or ``replay`` (ids)."""

    kind: str
    invocation: Invocation
    ids: list[str]
    value: Any = None
    reason: str = ""
    kind_of_refusal: str = "not_parked"
    claimant: str | None = None


class ConsumeOnce(BaseCheckpointSaver[str]):
    """The decision and the checks every guarded saver shares; a saver adds ``dialect`` and one execute."""

    dialect: Dialect
    #: the claim transaction also stores LangGraph's own resume write (the claim lives in the saver's database)
    stores_resume_write = True
    guard_schema: StateSchema | None = None
    guard_resume: TypeAdapter[Any] | None = None
    guard_claimant: str = ""

    def _guard_init(self, schema: Any, claimant: str | None, resume_schema: Any = None) -> None:
        self.guard_schema = as_schema(schema)
        self.guard_resume = None if resume_schema is None else TypeAdapter(resume_schema)
        self.guard_claimant = claimant or default_claimant()
        self._guard_seen: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._guard_written: dict[tuple[str, str, str], Any] = {}  # resume writes the claim already stored
        self.claims_made = 0
        self.claims_refused = 0

    def validate_with(self, schema: Any, *, resume: Any = None) -> "ConsumeOnce":
        """Check every checkpoint and pending write against ``schema`` before it is persisted, and every resume
        value against ``resume`` (a type, e.g. ``Literal["approve", "reject"]``) before its claim is taken."""
        self.guard_schema = as_schema(schema)
        if resume is not None:
            self.guard_resume = TypeAdapter(resume)
        return self

    def _guard_check_resume(self, value: Any) -> None:
        """A resume value that does not fit the resume schema is refused before the claim: nothing is consumed,
        so the correct value sent afterwards is served."""
        if self.guard_resume is None:
            return
        try:
            self.guard_resume.validate_python(value, strict=True)
        except ValidationError as exc:
            problems = [f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors()]
            raise InvalidState("the resume value's claim (nothing was claimed: the interrupt is still parked)",
                               problems) from None

    # ---- the decision (pure but for the invocation it reads)
    def _guard_plan(self, tup: CheckpointTuple | None, inv: Invocation | None,
                    config: RunnableConfig) -> Plan | None:
        if inv is None or inv.loop in self._guard_seen:
            return None
        self._guard_seen.add(inv.loop)
        command = inv.input
        resuming = isinstance(command, Command) and command.resume is not None
        if tup is None and command is None:  # a recovery of a thread with no checkpoint: its claims may have outlived it
            return Plan("lost", inv, [])
        if tup is None:  # no checkpoint: LangGraph would run the graph from an empty state with the value
            return Plan("refuse", inv, [], reason="the thread has no checkpoint: nothing is parked",
                        kind_of_refusal="no_checkpoint") if resuming else None
        ids = recorded_interrupts(tup)
        if resuming:
            value = command.resume
            if isinstance(value, dict) and value and all(k in ids for k in value):
                ids = list(value)  # a resume map names the interrupts it answers
            if not ids:
                return Plan("unparked", inv, ids)
            self._guard_check_resume(value)
            return Plan("claim", inv, ids, value)
        if command is None and ids and not has_resume_write(tup):
            return Plan("replay", inv, ids)
        return None

    def _guard_procedure(self, tup: CheckpointTuple, plan: Plan) -> Procedure:
        conf = tup.config["configurable"]
        thread, ns, cp = str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")), str(conf["checkpoint_id"])
        if plan.kind == "replay":
            return claimed_value(self.dialect, (thread, ns), plan.ids)
        vtype, blob = self.serde.dumps_typed(plan.value)
        rows = [(thread, ns, iid, cp, self.guard_claimant, vtype, blob, time.time()) for iid in plan.ids]
        plain = not (isinstance(plan.value, dict) and set(plan.value) == set(plan.ids))
        write = self._resume_write(thread, ns, cp, vtype, blob) if plain and self.stores_resume_write else None
        if write is not None:
            self._guard_written[(thread, ns, cp)] = plan.value
        return claim(self.dialect, rows, write)

    def _resume_write(self, thread: str, ns: str, cp: str, vtype: str, blob: bytes) -> Row:
        """The row of LangGraph's own resume write, as the stock saver's write statement takes it."""
        return (thread, ns, cp, NULL_TASK_ID, "", WRITES_IDX_MAP[RESUME], RESUME, vtype, blob)

    def _guard_outcome(self, tup: CheckpointTuple, plan: Plan, result: Any) -> CheckpointTuple:
        conf = tup.config["configurable"]
        if plan.kind == "claim":
            if result is not None:  # the holder of a conflicting claim
                self._guard_written.pop((str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")),
                                         str(conf["checkpoint_id"])), None)
                self.claims_refused += 1
                raise ResumeRefused(str(conf["thread_id"]), str(conf.get("checkpoint_id")),
                                    f"interrupt {', '.join(plan.ids)} was already consumed by {result[0]} "
                                    f"at checkpoint {result[1]}", interrupt_ids=plan.ids, claimant=result[0],
                                    kind="consumed")
            self.claims_made += 1
            plan.invocation.make_durable()
            return tup
        if result is None:  # replay: nothing was claimed, the run parks again
            return tup
        plan.invocation.make_durable()
        value = self.serde.loads_typed(result)
        return tup._replace(pending_writes=[*(tup.pending_writes or ()), (NULL_TASK_ID, RESUME, value)])

    def _guard_refuse(self, tup: CheckpointTuple | None, plan: Plan, config: RunnableConfig) -> NoReturn:
        self.claims_refused += 1
        conf = (tup.config if tup is not None else config)["configurable"]
        raise ResumeRefused(str(conf["thread_id"]), str(conf.get("checkpoint_id")), plan.reason,
                            interrupt_ids=plan.ids, kind=plan.kind_of_refusal, claimant=plan.claimant)

    # ---- state lost behind a claim (a saver rolled back, e.g. by a power loss, while the claim store kept its claim)
    def _guard_thread_claims(self, config: RunnableConfig) -> Procedure:
        conf = config["configurable"]
        return thread_claims(self.dialect, (str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))))

    def _guard_state_lost(self, plan: Plan, config: RunnableConfig, claims: Sequence[Claim]) -> None:
        """A resume or a recovery of a thread the saver holds no checkpoint of: if the claim store holds claims of
        it, the state behind them was lost; refuse, naming the claims and the recovery (kind ``state_lost``)."""
        if not claims:
            return  # never claimed: the plain refusal (a resume) or LangGraph's own error (a recovery)
        last = claims[-1]
        ids = [c[2] for c in claims if c[1] == last[1]]
        plan.kind, plan.kind_of_refusal, plan.ids, plan.claimant = "refuse", "state_lost", ids, last[0]
        plan.reason = (f"{STATE_LOST_REASON}interrupt {', '.join(ids)} was consumed by {last[0]} at checkpoint {last[1]}, "
                       f"and the saver holds no checkpoint of this thread any more (its store was rolled back behind "
                       f"the claim, e.g. by a power loss, or the thread was deleted without its claims)")
        self._guard_refuse(None, plan, config)

    def _guard_adopt(self, tup: CheckpointTuple, plan: Plan, claims: Sequence[Claim],
                     history: Sequence[CheckpointTuple]) -> Procedure | None:
        """A recovery (``invoke(None)``) of a park whose interrupts were never claimed, on a thread whose claims
        outlived their checkpoints: the run was started again after its state was lost, and this park is the
        consumed one's successor.  The procedure that claims this park's interrupts with the lost park's value and
        claimant (a claim re-keyed to the restarted run: a later resend is refused, a crash is recovered with
        the same value) and returns that value; None when nothing is to be handed on.

        Handed on only when the saver holds the thread's whole history (its input checkpoint, step -1): a pruned
        or shallow history also lacks the checkpoints of claims, and its later parks must not inherit them.  A
        lost resume map (values keyed by the lost interrupt ids) is not handed on (the run parks again)."""
        if not claims or not any((h.metadata or {}).get("step") == -1 for h in history):
            return None
        park = lost_park(claims, {str(h.config["configurable"]["checkpoint_id"]) for h in history})
        if not park:
            return None
        conf = tup.config["configurable"]
        thread, ns, cp = str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")), str(conf["checkpoint_id"])
        return adopt(self.dialect, (thread, ns), [c[2] for c in park], park[0][0], plan.ids, cp, self.serde)

    def _guard_unparked(self, tup: CheckpointTuple) -> Procedure:
        conf = tup.config["configurable"]
        return latest_claim(self.dialect, (str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))))

    def _guard_refuse_unparked(self, tup: CheckpointTuple, plan: Plan, latest: Any) -> NoReturn:
        """A resume of a checkpoint with no interrupt: the run went on after a claim (finished, or its claimant
        crashed and ``invoke(None)`` continues it), or nothing was ever parked on the thread."""
        if latest is None:
            plan.reason = ("no interrupt is parked at this checkpoint and none was ever claimed on this thread "
                           "(LangGraph would record the resume value and never consult it)")
            plan.kind_of_refusal = "not_parked"
        else:
            claimant, checkpoint, interrupt_id = latest
            plan.reason = (f"no interrupt is parked at this checkpoint: interrupt {interrupt_id} was consumed by "
                           f"{claimant} at checkpoint {checkpoint} and the run went on from there")
            plan.kind_of_refusal = "continued"
            plan.ids = [str(interrupt_id)]
        self.claims_refused += 1
        conf = tup.config["configurable"]
        raise ResumeRefused(str(conf["thread_id"]), str(conf.get("checkpoint_id")), plan.reason,
                            interrupt_ids=plan.ids, kind=plan.kind_of_refusal,
                            claimant=None if latest is None else str(latest[0]))

    def _guard_skip_write(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str) -> bool:
        """True for LangGraph's resume write when the claim transaction already stored it."""
        if task_id != NULL_TASK_ID or not writes or any(c != RESUME for c, _v in writes):
            return False
        conf = config["configurable"]
        key = (str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")), str(conf.get("checkpoint_id")))
        return key in self._guard_written and self._guard_written.pop(key) is writes[0][1]

    def _guard_check_checkpoint(self, checkpoint: Checkpoint) -> None:
        if self.guard_schema is not None:
            self.guard_schema.check(checkpoint.get("channel_values", {}), "checkpoint " + str(checkpoint.get("id")))

    def _guard_check_writes(self, writes: Iterable[tuple[str, Any]], task_id: str) -> None:
        if self.guard_schema is not None:
            self.guard_schema.check(list(writes), f"the writes of task {task_id}")


class SyncGuard(ConsumeOnce):
    """The sync saver methods: get_tuple claims, put and put_writes check.  Needs ``_execute(sql, params)``."""

    def _run(self, proc: Procedure) -> Any:
        raise NotImplementedError

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        inv = loading_invocation()
        tup = super().get_tuple(config)
        plan = self._guard_plan(tup, inv, config)
        if plan is None:
            return tup
        if tup is None:  # a resume or a recovery of a thread with no checkpoint: did its claims outlive its state?
            self._guard_state_lost(plan, config, self._run(self._guard_thread_claims(config)))
            if plan.kind == "lost":
                return tup  # never claimed: LangGraph's own answer
        if plan.kind == "refuse":
            self._guard_refuse(tup, plan, config)
        assert tup is not None  # only a refusal is planned without a checkpoint
        if plan.kind == "unparked":
            self._guard_refuse_unparked(tup, plan, self._run(self._guard_unparked(tup)))
        result = self._run(self._guard_procedure(tup, plan))
        if plan.kind == "replay" and result is None:  # a park never claimed: is it a lost claim's successor?
            result = self._guard_replay_lost(tup, plan)
        return self._guard_outcome(tup, plan, result)

    def _guard_replay_lost(self, tup: CheckpointTuple, plan: Plan) -> Any:
        """The value of the lost park handed to this park (:meth:`ConsumeOnce._guard_adopt`), or None."""
        claims = self._run(self._guard_thread_claims(tup.config))
        if not claims:
            return None
        conf = tup.config["configurable"]
        history = list(self.list({"configurable": {"thread_id": conf["thread_id"],
                                                   "checkpoint_ns": conf.get("checkpoint_ns", "")}}))
        proc = self._guard_adopt(tup, plan, claims, history)
        return None if proc is None else self._run(proc)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        self._guard_check_checkpoint(checkpoint)
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        self._guard_check_writes(writes, task_id)
        if self._guard_skip_write(config, writes, task_id):
            return None
        return super().put_writes(config, writes, task_id, task_path)


class AsyncGuard(ConsumeOnce):
    """The async saver methods: aget_tuple claims, aput and aput_writes check.  Needs the coroutine ``_arun``."""

    async def _arun(self, proc: Procedure) -> Any:
        raise NotImplementedError

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        inv = loading_invocation()  # before the first await: the loop is on the stack only until then
        tup = await super().aget_tuple(config)
        plan = self._guard_plan(tup, inv, config)
        if plan is None:
            return tup
        if tup is None:  # as SyncGuard.get_tuple
            self._guard_state_lost(plan, config, await self._arun(self._guard_thread_claims(config)))
            if plan.kind == "lost":
                return tup
        if plan.kind == "refuse":
            self._guard_refuse(tup, plan, config)
        assert tup is not None  # only a refusal is planned without a checkpoint
        if plan.kind == "unparked":
            self._guard_refuse_unparked(tup, plan, await self._arun(self._guard_unparked(tup)))
        result = await self._arun(self._guard_procedure(tup, plan))
        if plan.kind == "replay" and result is None:
            result = await self._guard_areplay_lost(tup, plan)
        return self._guard_outcome(tup, plan, result)

    async def _guard_areplay_lost(self, tup: CheckpointTuple, plan: Plan) -> Any:
        claims = await self._arun(self._guard_thread_claims(tup.config))
        if not claims:
            return None
        conf = tup.config["configurable"]
        history = [h async for h in self.alist({"configurable": {"thread_id": conf["thread_id"],
                                                                 "checkpoint_ns": conf.get("checkpoint_ns", "")}})]
        proc = self._guard_adopt(tup, plan, claims, history)
        return None if proc is None else await self._arun(proc)

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        self._guard_check_checkpoint(checkpoint)
        return await super().aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        self._guard_check_writes(writes, task_id)
        if self._guard_skip_write(config, writes, task_id):
            return None
        return await super().aput_writes(config, writes, task_id, task_path)
