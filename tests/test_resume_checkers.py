"""The six resume checkers and liveness, each caught on its own planted bug.

The planted bugs are the sequencer's fault switches (mechanisms/resume/faulted.py):
a checker that misses its own switch, or flags a property its switch leaves
intact, fails here; the whole independence matrix is pinned against the
paper's cells.  Runs in-process (crash = an exception at the named point, the
transaction rolled back) for speed; real SIGKILL is in test_resume_processes.py.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

import scenarios
from planting import planted
from analysis.resume.checkers import CHECKERS, check_all
from analysis.resume.independence import paper_cells
from mechanisms.resume import REGISTRY
from mechanisms.resume.sequencer import Sequencer
from runners.resume.cells import Recorder, finish, play, setup_backend
from runners.resume.procs import InProcessExecutor
from scenarios.resume.loader import by_kind, cell_graph
from vocabulary import History, Operation, Verdict
from vocabulary.resume import DEFAULT_GRAPH, PROPERTIES, REFUSED, Backend, Status

SCEN = scenarios.load_scenarios(family="resume")["resume"]
GRAPHS = by_kind(SCEN, "graph")
CELLS = sorted(by_kind(SCEN, "cell").values(), key=lambda c: c.order)


def profile(runtime: str, tmp_path, cells=CELLS) -> dict[str, dict[str, str]]:
    """property -> {cell: verdict} over the given cells, run in-process (in a new directory under ``tmp_path``: a
    planted variant runs the test again with the same ``tmp_path``, whose stores must not carry over)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))
    out: dict[str, dict[str, str]] = {}
    for i, cell in enumerate(cells):
        graph = cell_graph(cell, GRAPHS)
        backend = Backend("sqlite", str(tmp_path / f"{runtime.replace('+', '_')}_{i}"), "t")
        setup_backend(runtime, backend, graph)
        rec = Recorder(graph, {"cell": cell.name})
        ex = InProcessExecutor(runtime, backend, graph)
        for r in range(cell.replicas):
            play(cell, ex, rec, f"{cell.name}-{r}", cell.name)
        for prop, res in check_all(finish(rec, runtime, backend, graph)).items():
            out.setdefault(prop, {})[cell.name] = res.verdict.value
    return out


def violated(prof: dict[str, dict[str, str]]) -> set[str]:
    return {p for p, cells in prof.items() if "invalid" in cells.values()}


CK = "analysis.resume.checkers:"  # where the planted checker bugs go (tests/planting.py)
planted_eo_distinct_keys = pytest.mark.planted(CK + "EffectExactlyOnce.judge", "if len(rows) > 1:",
                                               "if len({(run, task, key)}) > 1:")  # counts only distinct keys
planted_rd_compares_nothing = pytest.mark.planted(CK + "RecoveryDeterminism.judge", "if len(calls) < 2:", "if True:")
planted_fd_compares_nothing = pytest.mark.planted(CK + "ForkDeterminism.judge", "if got != want:", "if False:")
planted_cv_blind = pytest.mark.planted(CK + "CheckpointValidity.judge", "if problems:", "if False:")
planted_pc_counts_reruns = pytest.mark.planted(  # the uncheckpointed node's re-run counted
    CK + "PrefixConsistency.judge", 'row.value.get("step", 0) < f', 'row.value.get("step", 0) <= f')
planted_co_counts_crash_refirings = pytest.mark.planted(  # a recovery's re-firing counted as a stray one
    CK + "ConsumeOnce.judge", "if call.name != RESUME or call.indeterminate:",
    "if call.name not in (RESUME, RECOVER) or call.indeterminate:")
planted_by_switch = {
    "replay": [planted_eo_distinct_keys],
    "fork_ignore": [planted_fd_compares_nothing, planted_pc_counts_reruns, planted_co_counts_crash_refirings],
    "invalid_persist": [planted_cv_blind, planted_pc_counts_reruns, planted_co_counts_crash_refirings],
    "nondet_recovery": [planted_eo_distinct_keys, planted_rd_compares_nothing],
    "double_consume": [planted_eo_distinct_keys, planted_pc_counts_reruns],
    "prefix_replay": [planted_eo_distinct_keys, planted_co_counts_crash_refirings],
    "state_rebuild": [planted_co_counts_crash_refirings],
}


@pytest.mark.parametrize("switch", [pytest.param(s, marks=m) for s, m in planted_by_switch.items()])
def test_each_switch_breaks_exactly_the_papers_properties(switch, tmp_path):
    """Planted bug: the sequencer with one fault switch.  Catches a checker that misses its switch (e.g. an EO
    that counts only distinct keys, an RD or FD that compares nothing, a CV blind to the schema) or that flags a
    property the switch leaves intact (e.g. a PC that counts recovery's re-run of an uncheckpointed node, a CO that
    counts crash re-firings); each is planted on the rows that catch it.  (A CO that ignores stray gated firings is
    not caught here: every switch that breaks CO breaks it by another rule as well; it is planted in
    tests/unit/test_unit_resume_checkers.py.)"""
    paper = {p for (s, p), v in paper_cells().items() if s == switch and v == "violated"}
    assert violated(profile(f"sequencer+{switch}", tmp_path)) == paper


@planted_pc_counts_reruns
@planted_eo_distinct_keys
@planted_cv_blind
@pytest.mark.planted(CK + "ConsumeOnce.judge",  # a resume of a consumed interrupt accepted silently passes
                     'if earlier and call.value.get("state") not in (REFUSED, FAILED) and self.refusal_required:',
                     "if False:")
def test_sequencer_holds_everything_and_naive_breaks_eo_co_cv_pc(tmp_path):
    """Planted bug in reverse: the conforming sequencer must get no invalid verdict in any cell (a checker
    that over-reports fails), and naive must be caught on EO (crash), CO (second resume), CV (invalid state)."""
    seq = profile("sequencer", tmp_path / "s")
    assert violated(seq) == set(), {p: c for p, c in seq.items() if "invalid" in c.values()}
    naive = profile("naive", tmp_path / "n")
    assert violated(naive) == {"EO", "CO", "CV", "PC"}
    assert naive["EO"]["crash_resume_after_effect_act"] == "invalid"
    assert naive["EO"]["crash_resume_before_node_act"] == "valid"  # nothing durable was lost or repeated
    assert naive["CO"]["second_resume_head"] == "invalid"
    assert naive["CV"]["invalid_state"] == "invalid"
    assert naive["RD"] and set(naive["RD"].values()) == {"valid"}


class RefuseAll(Sequencer):
    """Planted bug for liveness: refuses every resume (trivially consume-once)."""

    name = "refuse_all"

    def resume(self, run_id, value, checkpoint_id=None):
        return Status(run_id, REFUSED, reason="refused by policy")


def test_liveness_catches_a_runtime_that_refuses_everything(tmp_path):
    """Planted bug: RefuseAll.  It satisfies all six safety properties; only liveness may flag it.  Liveness has
    two rules that see it (every resume refused; a served run stuck after it): with both planted away, the test
    fails."""
    cells = [c for c in CELLS if c.name in ("baseline", "second_resume_head")]

    def only_liveness_flags_it():
        assert violated(profile(f"{__name__}:RefuseAll", tmp_path, cells)) == {"liveness"}

    only_liveness_flags_it()
    with planted(CK + "Liveness.judge", 'if not consumed and all(c.value.get("state") == REFUSED for c in resumes):',
                 "if False:"), planted(CK + "Liveness.stuck", "if v.done(run):", "if True:"), \
            pytest.raises(AssertionError):
        only_liveness_flags_it()


def _hist(ops, graph=DEFAULT_GRAPH) -> History:
    return History("resume", tuple(Operation(i, a, n, s, t0, t1, v) for i, (a, n, s, t0, t1, v) in enumerate(ops)),
                   {"graph": graph.to_dict()})


@planted_eo_distinct_keys
@planted_cv_blind
def test_eo_and_cv_on_literal_histories():
    """Planted bugs written as histories: one effect fired twice (EO), a checkpoint with steps='invalid' (CV);
    and a history without a graph is unknown, never valid."""
    eff = {"run": "r", "task": "2:act", "effect": "charge", "op": "r/resume#2"}
    cp_ok = {"run": "r", "step": 4, "values": {"input": "x", "approval": "y", "steps": 4, "log": []}, "created": 1.0}
    h = _hist([("ledger", "effect", "ok", 1, 1, eff), ("ledger", "effect", "ok", 2, 2, eff),
               ("store", "checkpoint", "ok", 3, 3, {**cp_ok, "values": {**cp_ok["values"], "steps": "invalid"}})])
    res = check_all(h)
    assert res["EO"].verdict is Verdict.INVALID and "fired 2 times" in res["EO"].witnesses[0].explanation
    assert res["CV"].verdict is Verdict.INVALID and "steps='invalid'" in res["CV"].witnesses[0].explanation
    bare = History("resume", h.operations, {})
    assert all(c.check(bare).verdict is Verdict.UNKNOWN for c in CHECKERS.values())
    assert set(PROPERTIES) <= set(CHECKERS)


def test_faulted_variants_are_registered():
    assert {f"sequencer+{s}" for s in ("replay", "fork_ignore", "invalid_persist", "nondet_recovery",
                                        "double_consume", "prefix_replay", "state_rebuild")} <= set(REGISTRY)
