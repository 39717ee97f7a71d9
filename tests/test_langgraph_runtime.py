"""Real LangGraph behind the resume family's harness: a slice of the fault matrix and of the concurrency grid.

Every crash is a real SIGKILL of a forked child running the graph, every
recovery a new process (runners/resume/procs.py), the verdicts come from the
family's checkers.  Each test names the planted bug it catches.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

pytest.importorskip("langgraph")

from mechanisms import resolve  # noqa: E402
from mechanisms.resume import DEFAULT_RUNTIMES, REGISTRY  # noqa: E402
from mechanisms.resume.base import DurableRuntime  # noqa: E402
from mechanisms.resume.langgraph_runtime import LangGraphGuardRuntime, LangGraphRuntime  # noqa: E402
from runners.resume import common as rc  # noqa: E402
from runners.experiment import Options  # noqa: E402
from runners.resume.concurrency import race_cell  # noqa: E402
from vocabulary.resume import DEFAULT_GRAPH, Backend  # noqa: E402


class PlainEffectsGuard(LangGraphGuardRuntime):
    """Planted bug: the guard without its effect ledger (effects fire plainly, at least once)."""

    name = "langgraph+guard-without-ledger"

    def fire_effect(self, run_id, task, key, payload):
        return DurableRuntime.fire_effect(self, run_id, task, key, payload)


class UnclaimedGuard(LangGraphGuardRuntime):
    """Planted bug: the guard's runtime on the stock savers (no consume-once claim)."""

    name = "langgraph+guard-without-claims"
    guarded = False


def verdicts(runtime: str, cell: str, backend: str = "sqlite") -> tuple[dict[str, str], int, int]:
    records, _ = rc.run_fault_cell("resume_faults", runtime, cell, 1, 7, Options(), backend)
    return (dict(zip(records["property"], records["verdict"])), records["effects_fired"][0],
            records["effects_expected"][0])


def test_registered_as_default_rows():
    """Both runtimes are rows of the three process artifacts by default (planted bug: a registry line that names a
    class the module does not define, or a variant whose class name does not match its registered name)."""
    from mechanisms import MechanismError

    def registered_right(registry: dict[str, str]) -> None:
        for name in registry:
            if name.startswith("langgraph"):
                try:
                    cls = resolve(name, "resume")
                except MechanismError as exc:
                    raise AssertionError(f"{name}: {exc}") from None
                assert cls.name == name

    assert {"langgraph", "langgraph+guard"} <= set(DEFAULT_RUNTIMES)
    registered_right(REGISTRY)
    lg = "mechanisms.resume.langgraph_runtime:"
    for line in (lg + "LangGraphNoSuchRuntime", lg + "LangGraphRuntime"):  # planted: a missing class; a name mismatch
        with pytest.MonkeyPatch.context() as mp, pytest.raises(AssertionError):
            mp.setitem(REGISTRY, "langgraph[planted]", line)
            registered_right(REGISTRY)


# ---------------------------------------------------------------------------------------------- stock LangGraph
@pytest.mark.parametrize("cell,violated", [
    ("second_resume_head", "CO"),  # the second resume value is recorded and never consulted
    ("second_resume_by_id", "CO"),  # addressed to the parked checkpoint: b and c re-run with the first value
    ("crash_resume_after_effect_act", "EO"),  # durably recorded work re-executed after SIGKILL
    ("invalid_state", "CV"),  # schema-invalid state persisted silently
])
def test_stock_langgraph_profile(cell, violated):
    """The installed release reproduces the paper's four 1.2.9 findings on SQLite (measured, not assumed: if a
    release fixes one, this test says which)."""
    got, _, _ = verdicts("langgraph", cell)
    assert got[violated] == "invalid" and got["liveness"] == "valid"


# ---------------------------------------------------------------------------------------------- LangGraph + guard
planted_unvalidated = pytest.mark.planted("driftlab_guard.schema:StateSchema.problems",
                                          "adapter = self.adapters.get(channel)", "adapter = None")
planted_claim_unchecked = pytest.mark.planted("driftlab_guard.consume_once:claim", "if (yield d.insert, row) is None:",
                                              "if (yield d.insert, row) is None and False:")
GUARD_CELLS = ["second_resume_head", "second_resume_by_id", "crash_resume_after_effect_act",
               "crash_start_after_node_before_checkpoint_prepare", "crash_resume_after_resume_consumed_approve",
               "invalid_state"]


@pytest.mark.parametrize("cell", [
    pytest.param(c, marks=planted_unvalidated) if c == "invalid_state" else
    pytest.param(c, marks=planted_claim_unchecked) if c == "second_resume_by_id" else c for c in GUARD_CELLS])
def test_guard_holds_where_stock_violates_sqlite(cell):
    """EO, CO, CV and liveness hold for langgraph+guard, with every expected effect fired exactly once.

    Planted bugs caught: the guard without its effect ledger (EO on the crash cells, see
    test_planted_guard_bugs_are_caught), without the claim's check (CO on the second resume addressed to the parked
    checkpoint, planted; at the head a second resume finds the thread unparked and is refused before its claim),
    without schema validation (CV on invalid_state, planted).
    """
    got, fired, expected = verdicts("langgraph+guard", cell)
    assert {p: got[p] for p in ("EO", "CO", "CV", "PC", "liveness")} == dict.fromkeys(
        ("EO", "CO", "CV", "PC", "liveness"), "valid")
    assert fired == expected


@pytest.mark.postgres
@pytest.mark.parametrize("cell", ["second_resume_by_id", "crash_resume_after_effect_act"])
def test_guard_holds_on_postgres(pg_dsn, cell):
    """The same on PostgreSQL (the claim is an INSERT ... ON CONFLICT in the saver's schema)."""
    got, fired, expected = verdicts("langgraph+guard", cell, "postgres")
    assert (got["EO"], got["CO"], got["liveness"], fired) == ("valid", "valid", "valid", expected)


@pytest.mark.planted("analysis.resume.checkers:EffectExactlyOnce.judge", "if len(rows) > 1:", "if False:")
@pytest.mark.planted("analysis.resume.checkers:ConsumeOnce.judge",  # a second resume accepted silently passes CO
                     'if earlier and call.value.get("state") not in (REFUSED, FAILED) and self.refusal_required:',
                     "if False:")
def test_planted_guard_bugs_are_caught():
    """The fault matrix finds each planted bug of the guard runtime (these are the tests' own planted bugs; the
    guard runtime runs in forked children no plant reaches, so the markers plant the checkers that must see them:
    an EO blind to a repeated effect, a CO that lets a second resume be accepted silently)."""
    mod = __name__
    assert verdicts(f"{mod}:PlainEffectsGuard", "crash_resume_after_effect_act")[0]["EO"] == "invalid"
    assert verdicts(f"{mod}:UnclaimedGuard", "second_resume_head")[0]["CO"] == "invalid"


# ---------------------------------------------------------------------------------------------- concurrent resumers
def _race(runtime: str, backend: str, k: int = 4):
    out = race_cell("resume_concurrency", runtime, backend, k, 0.0, 2, 11, Options())
    return out.records


@pytest.mark.planted("driftlab_guard.consume_once:claim", "if (yield d.insert, row) is None:", "if True:")
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_concurrent_resumers(backend, request):
    """k=4 warm racers on a barrier: stock LangGraph serves all four (saturation 1.0, as the paper measured);
    with the guard exactly one is served and fires the gated effect, three are refused.

    Planted bugs caught: the guard runtime without claims (UnclaimedGuard, run here beside the guard on SQLite)
    serves all four; a claim that reads its own insert as a conflict (planted) serves none.
    """
    if backend == "postgres":
        request.getfixturevalue("pg_dsn")
    stock = _race("langgraph", backend)
    assert stock["effects_fired"] == [4, 4] and stock["served"] == [4, 4]
    guard = _race("langgraph+guard", backend)
    assert (guard["effects_fired"], guard["served"], guard["refused"]) == ([1, 1], [1, 1], [3, 3])
    assert guard["co_verdict"] == ["valid", "valid"] and guard["liveness_verdict"] == ["valid", "valid"]
    if backend == "sqlite":
        assert _race(f"{__name__}:UnclaimedGuard", backend)["served"] == [4, 4]


# ---------------------------------------------------------------------------------------------- every variant
planted_dataclass_read_as_dict = pytest.mark.planted(
    "mechanisms.resume.langgraph_graphs:as_dict", "if isinstance(state, dict):",
    "if isinstance(state, dict) or dataclasses.is_dataclass(state):")


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=planted_dataclass_read_as_dict if "dataclass" in n else ())
    for n in sorted(n for n in REGISTRY if n.startswith("langgraph")
                    and "sqlite" in getattr(resolve(n, "resume"), "backends", ("sqlite",)))])
def test_every_variant_runs_the_graph(name, tmp_path):
    """Each registered variant (sync/async saver, every durability mode, TypedDict/dataclass/pydantic state) parks,
    resumes to the declared end state, forks by checkpoint id, and (guarded) refuses a second resume.

    Planted bug caught: an adapter that loses the resume value for one kind of state (e.g. reading a dataclass
    state as a dict) ends with the wrong approval or log.
    """
    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))  # a planted rerun (tests/planting.py) gets the same tmp_path
    rt = resolve(name, "resume")(Backend("sqlite", str(tmp_path), "v"), DEFAULT_GRAPH)
    rt.setup()
    try:
        parked = rt.start("r", "in")
        assert parked.state == "parked" and parked.node == DEFAULT_GRAPH.interrupt_node
        done = rt.resume("r", "yes")
        expected = DEFAULT_GRAPH.expected(DEFAULT_GRAPH.initial_state("in"), 0, "yes")
        assert (done.state, dict(done.values)) == ("done", expected)
        again = rt.resume("r", "no")
        assert again.state == ("refused" if isinstance(rt, LangGraphGuardRuntime) else "done")
        forked = rt.fork("r", parked.checkpoint_id, "f")
        assert forked.state == "parked"
        assert dict(rt.resume("f", "other").values) == DEFAULT_GRAPH.expected(
            DEFAULT_GRAPH.initial_state("in"), 0, "other")
    finally:
        rt.close()


def test_stock_adapter_is_not_the_guard():
    assert not LangGraphRuntime.guarded and LangGraphGuardRuntime.guarded
