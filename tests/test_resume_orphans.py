"""No orphan processes, even when the experiment itself is SIGKILLed.

Catches a runner whose children outlive it (planted bug: forking racers
without parent-death handling): a script holding k = 4 warm racers and a
call child parked at a kill point is SIGKILLed, and psutil must find none of
its children alive afterwards.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil

SCRIPT = textwrap.dedent("""
    import sys, tempfile, threading
    from vocabulary.resume import Backend, DEFAULT_GRAPH
    from runners.resume_cells import setup_backend
    from runners.resume_procs import ForkedExecutor, RacerPool
    d = tempfile.mkdtemp(dir=sys.argv[1]); b = Backend("sqlite", d, "t")
    setup_backend("sequencer", b, DEFAULT_GRAPH)
    pool = RacerPool(4, "sequencer", b, DEFAULT_GRAPH)
    ex = ForkedExecutor("sequencer", b, DEFAULT_GRAPH)
    import runners.resume_procs as rp
    rp.kill = lambda pid: print("ready", flush=True) or __import__("time").sleep(3600)  # never kill the parked child
    print(" ".join(map(str, pool.pids)), flush=True)
    ex.call("start", {"run_id": "a", "input": "x"}, "a/start#1", ("after_effect", "prepare"))
""")


def test_no_orphans_when_the_runner_is_sigkilled(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            cwd=os.getcwd())
    racers = [int(p) for p in proc.stdout.readline().split()]
    assert proc.stdout.readline().strip() == "ready"  # the call child is parked at its kill point
    children = psutil.Process(proc.pid).children(recursive=True)
    assert len(children) >= 5 and set(racers) <= {c.pid for c in children}
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"orphans left: {[c.pid for c in alive]}"
