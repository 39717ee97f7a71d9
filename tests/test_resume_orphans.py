"""No orphan processes, even when the experiment itself is SIGKILLed.

Catches a runner whose children outlive it (planted bug: forking racers or
the fork server's call children without parent-death handling): a script
holding k = 4 warm racers, the fork server and a call child that never
returns is SIGKILLed, and psutil must find none of its descendants alive.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil

from mechanisms.resume.sequencer import Sequencer

SCRIPT = textwrap.dedent("""
    import sys, tempfile, threading, time
    from vocabulary.resume import Backend, DEFAULT_GRAPH
    from runners.resume.cells import setup_backend
    from runners.resume.procs import ForkedExecutor, RacerPool
    d = tempfile.mkdtemp(dir=sys.argv[1]); b = Backend("sqlite", d, "t")
    setup_backend("sequencer", b, DEFAULT_GRAPH)
    pool = RacerPool(4, "sequencer", b, DEFAULT_GRAPH)
    ex = ForkedExecutor("tests.test_resume_orphans:Sleeper", b, DEFAULT_GRAPH)
    threading.Thread(target=ex.call, args=("start", {"run_id": "a", "input": "x"}, "a/start#1"), daemon=True).start()
    print(" ".join(map(str, pool.pids)), flush=True)
    time.sleep(3600)
""")


class Sleeper(Sequencer):
    """A runtime whose start never returns (stands for a call child still running when the runner dies)."""

    def start(self, run_id, input):
        time.sleep(3600)


def test_no_orphans_when_the_runner_is_sigkilled(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            cwd=os.getcwd())
    racers = [int(p) for p in proc.stdout.readline().split()]
    me = psutil.Process(proc.pid)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(me.children(recursive=True)) < 6:  # 4 racers, server, call child
        time.sleep(0.05)
    children = me.children(recursive=True)
    assert len(children) >= 6 and set(racers) <= {c.pid for c in children}
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"orphans left: {[(c.pid, c.cmdline()) for c in alive]}"
