"""Read-count scaling (ATR paper §5, Figure 2): the work behind the latencies, the sweep, and its analysis.

Latency itself is never asserted here (a shared machine makes wall-clock
bounds flaky); the paper-profile run checks the 1.25x claim and the report
states it.  What these tests pin is why the curves look as they do: ATR's
work does not depend on unrelated reads, FullScan's grows with them.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from analysis.revalidation import scaling as analysis
from analysis.records import load_records
from analysis.reference import paper_value
from analysis.stats import median_ci
from mechanisms.revalidation.atr import ATR
from mechanisms.revalidation.full_scan import FullScan
from runners.cli import main
from runners.revalidation.scaling import (FLOOR, UNRELATED, Floor, fresh_copy,
                                                     scaled_transaction, work)
from scenarios.revalidation.workload import load_workloads

pytestmark = pytest.mark.xdist_group("test_revalidation_scaling")  # one worker: its module-scoped fixture runs once


@pytest.fixture(scope="module")
def refund():
    return load_workloads(())["refund"]


def test_padding_adds_unrelated_reads_only(refund):
    txn, _ = scaled_transaction(refund, 4093)
    assert len(txn.reads) == 4093
    padding = {ref for ref in txn.reads if ref.startswith(UNRELATED + ".")}
    assert len(padding) == 4093 - len(refund.reads)
    assert not padding & {ref for p in txn.premises for ref in p.evidence}
    assert not padding & set(txn.dependencies)


def test_atr_work_is_the_same_at_13_and_4093_reads_while_fullscan_rereads_every_read(refund):
    atr = {n: work(ATR(), *scaled_transaction(refund, n)) for n in (13, 4093)}
    full = {n: work(FullScan(), *scaled_transaction(refund, n)) for n in (13, 4093)}
    # the limit change 100 -> 90 touches one premise (amount_within_limit), which still holds
    assert atr[13] == atr[4093] == {"outcome": "KEEP", "premises_evaluated": 1, "reads_reread": 1}
    assert [full[n]["reads_reread"] for n in (13, 4093)] == [13, 4093]
    assert full[13]["premises_evaluated"] == full[4093]["premises_evaluated"] == len(refund.premises)
    assert full[13]["outcome"] == full[4093]["outcome"] == "KEEP"


def test_a_blocking_change_still_blocks_among_4093_reads(refund):
    for mechanism in (ATR(), FullScan()):
        assert work(mechanism, *scaled_transaction(refund, 4093, "blocking"))["outcome"] == "BLOCK"


def test_the_floor_decides_like_atr_with_the_same_work_and_tokens(refund):
    for n in (13, 4093):
        for change in ("predicate_preserving", "blocking", "irrelevant"):
            txn, store = scaled_transaction(refund, n, change)
            floor, atr = work(Floor(), txn, store), work(ATR(), txn, store)
            assert floor["outcome"] == atr["outcome"] and floor["premises_evaluated"] == atr["premises_evaluated"]
            assert Floor().validate(fresh_copy(txn), store).tokens == ATR().validate(fresh_copy(txn), store).tokens


def test_sweep_at_user_points_keeps_the_benchmark_json_and_derives_records_and_table_from_it(tmp_path, monkeypatch):
    out = tmp_path / "run"
    tmpdir = tmp_path / "tmpdir"  # the benchmark subprocess must leave nothing in $TMPDIR
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    assert main(["sweep", "reads", "--reads", "13,61", "--repetitions", "2", "--out", str(out), "--quiet"]) == 0
    assert list(tmpdir.iterdir()) == []
    assert not list(out.rglob(".benchmarks"))  # pytest-benchmark's storage went to scratch/, removed with it

    data = json.loads((out / "benchmarks" / "bench_scaling.json").read_text())
    from_json = {(b["extra_info"]["mechanism"], b["extra_info"]["reads"], b["extra_info"]["repetition"]):
                 b["stats"]["median"] * 1e6 for b in data["benchmarks"]}
    assert set(from_json) == {(m, n, r) for m in ("ATR", "FullScan", FLOOR) for n in (13, 61) for r in (0, 1)}

    records = load_records(out, "revalidation_scaling")
    assert len(records) == len(from_json)
    for r in records.itertuples():
        assert r.latency_us == pytest.approx(from_json[(r.mechanism, r.reads, r.repetition)])
        assert r.benchmark_json == "benchmarks/bench_scaling.json"

    table = pd.read_csv(out / "tables" / "revalidation_scaling.csv")
    assert list(table.columns[:6]) == ["mechanism", "reads", "median_us", "ci_low_us", "ci_high_us", "repetitions"]
    floor = table[table["mechanism"] == FLOOR].set_index("reads")["median_us"]
    for t in table.itertuples():
        assert t.ratio_to_floor == pytest.approx(t.median_us / floor[t.reads])
    assert "ATR / floor at 61 reads" in (out / "report.md").read_text()
    assert sorted(table["reads"].unique()) == [13, 61]
    assert set(table["repetitions"]) == {2}
    fullscan = table[table["mechanism"] == "FullScan"].set_index("reads")
    assert list(fullscan["reads_reread"]) == [13, 61]
    for t in table.itertuples():
        samples = [v for (m, n, _), v in from_json.items() if (m, n) == (t.mechanism, t.reads)]
        assert t.median_us == pytest.approx(np.median(samples))
    assert (out / "figures" / "revalidation_scaling.png").exists()
    assert (out / "figures" / "revalidation_scaling.svg").exists()
    assert "Validation latency vs recorded reads" in (out / "report.md").read_text()


def test_read_counts_below_the_workloads_own_reads_are_refused_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["sweep", "reads", "--reads", "5,13", "--out", str(out), "--quiet"]) == 2
    assert "--reads 5" in capsys.readouterr().err
    assert not out.exists()


def _records(latencies: dict[tuple[str, int], list[float]]) -> pd.DataFrame:
    rows = [{"mechanism": m, "reads": n, "repetition": i, "latency_us": v, "premises_evaluated": 1,
             "reads_reread": 1} for (m, n), values in latencies.items() for i, v in enumerate(values)]
    return pd.DataFrame(rows)


def test_table_gives_median_and_order_statistic_interval_per_point():
    atr13 = [3.0, 3.4, 2.9, 3.1, 3.2, 5.0, 3.0]
    records = _records({("ATR", 13): atr13, ("ATR", 4093): [x * 1.1 for x in atr13]})
    table = analysis.table(records)
    assert list(table["reads"]) == [13, 4093]
    first = table.iloc[0]
    assert (first["median_us"], first["ci_low_us"], first["ci_high_us"]) == pytest.approx(median_ci(atr13))
    assert (first["ci_low_us"], first["ci_high_us"]) == (min(atr13), max(atr13))  # n = 7: min..max
    assert first["repetitions"] == 7


def test_report_states_ratio_slope_and_the_flatness_verdict_from_the_data():
    reads = (13, 4093)
    linear = _records({("FullScan", n): [10.0 * n / 13] * 7 for n in reads})
    flat = _records({("ATR", n): [3.0] * 7 for n in reads})
    steep = _records({("ATR", n): [3.0 * n / 13] * 7 for n in reads})

    section = analysis.report(analysis.table(pd.concat([flat, linear])), None)
    by_metric = {r["metric"]: r for r in section.rows}
    assert by_metric["FullScan: log-log slope between the endpoints"]["ours"] == "1"
    assert by_metric["ATR: latency at 4,093 / latency at 13 reads"]["ours"] == "1"
    assert by_metric["ATR: validation latency at 13 reads (95% CI 3-3 µs)"]["paper"] == f"{paper_value('revalidation_scaling', mechanism='ATR', reads=13)['value']} µs"
    assert "holds in this run" in section.notes

    assert "does not hold in this run" in analysis.report(analysis.table(steep), None).notes


def test_report_gives_atr_as_a_ratio_to_the_floor_at_every_read_count():
    reads = (13, 253, 4093)
    records = pd.concat([_records({("ATR", n): [2.2] * 7 for n in reads}),
                         _records({(FLOOR, n): [2.0] * 7 for n in reads})])
    table = analysis.table(records)
    assert list(table["mechanism"]) == ["ATR"] * 3 + [FLOOR] * 3
    assert table.loc[table["mechanism"] == "ATR", "ratio_to_floor"].tolist() == pytest.approx([1.1] * 3)
    section = analysis.report(table, records)
    by_metric = {r["metric"]: r["ours"] for r in section.rows}
    assert [by_metric[f"ATR / floor at {n:,} reads (aim ≤ 1.3x)"] for n in reads] == ["1.1"] * 3
    assert "the aim of at most 1.3x at every read count (issue 6) holds" in section.notes
    assert not any(r["metric"].startswith("floor: validation latency") for r in section.rows)  # not a mechanism
    slow = pd.concat([_records({("ATR", n): [2.8] * 7 for n in reads}), _records({(FLOOR, n): [2.0] * 7 for n in reads})])
    assert "does not hold" in analysis.report(analysis.table(slow), slow).notes.split("ATR takes")[1]
