"""The nemesis on DBOS (issue 25 §4): DBOS 3.4 with its PostgreSQL system database, each resumer on a host of its own.

Three cells at k = 2 on ``dbos@3.4`` (its own locked environment, each resumer served by a hosted server that the
worker's warm env server forks and that enters the resumer's host): a partition and a store crash while the victim's call stands at ``after_resume_consumed`` inside
its env server, and a cut after the commit of DBOS's claim (its dequeue, ``UPDATE workflow_status SET status=...,
executor_id=...``).  Each is checked for the fault's own evidence, for verdicts that are the family's checkers on
the cell's history and agree with the effect ledger's count, and for what it leaves: no namespace, link, proxy,
postmaster, resumer or env server of the lab.  An env server that dies mid-call stops the cell in one line.

Needs root (namespaces), PostgreSQL 15's binaries and the dbos-3.4 environment (built on first use): skipped
without the first two, failed instead with ``DRIFTLAB_REQUIRE_NETNS=1`` (set by ``.ci/run``).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from runners.experiment import DriftlabError
from runners.resume import envs, hosts, nemesis, pgcluster
from test_nemesis import (_netns, _orphans, _parent, netns, reachable, run_nemesis_cells,  # noqa: F401
                         same_worker, shared_pg_untouched)  # the fixtures of tests/test_nemesis.py
from vocabulary.resume import CONSUME, DEFAULT_GRAPH, EFFECT, TRACE

pytestmark = pytest.mark.xdist_group("test_nemesis_dbos")  # one worker: its module-scoped cells run once

RUNTIME = "dbos@3.4"
FAULTS = ("partition", "cut_at_commit", "store_crash")


def _left_after(scratch: Path, timeout: float = 10.0) -> list[str]:
    """:func:`_left`, once what was killed has had ``timeout`` to go (a hosted server ends a moment after its
    resumer, when it reads the end of its socket)."""
    deadline = time.monotonic() + timeout
    while _left(scratch) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _left(scratch)


def _left(scratch: Path) -> list[str]:
    """What of this process's nemesis still exists: namespaces, links, postmasters, proxies, resumers, pause folders,
    this test worker's env servers whose parent is gone, and hosted servers (or calls) of this process's warm env server."""
    mine = os.getpid()
    out = [f"netns {n}" for n in _netns() if n.startswith(f"{hosts.PREFIX}{mine}-")]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    out += [f"link {m}" for m in re.findall(rf"^\d+: ({hosts.LINK_PREFIX}{mine}h\d+p?)[@:]", links, re.M)]
    out += [f"postmaster of {f}" for _, f in pgcluster._postgres_of(None) if f"{pgcluster.PREFIX}{mine}-" in f]
    out += [f"pause folder {p.name}" for p in scratch.glob("dlnem-pause-*")]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        parent = _parent(int(entry.name))
        if comm.startswith("dlnem-") and parent == mine:  # a proxy or resumer this process forked, still running
            out.append(f"{entry.name} {comm}")
        if "frameworks/protocol.py" in cmd and (parent in (None, 1) or not hosts._alive(parent)) and same_worker(
                int(entry.name)):
            out.append(f"env server {entry.name} without its parent")
        elif "frameworks/protocol.py" in cmd and parent != mine and _parent(parent) == mine:
            out.append(f"hosted server or call {entry.name} of the warm env server {parent}")
    return out + _orphans()


@pytest.fixture(scope="module")
def dbos_cells(netns, shared_pg_untouched) -> dict:  # noqa: F811 - the fixtures of tests/test_nemesis.py
    """One cell per fault of :data:`FAULTS` on DBOS, k = 2 (run once for the module, two at a time), and what each
    left."""
    scratch = Path(tempfile.mkdtemp(prefix="nemesis-dbos-test-"))
    os.chmod(scratch, 0o755)
    try:
        got = run_nemesis_cells([(RUNTIME, f) for f in FAULTS], scratch, _left_after)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {f: got[(RUNTIME, f)] for f in FAULTS}


def test_each_fault_lands_for_real_on_dbos(dbos_cells):
    ev = {f: dbos_cells[f][0]["EO"]["evidence"] for f in FAULTS}
    # the victim stood at its point inside its env server's call while its link was down
    assert re.search(r"link dn\d+h0 down at the victim's after_resume_consumed; healed after \d", ev["partition"])
    # the proxy saw DBOS's dequeue claim, forwarded its COMMIT, and cut the victim before the reply
    assert re.search(r"proxy cut the victim after it sent UPDATE \S*workflow_status SET status=\S+ executor_.* the "
                     r"server answered CommandComplete", ev["cut_at_commit"]), ev["cut_at_commit"]
    assert re.search(r"postmaster \d+ SIGKILLed at the victim's after_resume_consumed; restarted with crash recovery",
                     ev["store_crash"])
    assert dbos_cells["store_crash"][0]["EO"]["crashes"] == 1


def test_dbos_verdicts_are_the_checkers_on_the_history_and_agree_with_the_ledger(dbos_cells):
    """Each record's verdicts are the family's checkers run again on the cell's history; EO is invalid exactly when
    the ledger holds the gated effect more than once; the counts in the record are the history's."""
    from analysis.resume.checkers import check_all

    gated = DEFAULT_GRAPH.task(DEFAULT_GRAPH.names.index(DEFAULT_GRAPH.gated_node))
    for f in FAULTS:
        rows, history, _ = dbos_cells[f]
        assert history.meta.get("stores_read") is True
        again = check_all(history)
        assert {p: r.verdict.value for p, r in again.items()} == {p: r["verdict"] for p, r in rows.items()}, f
        fired = sum(1 for op in history.operations if op.name == EFFECT and op.value.get("task") == gated)
        consumed = sum(1 for op in history.operations if op.name == TRACE and op.value.get("kind") == CONSUME)
        assert rows["EO"]["effects_fired"] == fired and rows["EO"]["interrupt_consumed"] == consumed, f
        assert (rows["EO"]["verdict"] == "invalid") == (fired > 1), (f, fired, rows["EO"]["verdict"])
        calls = [op for op in history.operations if op.name in ("resume", "recover")]
        assert len(calls) == rows["EO"]["calls"].count("@h"), f  # every call the schedule made is in the history
        assert sum(op.status == "indeterminate" for op in calls) == rows["EO"]["indeterminate"], f


@pytest.mark.planted("analysis.resume.nemesis:_answers", "if r.interrupt_consumed_max >= 0:",
                     "if r.interrupt_consumed_max >= 10**6:")
def test_the_store_crash_answer_reads_the_consume_traces_not_the_later_answers(dbos_cells):
    """DBOS answers a resume sent after the interrupt was consumed with the run's state ('done'), not a refusal; the
    report's answer to "after the store's crash, is a consumed interrupt still consumed?" comes from the ledger's
    consume traces.  Bug class: the answer read from the later resumes' answers, which takes DBOS's 'done' for a
    second consumption."""
    from analysis.resume import nemesis as analysis

    rows, history, _ = dbos_cells["store_crash"]
    later = [c for c in rows["EO"]["calls"].split("; ") if "#1:" not in c and "/recover" not in c]
    assert any(c.split(": ", 1)[1].startswith("done") for c in later), rows["EO"]["calls"]  # DBOS's answer
    records = pd.DataFrame([{**r, "runtime": RUNTIME, "fault": "store_crash", "k": 2} for r in rows.values()])
    said = [a for a in analysis._answers(analysis.table(records)) if a.startswith("After the store's crash")]
    consumed = rows["EO"]["interrupt_consumed"]
    assert len(said) == 1
    if consumed <= 1:
        assert "still consumed: the interrupt node consumed a value once" in said[0], said[0]
    else:
        assert f"consumed again: the interrupt node consumed a value {consumed} times" in said[0], said[0]


def test_nothing_of_the_lab_is_left_after_each_dbos_cell(dbos_cells):
    for f in FAULTS:
        assert dbos_cells[f][2] == [], (f, dbos_cells[f][2])


def test_an_env_server_that_dies_mid_call_stops_the_cell_in_one_line(netns, shared_pg_untouched, reachable,  # noqa: F811
                                                                     monkeypatch):
    """The victim's env server (the hosted server its resumer calls, inside its host) is killed as the resume is
    sent: the cell stops with one line naming the environment, never a record; nothing of the lab is left."""
    real = envs.EnvServer.call

    def dies(self, request):
        if request.get("call") == "resume":  # really killed: the call then finds it gone
            self.kill()
        return real(self, request)

    monkeypatch.setattr(envs.EnvServer, "call", dies)  # inherited by the resumers this process forks
    with pytest.raises(DriftlabError) as err:
        nemesis.run_one(RUNTIME, "none", 2, reachable, 1)
    line = str(err.value)
    assert "\n" not in line and "environment dbos-3.4" in line and "exited" in line, line
    assert "a failure of the lab" in line and "/resume@h0#1" in line, line
    assert _left_after(reachable) == []


def _children(pid: int) -> list[int]:
    return [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit() and _parent(int(e.name)) == pid]


def _net(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


@pytest.mark.planted("driftlab_frameworks.protocol:Server._hosted",
                     "if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:", "if False:")
@pytest.mark.planted("driftlab_frameworks.protocol:Server.call", 'if got.endswith(b"W"):', 'if got.endswith(b"w"):')
@pytest.mark.planted("driftlab_frameworks.protocol:Server.host", 'if got != b"up\\n":',
                     'if self.hosted.append(pid) or got != b"up\\n":')
def test_a_hosted_server_calls_from_inside_its_host_and_its_call_dies_with_its_client(netns, reachable, tmp_path):
    """The hosted server a resumer calls (forked by the warm env server outside any host) and its call's process
    are in the resumer's host, so a partition cuts them (bug: a hosted server that never enters the host reaches
    the store around the partition); and when its client dies mid-call (a SIGKILLed resumer: its socket's end),
    the call's process is killed with it (bug: a call that outlives its resumer and writes after the cell has moved
    on).  The call hangs (LangGraph's adapter with a planted hang, ``tests/planted_adapters.py``).  A host that does
    not exist is one line, and the warm server serves the next request (bug: a failed hosted server kept on its
    list of hosted servers to reap, reaped twice)."""
    from dataclasses import replace

    from mechanisms.resume.frameworks import declared
    from vocabulary.resume import Backend, GraphSpec

    d = declared()["langgraph@1.2.24"]
    warm = envs.EnvServer(replace(d, name="planted-HangsInResume",
                                  adapter=f"{Path(__file__).parent / 'planted_adapters.py'}:HangsInResume"))
    try:
        with pytest.raises(envs.EnvError, match=r"host failed: the hosted server for dlnem-none did not start"):
            envs.host(warm, "dlnem-none")  # no such namespace: one line, and the warm server serves on
        with hosts.Hosts(1) as hs:
            sock, pid = envs.host(warm, hs[0].netns)
            host_net = f"net:[{os.stat(f'/var/run/netns/{hs[0].netns}').st_ino}]"
            client = envs.HostedServer(d, sock, pid)
            req = {"runtime": d.name, "backend": Backend("sqlite", str(tmp_path), "hosted").to_dict(),
                   "graph": GraphSpec.from_dict(DEFAULT_GRAPH.to_dict()).to_dict(), "call": "resume",
                   "args": {"run_id": "r", "value": "v"}, "label": "hosted#1", "crash": None, "timeout": 60}
            client.requests.write(json.dumps(req) + "\n")
            client.requests.flush()
            deadline = time.monotonic() + 30
            while not _children(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            call = _children(pid)
            assert len(call) == 1, call
            assert _net(pid) == host_net and _net(call[0]) == host_net, (_net(pid), _net(call[0]), host_net)
            assert _net(warm.proc.pid) != host_net
            client.close()  # the resumer's end of the socket: as when it is SIGKILLed
            deadline = time.monotonic() + 10
            while (hosts._alive(call[0]) or hosts._alive(pid)) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not hosts._alive(call[0]) and not hosts._alive(pid), "the hosted call outlived its client"
    finally:
        warm.close()


@pytest.mark.planted("driftlab_frameworks.dbos:_alive", 'not in ("Z", "X")', 'not in ("X",)')
def test_a_killed_executor_not_yet_reaped_is_dead(tmp_path):
    """The DBOS adapter recovers a run PENDING on an executor whose process is gone (``recover_dead``); a process
    SIGKILLed and not yet reaped by its parent (a zombie) is gone: it runs no code and holds no connection.  Planted
    bug this catches: a zombie read as a live executor (``kill(pid, 0)`` succeeds on one), so a resume sent while
    the killed victim's parent has not reaped it waits out DBOS's 30 s for a run nobody will recover (the nemesis's
    SIGKILL cells answered 'parked' that way before 2026-12-06).  Run in the env's own Python, the adapter's plants
    applied as in an env server."""
    from test_prefect_template import PRELUDE

    script = PRELUDE.replace("prefect as P", "dbos as D") + """
import os, signal, time
live = os.fork()
if live == 0:
    time.sleep(60)
    os._exit(0)
zombie = os.fork()
if zombie == 0:
    os._exit(0)
reaped = os.fork()
if reaped == 0:
    os._exit(0)
os.waitpid(reaped, 0)
while open(f"/proc/{zombie}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
    time.sleep(0.01)
print(json.dumps([D._alive(f"driftlab-{p}") for p in (live, zombie, reaped)] + [D._alive("driftlab-x")]))
os.kill(live, signal.SIGKILL)
"""
    python = str(envs.ensure("dbos-3.4").python)
    out = subprocess.run([python, "-c", script, str(Path(envs.PROTOCOL))], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [True, False, False, False]
