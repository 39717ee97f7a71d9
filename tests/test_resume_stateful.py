"""A hypothesis RuleBasedStateMachine drives a runtime through random interleavings of run, park, resume,
second resume, fork, crash and recovery, and checks all six properties (and liveness) after every step.

The paper model-checks a TLA+ model; here the implementation itself is
explored.  Every action is applied to two twin runs (same steps, same crash
points), so recovery determinism compares real pairs of recoveries.  The
crash is in-process (an exception at the named point, its transaction rolled
back; the next call uses a fresh runtime object): cheap enough for many
interleavings; real SIGKILL is covered in test_resume_processes.py.

Planted bug: the same machine on ``naive`` must fail (a crash after an
effect, a second resume or a resume by checkpoint id breaks EO/CO/PC).
"""
from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from analysis.resume.checkers import check_all
from runners.resume.cells import Recorder, finish, setup_backend
from runners.resume.procs import InProcessExecutor
from vocabulary.resume import DEFAULT_GRAPH, PARKED, Backend

CRASHES = [("before_node", "prepare"), ("after_effect", "prepare"), ("after_node_before_checkpoint", "prepare"),
           ("during_checkpoint_write", "prepare"), ("parked", "approve"), ("after_resume_consumed", "approve"),
           ("before_node", "act"), ("after_effect", "act"), ("after_node_before_checkpoint", "act"),
           ("during_checkpoint_write", "act"), ("after_effect", "notify")]
TWINS = ("x", "y")


class ResumeMachine(RuleBasedStateMachine):
    runtime = "sequencer"

    @initialize()
    def setup(self):
        self.folder = tempfile.mkdtemp(prefix="resume_sm_")
        self.backend = Backend("sqlite", self.folder, "m")
        setup_backend(self.runtime, self.backend, DEFAULT_GRAPH)
        self.rec = Recorder(DEFAULT_GRAPH)
        self.ex = InProcessExecutor(self.runtime, self.backend, DEFAULT_GRAPH)
        self.pairs: list[str] = []
        self.parked: dict[str, str] = {}  # twin run -> its parked checkpoint id
        self.ordinal: dict[str, int] = {}
        self.n = 0

    def teardown(self):
        shutil.rmtree(getattr(self, "folder", ""), ignore_errors=True)

    def call(self, call, run, args, crash=None, extra=None):
        label = self.rec.label(run, call)
        res = self.ex.call(call, args, label, crash)
        value = {"run": run, "op": label, "group": "twins", **(extra or {})}
        if call == "recover":
            self.ordinal[run] = self.ordinal.get(run, 0) + 1
            value["ordinal"] = self.ordinal[run]
        self.rec.record("machine", call, res, value)
        if run not in self.rec.runs:
            self.rec.runs.append(run)
        if res.result is not None and res.result.state == PARKED:
            self.parked.setdefault(run, res.result.checkpoint_id)
        if res.status == "indeterminate":
            self.call("recover", run, {"run_id": run})
        return res

    @rule(crash=st.one_of(st.none(), st.sampled_from(CRASHES[:5])))
    def start(self, crash):
        self.n += 1
        pair = f"p{self.n}"
        self.pairs.append(pair)
        for t in TWINS:
            self.call("start", f"{pair}{t}", {"run_id": f"{pair}{t}", "input": "in"}, crash)

    @rule(data=st.data(), value=st.sampled_from(["yes", "no"]), by_id=st.booleans(),
          crash=st.one_of(st.none(), st.sampled_from(CRASHES[5:])))
    def resume(self, data, value, by_id, crash):
        if not self.pairs:
            return
        pair = data.draw(st.sampled_from(self.pairs))
        for t in TWINS:
            run = f"{pair}{t}"
            args = {"run_id": run, "value": value}
            if by_id and run in self.parked:
                args["checkpoint_id"] = self.parked[run]
            self.call("resume", run, args, crash, {"resume": value, "checkpoint": args.get("checkpoint_id")})

    @rule(data=st.data(), value=st.sampled_from(["yes", "no"]))
    def fork(self, data, value):
        src = [p for p in self.pairs if f"{p}x" in self.parked]
        if not src:
            return
        pair = data.draw(st.sampled_from(src))
        self.n += 1
        new = f"p{self.n}"
        self.pairs.append(new)
        for t in TWINS:
            self.call("fork", f"{new}{t}", {"run_id": f"{pair}{t}", "checkpoint_id": self.parked[f"{pair}{t}"],
                                             "new_run_id": f"{new}{t}"},
                      None, {"from_run": f"{pair}{t}", "from_checkpoint": self.parked[f"{pair}{t}"]})
            self.call("resume", f"{new}{t}", {"run_id": f"{new}{t}", "value": value}, None, {"resume": value})

    @rule(data=st.data())
    def recover(self, data):
        if self.pairs:
            pair = data.draw(st.sampled_from(self.pairs))
            for t in TWINS:
                self.call("recover", f"{pair}{t}", {"run_id": f"{pair}{t}"})

    @invariant()
    def six_properties_hold(self):
        if not getattr(self, "rec", None) or not self.rec.ops:
            return
        history = finish(Recorder(DEFAULT_GRAPH, ops=list(self.rec.ops), runs=list(self.rec.runs)),
                         self.runtime, self.backend, DEFAULT_GRAPH)
        bad = {p: r.prose(history) for p, r in check_all(history).items() if r.verdict.value != "valid"}
        assert not bad, "\n".join(bad.values())


class NaiveMachine(ResumeMachine):
    runtime = "naive"


FAST = settings(max_examples=60, stateful_step_count=8, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


def test_sequencer_holds_all_six_properties_after_every_step():
    run_state_machine_as_test(ResumeMachine, settings=FAST)


def test_the_same_machine_finds_naives_violations():
    """Planted bug: naive (at-least-once across crashes, second resumes recorded and ignored)."""
    with pytest.raises(AssertionError, match="invalid"):
        run_state_machine_as_test(NaiveMachine, settings=settings(FAST, max_examples=60,
                                                                   phases=[Phase.generate]))
