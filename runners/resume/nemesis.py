"""``resume_nemesis``: resumers on separate hosts, and faults on the wire and in the store (issue 25).

Per cell (runtime x fault x k): k hosts (network namespaces, veth links;
``runners/resume/hosts.py``), a private PostgreSQL 15 cluster listening on the
links (``runners/resume/pgcluster.py``), and, for the wire faults, the lab's
protocol-aware proxy in front of the victim (``runners/resume/nemesis_proxy.py``).
The driver (this process, over the cluster's Unix socket) starts a run that
parks at its approval; then the schedule of ``faults/resume/nemesis.py``
plays: the victim (host 0) resumes and stops at its point, the fault lands,
the others resume, the fault heals, indeterminate callers re-send once, and
one recovery runs if the run is not done.  Every resume and recovery is its
own process, forked here and moved into its host's namespace (``setns``)
before it opens a connection: it reaches the store only over its link.  A
framework in its own environment (DBOS, paper profile) is called through a
hosted server: this worker's warm env server forks it, it enters the host
and serves that one resumer (``runners/resume/envs.py``, ``host``), so each
call is a fresh process in the host without a fresh interpreter per
resumer; the victim stops inside that server's call process, whose pause is
relayed back (``runners/resume/nemesis_envs.py``), and SIGSTOP / SIGKILL
land on it.

A call whose client lost its connection (psycopg's ``OperationalError`` of
class 08/57, or a framework that reports it as a failed call) is recorded
**indeterminate**: its client could not learn whether it landed.  The
history (calls, then the stores read by the driver) is judged by the
family's checkers (``analysis/resume/checkers.py``: unknown where the
evidence cannot decide); the record adds what the schedule saw: the fault's
own evidence (the postmaster's pid and its crash recovery, the statement the
proxy cut and what the server answered to it, how long the link was down),
whether the run was stuck before the recovery, and the gated effect's count.

A failure of the lab (a namespace, the cluster, the proxy, a resumer that
neither answers nor is blocked by the fault) is a ``DriftlabError``: never a
result.  Clean-up: each cell removes its hosts, proxy and cluster in
``finally``; a run killed by SIGKILL (or Ctrl-C, whose workers are SIGKILLed)
leaves them to the next run's :meth:`ResumeNemesis.prepare` (and this run's exit),
which removes what belongs to processes that are gone and names it in one line.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import re
import shutil
import signal
import time
import uuid
from pathlib import Path

from faults.resume.nemesis import COMBINED, FAULTS, FRAMEWORK_SUBJECTS, SUBJECTS, claim, fault
from mechanisms import resolve
from mechanisms.resume.framework import FrameworkCallFailed
from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, artifact, derive_seed
from runners.processes import fork_start, read_line
from runners.resume import hosts as hostlib
from runners.resume import nemesis_envs, pgcluster
from runners.resume.cells import Recorder, setup_backend
from runners.resume.nemesis_proxy import serve_child
from runners.resume.procs import build
from vocabulary import History
from vocabulary.resume import CHECKPOINT, CONSUME, DEFAULT_GRAPH, DONE, EFFECT, FAILED, PARKED, REFUSED, STORES_READ, \
    TRACE, Backend, GraphSpec, Status

READY = "ready"  # the pseudo-point a racer stops at, connected, before its resume (runners/resume/nemesis_hosts.py)
CALL_S = 60.0  # a resumer that neither answers nor is held by the fault in this time is a failure of the lab
OTHERS_S = 6.0  # how long the others get while the fault holds (a resumer blocked longer is recorded "blocked")
PROXY_PORT_OFFSET = 1
VALUE = "approved"
QUICK_SUBJECTS = ("langgraph+guard", "langgraph")
REPETITIONS = {"quick": 1, "paper": 3}  # per profile; ``--repetitions`` overrides
#: a framework that reports a lost connection as a failed call (LangGraph's adapters do): the call's reason
LOST = re.compile(r"OperationalError|server closed the connection|connection (is )?(lost|closed|broken)|"
                  r"terminating connection|consuming input failed|could not receive data", re.I)


def requirements() -> str:
    return hostlib.requirements() or pgcluster.requirements()


def sweep() -> list[str]:
    """Remove every leftover of a run that is gone (hosts, links, clusters); one line each."""
    out = [f"removed {item}" for item in hostlib.sweep()]
    out += [f"stopped and removed the private cluster {f}" for f in pgcluster.sweep()]
    return out


def _say_swept() -> None:
    gone = sweep()
    if gone:
        print("resume_nemesis: " + "; ".join(gone) + " (left by a run that was killed)", flush=True)  # or by its own killed workers


# ------------------------------------------------------------------------------------------- the resumer process
class _PauseAt:
    """The resumer's hook: at the fault's point, say so on the pipe and wait for the parent's go."""

    def __init__(self, op: str, pause, wfd: int, rfd: int):
        self.op, self.pause, self.wfd, self.rfd = op, tuple(pause) if pause else None, wfd, rfd

    def point(self, name: str, run_id: str, step: int, node: str) -> None:
        if self.pause is not None and (name, node) == self.pause:
            self.hold({"at": name, "t": time.time()})

    def hold(self, said: dict) -> None:
        """Say ``said`` to the parent (where and when this resumer stopped) and wait for its go."""
        self.pause = None
        os.write(self.wfd, (json.dumps(said) + "\n").encode())
        read_line(self.rfd, CALL_S * 3)


def _resumer(netns: str, runtime: str, backend: dict, graph: dict, call: str, run: str, label: str, pause,
             wfd: int, rfd: int, pause_dir: str | None = None, hosted=None) -> None:
    """One call from one host (forked child): enter the host, build the runtime, call, answer on ``wfd``.

    A framework runtime's call runs in ``hosted`` (socket, pid): the hosted server the parent's warm env server
    forked for this host (``runners/resume/envs.py``, :func:`~runners.resume.envs.host`); its pause is relayed
    from there (``runners/resume/nemesis_envs.py``) into ``pause_dir``."""
    from runners.plugins import describe, is_store_fault, refusals_of

    hostlib.enter(netns)
    if hosted is not None:
        from runners.resume import envs

        envs.attach(runtime, *hosted)
    # psycopg warns on stderr ("error ignored terminating <Pipeline>") when a connection the proxy cut is closed:
    # that cut is the fault itself, recorded in the cell's evidence and history, not news for the user's terminal
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, f"dlnem-{netns[-2:]}".encode(), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    answer: dict = {"pid": os.getpid()}
    start = time.time()
    relay = None
    try:
        hooks = _PauseAt(label, pause, wfd, rfd)
        rt, attempts = _connect(runtime, backend, graph, hooks)
        if attempts > 1:
            answer["connect_attempts"] = attempts
        if pause and tuple(pause) != (READY, "") and nemesis_envs.is_framework(runtime):
            relay = nemesis_envs.Relay(rt, tuple(pause), Path(pause_dir), hooks.hold, CALL_S * 3)
        if pause and tuple(pause) == (READY, ""):  # a race: connected, wait for the start signal with the others
            rt.hooks.point(READY, run, 0, "")
        start = time.time()
        st = rt.resume(run, VALUE) if call == "resume" else rt.recover(run)
        answer["status"] = st.to_dict()
        if st.state == FAILED and LOST.search(st.reason or "") and not nemesis_envs.definite(runtime, st.reason):
            answer["indeterminate"] = st.reason
    except DriftlabError as exc:  # the lab's own failure (an env server that died or hung): never an outcome
        answer["lab"] = str(exc)
    except FrameworkCallFailed as exc:  # the env server's own verdict on the call
        if nemesis_envs.LAB_CODE in str(exc):  # the lab's node code raised in the env: its failure, never an outcome
            answer["lab"] = str(exc)
        elif LOST.search(str(exc)):  # the adapter's call lost its connection: its client cannot know the outcome
            answer["indeterminate"] = describe(exc)
        else:
            answer["error"] = describe(exc)
    except Exception as exc:  # noqa: BLE001 - sorted below: a refusal, a lost connection, or the runtime's failure
        rt_cls = None
        try:
            from mechanisms import resolve

            rt_cls = resolve(runtime, "resume")
        except Exception:  # noqa: BLE001
            pass
        if rt_cls is not None and isinstance(exc, refusals_of(rt_cls)):
            answer["status"] = Status(run, REFUSED, reason=describe(exc)).to_dict()
        elif is_store_fault(exc) or LOST.search(describe(exc)):
            answer["indeterminate"] = describe(exc)
        else:
            answer["error"] = describe(exc)
    finally:
        if relay is not None:
            relay.close()
    answer.update(start=start, end=time.time())
    os.write(wfd, (json.dumps(answer, default=str) + "\n").encode())


CONNECT_ATTEMPTS, CONNECT_BACKOFF_S = 20, 0.5


def _connect(runtime: str, backend: dict, graph: dict, hooks):
    """Build the runtime (it connects), trying again while the store cannot be reached, as a client does:
    connecting is not the call, so a refused or unreachable connection is never recorded as one.  Bounded:
    :data:`CONNECT_ATTEMPTS` tries, :data:`CONNECT_BACKOFF_S` apart; the last failure propagates."""
    from runners.plugins import is_store_fault

    for attempt in range(1, CONNECT_ATTEMPTS + 1):
        try:
            return build(runtime, Backend(**backend), GraphSpec.from_dict(graph), hooks), attempt
        except Exception as exc:  # noqa: BLE001 - only a store that cannot be reached is tried again
            if not is_store_fault(exc) or attempt == CONNECT_ATTEMPTS:
                raise
            time.sleep(CONNECT_BACKOFF_S)
    raise AssertionError("unreachable")


class _Call:
    """A resumer process as the parent sees it: its pipes, what it said, when."""

    def __init__(self, netns: str, runtime: str, backend: Backend, graph: GraphSpec, call: str, run: str,
                 label: str, pause=None, pause_dir: Path | None = None):
        self.label, self.call = label, call
        hosted = None
        if nemesis_envs.is_framework(runtime):  # its warm env server forks a server for this host (outside it)
            from runners.resume import envs

            hosted = envs.host(envs.server(runtime), netns)
        r1, self.w = os.pipe()  # parent -> child: go
        self.r, w2 = os.pipe()  # child -> parent: at / answer
        self.pid = fork_start(_resumer, (netns, runtime, backend.to_dict(), graph.to_dict(), call, run, label, pause,
                                         w2, r1, str(pause_dir) if pause_dir else None, hosted))
        os.close(r1)
        os.close(w2)
        if hosted is not None:
            hosted[0].close()  # the resumer holds the only client end: its death ends the hosted server
        self.at: dict | None = None
        self.answer: dict | None = None
        self.ended = False  # its pipe closed before it answered
        self.started = time.time()

    def wait_at(self, timeout: float) -> dict | None:
        line = read_line(self.r, timeout)
        if not line.endswith(b"\n"):
            return None
        msg = json.loads(line)
        if "at" in msg:
            self.at = msg
            return msg
        self.answer = msg  # it answered without reaching its point
        return None

    @property
    def holder(self) -> int:
        """The process that holds the call's connections at its point: a framework's call process in its env server
        (its pid said with the pause), else the resumer itself."""
        return int((self.at or {}).get("pid") or self.pid)

    def go(self) -> None:
        try:
            os.write(self.w, b"go\n")
        except OSError:
            pass

    def result(self, timeout: float) -> dict | None:
        if self.answer is None:
            line = read_line(self.r, timeout)
            if line.endswith(b"\n"):
                self.answer = json.loads(line)
            elif not line.endswith(b"T"):  # its pipe closed: the process ended without answering
                self.ended = True
        return self.answer

    def silence(self, timeout: float) -> str:
        """Why :meth:`result` got no answer, for the lab's one-line error: the process's end (with its exit code)
        or the time it was given."""
        if not self.ended:
            return f"gave no answer in {timeout:g} s"
        for _ in range(100):  # its exit, read without reaping it (close() reaps it: its pid stays ours till then)
            try:
                info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                break
            if info is not None:
                code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
                return f"ended without an answer (exit code {code})"
            time.sleep(0.01)
        return "closed its pipe without an answer"

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGCONT)
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        for fd in (self.r, self.w):
            try:
                os.close(fd)
            except OSError:
                pass


class _ProxyProc:
    """The proxy process in front of one host (``runners/resume/nemesis_proxy.py``)."""

    def __init__(self, listen: tuple[str, int], upstream: str, mode: str, trigger: str, at: str, delay_ms: float):
        self.r, w = os.pipe()
        self.pid = fork_start(serve_child, (listen, upstream, mode, trigger, at, delay_ms, w, 600.0))
        os.close(w)
        up = read_line(self.r, 10)
        if up != b"up\n":
            self.close()
            raise DriftlabError(f"resume_nemesis: the proxy on {listen[0]}:{listen[1]} did not start ({up!r})")

    def events(self, timeout: float) -> list[dict]:
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = read_line(self.r, max(0.0, min(0.2, deadline - time.monotonic())))
            if line.endswith(b"\n"):
                out.append(json.loads(line))
                if "cut" in out[-1]:
                    break
            elif not line.endswith(b"T"):
                break
        return out

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        try:
            os.close(self.r)
        except OSError:
            pass


# ------------------------------------------------------------------------------------------------- one cell
def run_one(runtime: str, fault_name: str, k: int, scratch: Path, seed: int, rep: int = 0,
            rec: Recorder | None = None) -> tuple[list[dict], History]:
    """One repetition of a nemesis cell (module docstring): its records (one per property) and the history so
    far (``rec``: the cell's recorder, shared by its repetitions; each repetition's run is ``nem-<fault>-<rep>``)."""
    f = fault(fault_name)
    graph = DEFAULT_GRAPH
    gated = graph.task(graph.names.index(graph.gated_node))
    run = f"nem-{fault_name}-{rep}"
    if rec is None:
        rec = Recorder(graph, {"experiment": "resume_nemesis", "runtime": runtime, "fault": fault_name, "k": k,
                               "backend": "postgres"})
    rec.runs = [run]
    first = len(rec.ops)
    evidence: list[str] = []
    calls: list[_Call] = []
    proxy = None
    with hostlib.Hosts(k) as hs, pgcluster.Cluster(scratch, [h.store_addr for h in hs.hosts], uuid.uuid4().hex[:6]) as pg:
        ns = "nem"
        local = Backend("postgres", pg.dsn(), ns)

        def at_host(i: int, port: int | None = None) -> Backend:
            dsn = pg.dsn(hs[i].store_addr)
            if port:
                dsn = dsn.replace(f"port={pg.port}", f"port={port}")
            return Backend("postgres", dsn, ns)

        try:
            setup_backend(runtime, local, graph)
            driver = build(runtime, local, graph)
            t0 = time.time()
            try:
                st = driver.start(run, "order-1")
            finally:
                driver.close()
            rec.add("driver", "start", "ok" if st.state == PARKED else "fail", t0, time.time(),
                    {"run": run, "op": f"{run}/start", "state": st.state, "group": run})
            if st.state != PARKED:
                raise DriftlabError(f"resume_nemesis: {runtime}: the run did not park before the fault ({st.state})")
            victim_backend = at_host(0)
            if f.proxy:
                port = pg.port + PROXY_PORT_OFFSET
                c = claim(runtime)
                proxy = _ProxyProc((hs[0].store_addr, port), pg.socket,
                                   f.proxy, c.pattern, c.at, f.delay_ms)
                victim_backend = at_host(0, port)
                evidence.append(f"victim dials the proxy at {hs[0].store_addr}:{port}")

            def launch(i: int, call: str = "resume", pause=None, backend: Backend | None = None) -> _Call:
                label = f"{run}/{call}@h{i}#{len(calls) + 1}"
                c = _Call(hs[i].netns, runtime, backend or at_host(i), graph, call, run, label, pause,
                          scratch / f"dlnem-pause-{os.getpid()}-{uuid.uuid4().hex[:6]}" if pause else None)
                calls.append(c)
                return c

            # 1. the victim resumes (and stops at its point, if the fault has one)
            victim = launch(0, pause=f.pause, backend=victim_backend)
            if f.pause and victim.wait_at(CALL_S) is None and victim.answer is None:
                raise DriftlabError(f"resume_nemesis: {envs_where(runtime)}{runtime}: the victim neither reached "
                                    f"{f.pause[0]} nor answered in {CALL_S:g} s")
            _lab_failed(runtime, [victim])
            if f.pause and victim.at is None:  # the fault would not land: never recorded as a cell
                raise DriftlabError(f"resume_nemesis: {runtime}: the victim answered before reaching {f.pause[0]} "
                                    f"({_said_status(victim.answer or {})}): {f.name} could not land")
            # 2. the fault lands
            healed_at = None
            if f.kind == "partition" and victim.at:
                hs.down(0)
                evidence.append(f"link {hs[0].link} down at the victim's {f.pause[0]}")
            elif f.kind == "store_crash" and victim.at:
                pid = pg.crash()
                pg.restart()
                evidence.append(f"postmaster {pid} SIGKILLed at the victim's {f.pause[0]}; restarted"
                                + (" with crash recovery" if pg.recovered() else ""))
            elif f.kind == "client_paused" and victim.at:
                os.kill(victim.holder, signal.SIGSTOP)
                evidence.append(f"victim pid {victim.holder} SIGSTOPped at {f.pause[0]}"
                                + (f" (its call's process in the env server of resumer {victim.pid})"
                                   if victim.holder != victim.pid else ""))
            elif f.proxy in ("cut", "drop"):
                victim.result(CALL_S)
                events = proxy.events(DRAIN_WAIT_S)
                cuts = [e for e in events if "cut" in e]
                if cuts and f.proxy == "drop":
                    evidence.append(f"proxy dropped the commit of {_short(cuts[0]['cut'])} and closed both sides: "
                                    "the store never received it")
                elif cuts:
                    said = ", ".join(cuts[0]["server_said"]) or "nothing before the drain ended"
                    evidence.append(f"proxy cut the victim after it sent {_short(cuts[0]['cut'])} and its commit; "
                                    f"the server answered {said}, which the victim never saw")
                else:  # the declared claim statement never came: a declaration that does not fit, not a result
                    raise DriftlabError(f"resume_nemesis: {runtime}: the proxy never saw the victim commit "
                                        f"{claim(runtime).pattern!r}: the cut could not land ({_said(victim)})")
                a = victim.answer or {}
                if a.get("start") and a.get("end"):  # how long the victim went on not knowing (DBOS: it waits)
                    evidence.append(f"the victim's call answered "
                                    f"{'indeterminate' if 'indeterminate' in a else _said_status(a)[:40]} "
                                    f"{a['end'] - a['start']:.1f} s after it was made")
            elif f.proxy == "slow":
                evidence.append(f"the proxy held every reply to the victim {f.delay_ms:g} ms")
                time.sleep(f.stagger_s)
            if f.kill and victim.at:  # combined: the victim dies at its point while the fault holds
                holder = victim.holder
                if holder != victim.pid:  # a framework's call process first, so that nobody sees its executor alive
                    _kill_gone(holder)
                os.kill(victim.pid, signal.SIGKILL)
                os.waitpid(victim.pid, 0)
                victim.answer = {"indeterminate": f"SIGKILL at {f.pause[0]} of {f.pause[1]}", "pid": victim.pid,
                                 "start": victim.started, "killed_by": 9}
                evidence.append(f"victim pid {holder} SIGKILLed at {f.pause[0]}")
            # 3. the others resume
            others = [launch(i) for i in range(1, k)]
            blocked = []
            deadline = time.monotonic() + OTHERS_S
            for o in others:
                if o.result(max(0.0, deadline - time.monotonic())) is None:
                    blocked.append(o)
            # 4. the fault heals; the victim goes on
            if f.kind == "partition" and victim.at:
                time.sleep(max(0.0, f.heal_s - (time.time() - victim.at["t"])))
                hs.up(0)
                healed_at = time.time()
                evidence.append(f"healed after {healed_at - victim.at['t']:.1f} s")
            elif f.kind == "client_paused" and victim.at:
                time.sleep(max(0.0, f.heal_s - (time.time() - victim.at["t"])))
                if not f.kill:
                    os.kill(victim.holder, signal.SIGCONT)
                healed_at = time.time()
                evidence.append(("SIGCONT" if not f.kill else "the pause ended (the victim was already killed)")
                                + f" after {healed_at - victim.at['t']:.1f} s")
            if victim.at and not f.kill:
                victim.go()
            for c in [victim, *others]:
                if c.result(CALL_S) is None:
                    raise DriftlabError(f"resume_nemesis: {envs_where(runtime)}{runtime}: {c.label} "
                                        f"{c.silence(CALL_S)}")
            _lab_failed(runtime, [victim, *others])
            if blocked:
                evidence.append(f"{len(blocked)} other(s) blocked until the fault healed")
            # 5. indeterminate callers re-send once, from a fresh process on the same host
            for c in [victim, *others]:
                if "indeterminate" in c.answer:
                    i = int(c.label.rsplit("@h", 1)[1].split("#")[0])
                    retry = launch(i)
                    if retry.result(CALL_S) is None:
                        raise DriftlabError(f"resume_nemesis: {envs_where(runtime)}{runtime}: the retry {retry.label} "
                                            f"{retry.silence(CALL_S)}")
            # 6. the documented recovery if the run is not done
            state_before = _state(runtime, local, graph, pg, run)
            stuck = state_before != DONE
            if stuck:
                rec_call = launch(0, "recover")
                if rec_call.result(CALL_S) is None:
                    raise DriftlabError(f"resume_nemesis: {envs_where(runtime)}{runtime}: the recovery "
                                        f"{rec_call.silence(CALL_S)}")
            final = _state(runtime, local, graph, pg, run) if stuck else state_before
            _lab_failed(runtime, calls)
            for c in calls:
                _record(rec, c, run)
            errors = [c for c in calls if "error" in c.answer]
            if errors:
                raise DriftlabError(f"resume_nemesis: {runtime}: {errors[0].label} raised {errors[0].answer['error']}"
                                    " (the runtime's own code failed: never an outcome)")
            _finish(rec, runtime, local, graph, run, pg)
            history = History(rec.history().family, tuple(rec.ops[first:]), rec.history().meta)
        finally:
            for c in calls:
                c.close()
            if proxy is not None:
                proxy.close()
            for folder in scratch.glob(f"dlnem-pause-{os.getpid()}-*"):
                shutil.rmtree(folder, ignore_errors=True)
    from analysis.resume.checkers import check_all

    results = check_all(history)
    effects = sum(1 for op in history.operations if op.name == EFFECT and op.value.get("task") == gated)
    consumed = sum(1 for op in history.operations if op.name == TRACE and op.value.get("kind") == CONSUME)
    calls_said = "; ".join(_said(c) for c in calls)
    record = {"repetition": rep, "seed": seed, "effects_fired": effects, "interrupt_consumed": consumed,
              "stuck_before_recovery": stuck,
              "state_before_recovery": state_before, "state_after_recovery": final,
              "indeterminate": sum(1 for c in calls if "indeterminate" in c.answer),
              "refused": sum(1 for c in calls if c.answer.get("status", {}).get("state") == REFUSED),
              "served": sum(1 for c in calls if c.answer.get("status", {}).get("state") in (PARKED, DONE)),
              "evidence": "; ".join(evidence) or "-", "calls": calls_said, "processes": len(calls) + 1,
              "crashes": pg.crashes}
    rows = []
    for prop, r in results.items():
        rows.append({**record, "property": prop, "verdict": r.verdict.value,
                     "witness": r.witnesses[0].explanation if r.witnesses else ""})
    return rows, rec.history()


DRAIN_WAIT_S = 12.0


def envs_where(runtime: str) -> str:
    """``"environment E, adapter A: "`` for a framework runtime, naming where a hung or dead call ran; else ""."""
    if not nemesis_envs.is_framework(runtime):
        return ""
    from runners.resume.envs import where

    return where(runtime)


def _lab_failed(runtime: str, calls: list) -> None:
    """Stop the cell with one line if a call failed for the lab's own reason (its env server died or hung)."""
    for c in calls:
        if c.answer and "lab" in c.answer:
            raise DriftlabError(f"resume_nemesis: {runtime}: {c.label}: {c.answer['lab']} (a failure of the lab, "
                                "never a result)")


def _kill_gone(pid: int, timeout: float = 10.0) -> None:
    """SIGKILL ``pid`` (not a child of this process: a framework's call process) and wait until it is gone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while hostlib._alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    if hostlib._alive(pid):
        raise DriftlabError(f"resume_nemesis: the victim's call process {pid} outlived its SIGKILL for {timeout:g} s")


def _short(sql: str) -> str:
    return " ".join(sql.split())[:60] + ("..." if len(" ".join(sql.split())) > 60 else "")


def _said(c: _Call) -> str:
    a = c.answer or {}
    if "indeterminate" in a:
        return f"{c.label}: indeterminate ({a['indeterminate'][:80]})"
    if a.get("connect_attempts"):
        return f"{c.label}: " + _said_status(a) + f" (connected at attempt {a['connect_attempts']})"
    return f"{c.label}: " + _said_status(a)


def _said_status(a: dict) -> str:
    if "status" in a:
        s = a["status"]
        return s["state"] + (f" ({s['reason'][:80]})" if s.get("reason") else "")
    return a.get("error", "no answer")


def _record(rec: Recorder, c: _Call, run: str) -> None:
    a = c.answer or {}
    value = {"run": run, "op": c.label, "group": run, "pid": a.get("pid")}
    if c.call == "resume":
        value["resume"] = VALUE
    if "indeterminate" in a:
        rec.add(c.label.split("/")[1].split("#")[0], c.call, "indeterminate", a.get("start"), None,
                {**value, "note": a["indeterminate"]})
        return
    s = a.get("status") or {}
    rec.add(c.label.split("/")[1].split("#")[0], c.call, "ok" if s.get("state") in (PARKED, DONE) else "fail",
            a.get("start"), a.get("end"), {**value, "state": s.get("state"), "reason": s.get("reason", ""),
                                           "head": s.get("checkpoint")})


def _fresh(local: Backend, pg) -> Backend:
    """The driver's backend with a DSN of its own after each crash (a connection cached before it is dead)."""
    return Backend(local.kind, local.location + f" application_name=dlnem-driver-{pg.crashes}", local.namespace)


def _state(runtime: str, local: Backend, graph: GraphSpec, pg, run: str) -> str:
    rt = build(runtime, _fresh(local, pg), graph)
    try:
        return rt.state(run).state
    finally:
        rt.close()


def _finish(rec: Recorder, runtime: str, local: Backend, graph: GraphSpec, run: str, pg) -> History:
    rt = build(runtime, _fresh(local, pg), graph)
    try:
        now = time.time()
        for cp in rt.checkpoints(run):
            rec.add("store", CHECKPOINT, "ok", now, now, cp.to_dict())
        for e in rt.ledger.effects(run):
            rec.add("ledger", EFFECT, "ok", e.at, e.at, e.to_dict())
        for t in rt.ledger.traces(run):
            rec.add("ledger", TRACE, "ok", t.at, t.at, t.to_dict())
        rec.meta[STORES_READ] = True
    finally:
        rt.close()
    return rec.history()


# --------------------------------------------------------------------------------------------- the experiment
class ResumeNemesis(Experiment):
    name = "resume_nemesis"
    family = "resume"
    description = "the nemesis: resumers on k hosts (netns), partition, cut at commit, slow store, store crash, pause"
    artifacts = (artifact("resume_nemesis", findings=True),)
    seconds_per_execution = 4.0
    parallel = True
    #: two waiting workers per job: a waiting cell sleeps out its fault or DBOS's waits, so a second one beside it
    #: costs little CPU (paper profile, 2026-12-06: 485 and 479 s -> 362 and 368 s for the same CPU; docs/nemesis.md)
    waiting_workers_per_job = 2
    profile_repetitions = REPETITIONS

    def check(self, options: Options) -> None:
        if self.skipped(options, requirements(), "network namespaces and a private PostgreSQL"):
            return
        for rt in SUBJECTS:  # imported once here, before the workers fork, rather than once per worker (0.6 s each)
            resolve(rt, "resume")
        for rt in options.mechanisms_for("resume") or ():
            claim(rt)
            if nemesis_envs.unpausable(rt):
                raise DriftlabError(f"resume_nemesis: {nemesis_envs.unpausable(rt)}")

    def prepare(self, options: Options) -> None:
        if requirements():
            return
        _say_swept()
        atexit.register(_say_swept)  # workers SIGKILLed by Ctrl-C leave theirs: removed when this process exits

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        if requirements():
            return []  # said in check(): skipped in a larger selection, refused when named
        subjects = options.mechanisms_for("resume") or (QUICK_SUBJECTS if profile == "quick"
                                                         else (*SUBJECTS, *FRAMEWORK_SUBJECTS))
        ks = (2,) if profile == "quick" else (2, 4, 8)
        reps = options.extra.get("repetitions") or REPETITIONS[profile]
        if reps < 1:
            raise DriftlabError(f"--repetitions must be at least 1, got {reps}")
        return [Cell(self.name, (("runtime", rt), ("fault", f.name), ("k", k)), reps, seed)
                for rt in subjects for k in ks for f in (FAULTS if profile == "quick" else (*FAULTS, *COMBINED))]

    def waits(self, cell: Cell, options: Options) -> bool:
        """A fault that holds for a set time (``heal_s``: the partition, the paused client) is mostly asleep: its
        cell runs in a worker of its own beside the others.  Its verdicts come from the claim the victim holds, not
        from how fast the others go: they have the 3 s for a resume that takes milliseconds (4 ms in a quick run
        on 2026-12-05).  A framework's cells (DBOS) are mostly asleep whatever the fault: its other resumers block
        on the claim the stopped victim holds for their :data:`OTHERS_S`, its cut victim waits out DBOS's 30 s and
        its slow-store victim about 22 s (one repetition of its 33 paper cells: about 300 s of cells for 132
        core-seconds, 2026-12-06).  Where k resumers race with no claim that holds through the fault (stock
        LangGraph, REMIT; paper profile) the verdicts are a draw of that race in either lane (docs/nemesis.md)."""
        return fault(cell.p["fault"]).heal_s > 0 or nemesis_envs.is_framework(cell.p["runtime"])

    def run_cell(self, cell: Cell, options: Options) -> CellOutput:
        p = cell.p
        scratch = Path(options.run_dir or "/tmp") / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        rows, history = [], None
        rec = Recorder(DEFAULT_GRAPH, {"experiment": self.name, "runtime": p["runtime"], "fault": p["fault"],
                                       "k": int(p["k"]), "backend": "postgres"})
        for rep in range(cell.repetitions):
            seed = derive_seed(cell.seed, self.name, p["runtime"], p["fault"], p["k"], rep)
            try:
                mine, history = run_one(p["runtime"], p["fault"], int(p["k"]), scratch, seed, rep, rec)
            except (hostlib.HostsError, pgcluster.ClusterError) as exc:
                raise DriftlabError(f"resume_nemesis: the lab's set-up failed: {exc}") from None
            rows += mine
        return CellOutput({k: [r[k] for r in rows] for k in rows[0]}, history)

