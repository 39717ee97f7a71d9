"""Dependency omission (ATR paper §5): the fault hides the blocking change; conservative linking repairs it."""
from __future__ import annotations

import pandas as pd
import pytest

from analysis.records import load_records
from analysis.revalidation.counting import classify
from analysis.revalidation.omission import report, table, totals
from faults.revalidation.omission import LINKINGS, DependencyOmission, critical_edges, drop
from runners.cli import main
from runners.experiment import Options
from runners.revalidation.omission import RevalidationOmission
from scenarios.revalidation.workload import load_workloads
from vocabulary.revalidation import Change

EXPERIMENT = RevalidationOmission()


def run(rate: float, repetitions: int = 4, mechanisms: tuple[str, ...] | None = None, seed: int = 3) -> pd.DataFrame:
    """Every cell of the grid at one rate, in-process; records with the cell's parameters, and the false
    allows as the analysis counts them (the runner records what happened, never a count)."""
    options = Options(mechanisms=mechanisms, extra={"rates": [rate], "repetitions": repetitions})
    frames = [pd.DataFrame(EXPERIMENT.run_cell(cell, options)).assign(**cell.p)
              for cell in EXPERIMENT.cells("quick", seed, options)]
    records = pd.concat(frames, ignore_index=True)
    assert "false_allow" not in records  # one definition, in analysis/revalidation/counting.py
    return records.assign(false_allow=classify(records)["false_allow"])


def test_the_critical_edge_comes_from_the_scenario():
    refund = load_workloads()["refund"]
    ids = {p.id: i for i, p in enumerate(refund.premises)}
    # The limit drops to 50: only amount_within_limit reads the limit and fails on it.
    assert critical_edges(refund, [(Change("policy.refund_limit", 50),)]) == (("policy.refund_limit", ids["amount_within_limit"]),)
    # The limit drops to 90: the premise still holds, so no edge is critical.
    assert critical_edges(refund, [(Change("policy.refund_limit", 90),)]) == ()
    # Dropping the sole edge of a field unlinks the field, so its version is not bound to the commit.
    dropped = drop(refund.dependencies, critical_edges(refund, [(Change("order.refunded", True),)]))
    assert "order.refunded" not in dropped
    assert "order.refunded" in refund.dependencies  # the workload's own index is never edited


def test_without_omission_atr_never_allows_a_blocked_effect():
    records = run(0.0)
    exact = records[records.linking == "exact"]
    assert not records.omitted.any() and not records.false_allow.any()
    assert (exact.outcome == "BLOCK").all() and exact.critical_token_bound.all()


def test_an_omitted_critical_edge_is_a_false_allow_the_cas_does_not_catch():
    records = run(1.0)
    exact = records[records.linking == "exact"]
    assert exact.critical.all() and exact.omitted.all()
    assert exact.false_allow.all() and exact.released.all()
    assert not exact.critical_token_bound.any()  # the field's token really is missing...
    gap = exact[exact.schedule == "s5_check_to_commit"]
    assert len(gap) and (gap.commit_attempts == 1).all()  # ...so the write between check and commit goes through


def test_conservative_linking_removes_every_false_allow_at_a_cost():
    records = run(1.0)
    exact, conservative = records[records.linking == "exact"], records[records.linking == "conservative"]
    assert conservative.omitted.all() and not conservative.false_allow.any()
    assert (conservative.outcome == "BLOCK").all() and conservative.critical_token_bound.all()
    per_change = lambda r: (r.premises_evaluated / r.changes).mean()  # noqa: E731
    assert per_change(conservative) > per_change(run(0.0)[lambda r: r.linking == "exact"]) > per_change(exact)
    assert conservative.links.min() > exact.links.max()


def test_fullscan_ignores_the_graph_so_omission_cannot_fool_it():
    records = run(1.0, repetitions=2, mechanisms=("FullScan",))
    assert records.omitted.all() and not records.false_allow.any()


def test_the_fault_always_draws_once_from_the_execution_rng():
    import random

    refund = load_workloads()["refund"]
    fault = DependencyOmission(0.0)
    fault.setup(refund, [(Change("policy.refund_limit", 50),)])
    rng, twin = random.Random(5), random.Random(5)
    deps, omitted = fault.invoke(refund.dependencies, rng)
    twin.random()
    assert not omitted and deps == refund.dependencies and rng.random() == twin.random()
    with pytest.raises(ValueError):
        DependencyOmission(1.5)
    assert set(LINKINGS) == {"exact", "conservative"}


def test_the_measured_rate_lies_in_the_binomial_interval_of_its_expectation():
    records = run(0.3, repetitions=30)  # 21 cells x 30 = 630 executions per linking, seeded
    full = table(records)
    tab = totals(full).set_index("linking")
    exact = tab.loc["exact"]
    assert exact.executions == 630 and exact.exposed_share == 1.0
    per_workload = full[full.workload != "all"]  # per-workload rows beside the totals, summing to them
    assert set(per_workload.workload) == {"refund", "cloud_remediation", "procurement"}
    assert per_workload.groupby("linking")["false_allows"].sum()["exact"] == exact.false_allows
    assert per_workload.groupby("linking")["executions"].sum()["exact"] == 630
    section = report(full, records)
    assert "3 workloads (" in section.notes and "under 7 schedules; 1,260 executions in all" in section.notes
    assert "**Per workload**" in section.notes
    assert exact.expected_rate == pytest.approx(0.3)
    assert exact.within_expected and exact.expected_low < exact.false_allow_rate < exact.expected_high
    assert exact.ci_low < 0.3 < exact.ci_high
    assert tab.loc["conservative"].false_allows == 0 and tab.loc["conservative"].within_expected


def test_sweep_omission_writes_records_table_and_report(tmp_path):
    out = tmp_path / "sweep"
    code = main(["sweep", "omission", "--rates", "0,0.5", "--out", str(out), "--repetitions", "3",
                 "--jobs", "1", "--quiet"])
    assert code == 0
    records = load_records(out, "revalidation_omission")
    assert sorted(records.rate.unique()) == [0.0, 0.5] and len(records) == 2 * 2 * 21 * 3
    tab = pd.read_csv(out / "tables" / "revalidation_omission.csv")
    assert set(tab.linking) == {"exact", "conservative"} and tab.false_allows[tab.rate == 0].sum() == 0
    assert set(tab.workload) == {"all", "refund", "cloud_remediation", "procurement"}
    report = (out / "report.md").read_text()
    assert "Dependency omission" in report and "p = 50%" in report
    assert (out / "figures" / "revalidation_omission.png").exists()
    try:  # an impossible rate: one-line error, exit 2, nothing written
        code = main(["sweep", "omission", "--rates", "0,1.5", "--out", str(tmp_path / "bad")])
    except SystemExit as exc:  # argparse's own exit
        code = exc.code
    assert code == 2 and not (tmp_path / "bad").exists()
