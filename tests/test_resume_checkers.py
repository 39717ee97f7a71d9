"""The six resume checkers and liveness, each caught on its own planted bug.

The planted bugs are the sequencer's fault switches (mechanisms/resume/faulted.py):
a checker that misses its own switch, or flags a property its switch leaves
intact, fails here; the whole independence matrix is pinned against the
paper's cells.  Runs in-process (crash = an exception at the named point, the
transaction rolled back) for speed; real SIGKILL is in test_resume_processes.py.
"""
from __future__ import annotations

import pytest

import scenarios
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
    """property -> {cell: verdict} over the given cells, run in-process."""
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


@pytest.mark.parametrize("switch", ["replay", "fork_ignore", "invalid_persist", "nondet_recovery", "double_consume",
                                    "prefix_replay", "state_rebuild"])
def test_each_switch_breaks_exactly_the_papers_properties(switch, tmp_path):
    """Planted bug: the sequencer with one fault switch.  Catches a checker that misses its switch (e.g. an EO
    that counts only distinct keys, a CO that ignores stray gated firings, an RD that compares nothing) or
    that flags a property the switch leaves intact (e.g. a PC that counts recovery's re-run of an
    uncheckpointed node, a CO that counts crash re-firings)."""
    paper = {p for (s, p), v in paper_cells().items() if s == switch and v == "violated"}
    assert violated(profile(f"sequencer+{switch}", tmp_path)) == paper


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
    """Planted bug: RefuseAll.  It satisfies all six safety properties; only liveness may flag it."""
    cells = [c for c in CELLS if c.name in ("baseline", "second_resume_head")]
    prof = profile(f"{__name__}:RefuseAll", tmp_path, cells)
    assert violated(prof) == {"liveness"}


def _hist(ops, graph=DEFAULT_GRAPH) -> History:
    return History("resume", tuple(Operation(i, a, n, s, t0, t1, v) for i, (a, n, s, t0, t1, v) in enumerate(ops)),
                   {"graph": graph.to_dict()})


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
