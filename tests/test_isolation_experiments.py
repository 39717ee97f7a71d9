"""The isolation experiments run their cells and their artifacts say what the issue asks (cells called directly).

Planted bugs caught are named per test.  The retrieval tests use a real
Qdrant in local mode (in memory) and the lab's embedders.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from runners.experiment import DriftlabError, Options
from runners.isolation.contract_omission import IsolationContractOmission
from runners.isolation.levels import IsolationLevels
from runners.isolation.microbench import IsolationMicrobench
from runners.isolation.retrieval import IsolationRetrieval
from runners.isolation.runtimes import IsolationRuntimes
from runners.isolation.undeclared import IsolationUndeclared
from vocabulary import TIMING_COLUMNS

TIMINGS = set(TIMING_COLUMNS) | {"overhead_us", "resolve_us", "p50_us", "p95_us", "mean_us"}


def records(experiment, profile="quick", seed=7, **extra):
    """Run every cell as the runner does (cell parameters become columns)."""
    options = Options(extra=extra)
    experiment.check(options)
    frames = []
    for cell in experiment.cells(profile, seed, options):
        out = experiment.run_cell(cell, options)
        f = pd.DataFrame(getattr(out, "records", out))
        for i, (k, v) in enumerate(cell.params):
            assert k not in f.columns, f"record column {k!r} collides with a cell parameter"
            f.insert(i, k, v)
        frames.append(f)
    return pd.concat(frames, ignore_index=True)


@pytest.mark.planted("mechanisms.isolation.base:Profile.admit_merge",  # CR admitting merges S1-style
                     "validate_union([parent, *branches], registry, g.stability)",
                     "validate_union([parent, *branches], registry, True)")
def test_levels_table_has_the_issue_columns_and_the_papers_cells():
    """Planted bug caught: a matrix typed in rather than run would not change with the mechanism; CR refusing
    merge skew (S1-style admission) would differ from the paper's cell."""
    e = IsolationLevels()
    r = records(e)
    tab = e.artifacts[0].table(r)
    assert list(tab.columns) == ["profile", "stability", "compatibility", "inheritance", "anomaly", "verdict", "witness"]
    assert len(tab) == 12 * 4
    cell = {(x.profile, x.anomaly): x.verdict for x in tab.itertuples()}
    assert all(cell["SRC", a] == "occurs" for a in ("semantic_read_skew", "compatibility_skew", "context_escape", "merge_skew"))
    assert all(cell["SSI", a] == "prevented" for a in ("semantic_read_skew", "compatibility_skew", "context_escape", "merge_skew"))
    assert cell["CR", "merge_skew"] == "occurs"
    section = e.artifacts[0].report(tab, r)
    assert section.matrices[0].differences() == []


@pytest.mark.planted("mechanisms.isolation.static_pinning:StaticPinning.begin",  # late tools pinned
                     "if x not in registry.late and x not in registry.opaque", "if x not in registry.opaque")
@pytest.mark.planted("mechanisms.isolation.static_pinning:StaticPinning.begin",  # opaque tools pinned
                     "and x not in registry.opaque and x in registry.live", "and x in registry.live")
@pytest.mark.planted("mechanisms.isolation.base:Profile.admit_merge",  # taint refusing nothing
                     "if any(b.taint for b in branches):", "if False:")
def test_runtimes_static_pinning_fails_only_the_open_world_control():
    """Planted bugs caught: a lockfile that also pins late-discovered tools would pass the open-world control; one
    that pins an opaque tool would claim a stability nothing can give; taint that refuses nothing."""
    e = IsolationRuntimes()
    tab = e.artifacts[0].table(records(e))
    assert list(tab.columns) == ["runtime", "anomaly", "verdict", "witness"]
    v = tab.groupby("runtime")["verdict"].apply(lambda s: (s == "occurs").sum()).to_dict()
    assert v == {"default": 4, "StaticPinning": 0, "SSI": 0, "default/open-world": 3, "StaticPinning/open-world": 3,
                 "SSI/open-world": 0, "default/opaque": 3, "StaticPinning/opaque": 3, "SSI/opaque": 0,
                 "SSI+capture/opaque": 0, "SSI+taint/opaque": 2,
                 # real LangGraph: live aliases behave as the default runtime; its checkpointed SSI manifest as SSI
                 "LangGraph": 4, "LangGraph/open-world": 3, "LangGraph/opaque": 3,
                 "LangGraph+SSI": 0, "LangGraph+SSI/open-world": 0, "LangGraph+SSI/opaque": 0}


@pytest.mark.planted("runners.isolation.workflow_runtime:Runtime.pause", "text = w.manifest.to_json()",
                     "text = type(w.manifest)().to_json()")  # the checkpoint without the manifest: live on resume
@pytest.mark.planted("runners.isolation.retrieval_workflow:embed", "space = SPACE_SEEDS[model_version]",
                     "space = SPACE_SEEDS[1]")  # model 2 in model 1's space
def test_retrieval_on_real_qdrant():
    """Figure 1: under live aliases the new model misses the controlled document; SSI returns it.

    Planted bug caught: a runtime that re-resolves the model from the checkpoint's live alias under SSI, or an
    embedder whose model 2 is the same space (SRC would then return the document)."""
    e = IsolationRetrieval()
    r = records(e, repetitions=3)
    tab = e.artifacts[0].table(r).set_index("profile")
    assert list(e.artifacts[0].table(r).columns) == ["profile", "contract", "controlled_document_returned", "refused",
                                                     "executions"]
    assert r["first_correct"].all()
    assert tab.loc["SSI", "controlled_document_returned"] == 3 and tab.loc["SRC", "controlled_document_returned"] < 3
    assert (tab["refused"] == 0).all()


@pytest.mark.planted("vocabulary.isolation:Contracts.covers", "return (identity, version) in self.mentioned",
                     "return True")  # fail-closed admitting what no contract covers
@pytest.mark.planted("runners.isolation.retrieval_workflow:RetrievalWorld.canary_agrees",
                     "return float(np.mean(sims)) >= CANARY_THRESHOLD", "return True")  # the canaries ignored
def test_undeclared_contracts_falsifier_and_policies():
    """Omitted: SSI admits the wrong document, fail-closed refuses, inference re-binds; stale: only inference holds.

    Planted bugs caught: fail-closed that admits uncovered versions; inference that ignores its canaries."""
    e = IsolationUndeclared()
    r = records(e, repetitions=2)
    tab = e.artifacts[0].table(r)
    assert list(tab.columns) == ["contract", "policy", "wrong_document_admitted", "refused", "executions", "overhead_us"]
    t = tab.set_index(["contract", "policy"])
    assert t.loc[("declared", "none"), "wrong_document_admitted"] == 0
    assert t.loc[("omitted", "none"), "wrong_document_admitted"] == 2
    assert t.loc[("omitted", "fail_closed"), ["wrong_document_admitted", "refused"]].tolist() == [0, 2]
    assert t.loc[("omitted", "inference"), ["wrong_document_admitted", "refused"]].tolist() == [0, 0]
    # the same executions (seeds do not depend on the policy): fail-closed admits exactly what SSI alone admits
    assert t.loc[("stale", "fail_closed"), "wrong_document_admitted"] == t.loc[("stale", "none"), "wrong_document_admitted"] > 0
    assert t.loc[("stale", "inference"), "wrong_document_admitted"] == 0


@pytest.mark.planted("runners.isolation.contract_omission:IsolationContractOmission.run_cell",
                     '"incompatible_admitted": bad', '"incompatible_admitted": len(dropped)')  # dropped counted
@pytest.mark.planted("runners.isolation.workflow_runtime:run_scenario",  # judged by the declared contracts
                     "scenario.contracts if oracle is None else oracle",
                     "(scenario.contracts if declared is None else declared) if oracle is None else oracle")
def test_contract_omission_counts_and_determinism():
    """p = 0 admits nothing, p = 1 admits every execution; same seed -> same records.

    Planted bugs caught: counting dropped contracts instead of admitted incompatible combinations (p = 1 would
    count 6 per execution), or a checker judging by the declared (post-fault) contracts (nothing would count)."""
    e = IsolationContractOmission()
    r = records(e, rates=[0.0, 1.0], repetitions=20)
    tab = e.artifacts[0].table(r)
    assert list(tab.columns) == ["rate", "executions", "incompatible_admitted", "share", "ci_low", "ci_high"]
    assert tab["incompatible_admitted"].tolist() == [0, 20]
    assert r["contracts_that_matter"].max() == 3
    again = records(e, rates=[0.0, 1.0], repetitions=20)
    pd.testing.assert_frame_equal(r.drop(columns=[c for c in r if c in TIMINGS]),
                                  again.drop(columns=[c for c in again if c in TIMINGS]))
    with pytest.raises(DriftlabError, match="between 0 and 1"):
        e.check(Options(extra={"rates": [1.5]}))
    assert e.sweeps["contract-omission"].parse("0.1,0,0.05") == [0, 0.05, 0.1]


@pytest.mark.planted("runners.isolation.microbench:records_from_json", '"p95_us": float(x["p95_us"])',
                     '"p95_us": b["stats"]["mean"] * 1e6')
def test_microbench_reads_pytest_benchmark_json(tmp_path):
    """The benchmark runs in a subprocess; records come from its JSON (planted bug: p95 from the mean)."""
    e = IsolationMicrobench()
    options = Options(extra={"rounds": 20}, run_dir=tmp_path)
    cell = e.cells("quick", 1, options)[0]
    r = pd.DataFrame(e.run_cell(cell, options))
    tab = e.artifacts[0].table(r)
    assert list(tab.columns) == ["operation", "identities", "branches", "p50_us", "p95_us"]
    assert (tab["p95_us"] >= tab["p50_us"]).all()
    data = json.loads((tmp_path / "benchmarks" / "bench_isolation.json").read_text())
    assert sorted(r["p95_us"]) == sorted(float(b["extra_info"]["p95_us"]) for b in data["benchmarks"])
    assert len(data["benchmarks"]) == len(r) and {"machine_info", "commit_info"} <= set(data)


def test_reproduce_only_isolation_end_to_end(tmp_path):
    """`driftlab reproduce --only isolation` writes the six artifacts and a report; `driftlab check` judges a history."""
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "runners.cli", "reproduce", "--only", "isolation", "--repetitions", "2",
                           "--out", str(out), "--quiet"], capture_output=True, text=True)
    if done.returncode != 0 and "runners.cli" in done.stderr and "No module" in done.stderr:
        pytest.skip("the CLI module is not runnable as python -m runners.cli")
    assert done.returncode == 0, done.stderr[-2000:]
    report = (out / "report.md").read_text()
    for name in ("isolation_levels", "isolation_runtimes", "isolation_retrieval", "isolation_microbench",
                 "isolation_undeclared", "isolation_contract_omission"):
        assert (out / "tables" / f"{name}.csv").exists() and f"`{name}`" in report
    check = subprocess.run([sys.executable, "-m", "runners.cli", "check",
                            str(out / "histories" / "isolation_runtimes" / "SRC__fixed_schedule.jsonl")],
                           capture_output=True, text=True)
    assert check.returncode == 1 and "context escape" in check.stdout
