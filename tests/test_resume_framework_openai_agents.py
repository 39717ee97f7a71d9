"""The OpenAI Agents SDK (``openai-agents@0.24``) under the resume harness (issue 14), LLM-free.

The SDK runs in its own uv-locked env (``data/envs/openai-agents-0.24``, built from its lock on first use), driven by
the adapter's scripted ``Model``; every crash is a real SIGKILL of a child of the env's fork server, every recovery
a new process, verdicts from the family's checkers.  One fault cell (a SIGKILL after the gated effect of a resume,
then recovery) and one k=2 race.  Each verdict is tied to what the ledger holds (effects and consumes, with the pid
and the call that wrote them), so a wrong lab fails; the assertions marked "the SDK's" pin what release 0.24 does
(the application saves a ``RunState`` only when ``Runner.run`` returns, and nothing claims a saved state).
"""
from __future__ import annotations

import pytest
from test_adapter_conformance import env_group
from test_resume_framework_adapters import _fault, _fired

RUNTIME = "openai-agents@0.24"
pytestmark = env_group(RUNTIME)  # on the worker that holds the env's servers
GATED = "2:act"  # the approval graph's gated task (act fires charge)


def _rows(history, name: str, **match) -> list[dict]:
    return [op.value for op in history.operations
            if op.name == name and all(op.value.get(k) == v for k, v in match.items())]


@pytest.mark.planted("analysis.resume.checkers:EffectExactlyOnce.judge", "if len(rows) > 1:", "if len(rows) > 2:")
def test_fault_cell_sigkill_after_gated_effect():
    """SIGKILL after the gated effect (charge) of a resume, recovery in a new process.  Planted bugs caught: a
    'crash' that unwinds or returns instead of dying (no kill recorded, or the resume saves its finished state and
    the charge fires once), a recovery or retry in the killed process (the second charge's pid is the killed one), a
    resume that never reached act before the kill (the first charge is not the killed call's), and a checker or
    adapter that hides or invents a re-execution (EO/CO not tied to the ledger's charges and consumes)."""
    records, history = _fault(RUNTIME, "crash_resume_after_effect_act")
    verdicts = dict(zip(records["property"], records["verdict"]))
    witnesses = dict(zip(records["property"], records["witness"]))
    killed = [op for op in _rows(history, "resume") if op.get("killed_by") == 9]
    runs = sorted({op["run"] for op in _rows(history, "start")})
    assert len(runs) == 2 and len(killed) == 2  # the cell's two replicas, each resume SIGKILLed
    assert records["sigkills"][0] == 2 and records["processes"][0] >= 3
    assert verdicts["liveness"] == "valid"
    for run in runs:
        kill = next(op for op in killed if op["run"] == run)
        charges = _rows(history, "effect", run=run, effect="charge")
        consumes = _rows(history, "trace", run=run, node="approve", kind="consume")
        # the first charge is the killed resume's, in its own process
        assert charges and charges[0]["op"] == kill["op"] and charges[0]["pid"] == kill["pid"]
        # the SDK's: nothing was saved between the park and the kill, so recovery finds the parked state, the lab
        # resumes again in a new process, and the approved tool and act run a second time
        assert len(charges) == 2 and len(consumes) == 2, (charges, consumes)
        assert charges[1]["pid"] != kill["pid"] and charges[1]["op"] != kill["op"]
        assert [c["op"] for c in consumes] == [c["op"] for c in charges]  # each consume's call fired its charge
        head = _rows(history, "checkpoint", run=run)[-1]
        assert head["step"] == 4 and not head["parked"]  # the retry's finished RunState is the run's head
    twice = any(n > 1 for n in _fired(history, "charge").values())
    assert (verdicts["EO"] == "invalid") == twice and twice
    assert verdicts["CO"] == "invalid"  # each run's interrupt consumed 'yes' twice (the ledger's consumes above)
    for prop, verdict in verdicts.items():
        assert verdict != "invalid" or witnesses[prop], f"{prop} invalid without a witness"
    assert "charge" in witnesses["EO"]


@pytest.mark.planted("analysis.resume.checkers:ConsumeOnce.judge", "if len(rows) > 1:", "if len(rows) > 2:")
def test_race_k2():
    """Two racers forked from the env's warm server resume one parked interrupt.  Planted bugs caught: racers whose
    answers are lost (indeterminate, or served + refused != 2), racers that never overlap (their calls' intervals
    are disjoint), an adapter that runs the resume outside the racers' processes (a charge whose pid or call is no
    racer's), and a checker that hides a double execution (CO valid while the ledger holds two charges)."""
    from runners.experiment import Options
    from runners.resume.concurrency import race_cell

    out = race_cell("resume_frameworks", RUNTIME, "sqlite", 2, 0.0, 1, 7, Options())
    r, history = out.records, out.history
    assert r["indeterminate"] == [0] and r["served"][0] + r["refused"][0] == 2
    answers = [op for op in history.operations if op.name == "resume" and op.actor.startswith("racer-")]
    assert len(answers) == 2
    (a, b) = sorted(answers, key=lambda op: op.start)
    assert b.start < a.end, "the racers never overlapped"
    racer = {op.value["op"]: op.value["pid"] for op in answers}
    charges = [e for e in _rows(history, "effect") if e["task"] == GATED]
    assert len(charges) == r["effects_fired"][0]
    assert all(racer.get(c["op"]) == c["pid"] for c in charges)  # each charge is a racer's, in its own process
    assert len({c["op"] for c in charges}) == len(charges)  # at most one charge per racer
    consumes = _rows(history, "trace", node="approve", kind="consume")
    assert {c["op"] for c in charges} <= {c["op"] for c in consumes}  # no charge without its call's consume
    # consume-once: one consume, one charge, and the other racer refused (a stray resume answered is a violation)
    assert (r["co_verdict"][0] == "invalid") == (len(charges) > 1 or len(consumes) > 1 or r["served"][0] > 1)
    # the SDK's: a saved RunState is a value nothing claims; both racers restore the parked state, approve and run
    assert r["served"] == [2] and len(charges) == 2 and len(consumes) == 2
