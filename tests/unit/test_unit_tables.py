"""Table builders, expectation formulas, statistics and report rows, on small hand-made record frames.

Bug classes (issue 16 §7): a rate over the wrong population (saturation over served racers instead of k; a share
over the whole sweep instead of one rate); an expectation formula with the wrong parameter (all declared contracts
instead of those that matter), in the report or in the figure; interval columns (Clopper-Pearson bounds,
confidence level) asserted nowhere; a report row that sets a published number beside the wrong measured cell.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

import analysis.isolation.contract_omission as contract_omission
import analysis.resume.concurrency as concurrency
import analysis.revalidation.omission as omission
import analysis.revalidation.outcomes as outcomes
import analysis.revalidation.scaling as scaling
from analysis.reference import reference
from analysis.stats import binomial_ci, expectation_interval, median_ci

LEVEL = 0.95  # the level every interval column of the lab declares ("95% CI")


def clopper_pearson(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """The exact interval from its definition (beta quantiles), independent of analysis.stats."""
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else sps.beta.ppf(a, k, n - k + 1)
    hi = 1.0 if k == n else sps.beta.ppf(1 - a, k + 1, n - k)
    return float(lo), float(hi)


def assert_interval_columns(tab: pd.DataFrame, rate: str, hits: str, n: str, low="ci_low", high="ci_high"):
    """Bug class: interval columns asserted nowhere: every row has ci_low <= rate <= ci_high, and the bounds are
    the 95% Clopper-Pearson interval of that row's own counts (a wrong level or a wrong count moves them)."""
    assert len(tab)
    for r in tab.to_dict("records"):
        assert r[low] <= r[rate] <= r[high], r
        assert (r[low], r[high]) == pytest.approx(clopper_pearson(int(r[hits]), int(r[n])), abs=1e-9), r


# ------------------------------------------------------------------ statistics
@pytest.mark.planted("analysis.stats:binomial_ci",
                     'proportion_ci(confidence_level=level,',
                     'proportion_ci(confidence_level=0.95,')
@pytest.mark.parametrize("k,n", [(0, 10), (1, 10), (5, 10), (10, 10), (37, 2000)])
def test_binomial_ci_is_the_exact_95_percent_interval(k, n):
    """Bug class: a Clopper-Pearson interval at the wrong level or of the wrong proportion."""
    assert binomial_ci(k, n) == pytest.approx(clopper_pearson(k, n), abs=1e-12)
    assert binomial_ci(k, n, 0.99) == pytest.approx(clopper_pearson(k, n, 0.99), abs=1e-12)
    assert all(math.isnan(x) for x in binomial_ci(0, 0))
    assert binomial_ci(1, 1) == pytest.approx((0.025, 1.0)) and binomial_ci(0, 1) == pytest.approx((0.0, 0.975))


@pytest.mark.planted("analysis.stats:expectation_interval",
                     'tail = (1 - level) / 2',
                     'tail = 1 - level')
def test_expectation_interval_is_central_and_scaled():
    """Bug class: the expectation's interval at the wrong level, one-sided, or not divided by n."""
    lo, hi = expectation_interval(1000, 0.1)
    assert (lo, hi) == (sps.binom.ppf(0.025, 1000, 0.1) / 1000, sps.binom.ppf(0.975, 1000, 0.1) / 1000)
    assert lo < 0.1 < hi and expectation_interval(1000, 0.0) == (0.0, 0.0)
    wider = expectation_interval(1000, 0.1, 0.99)
    assert wider[0] < lo and wider[1] > hi


@pytest.mark.parametrize("n", [1, 5, 6, 7, 8, 20, pytest.param(51, marks=pytest.mark.planted(
    "analysis.stats:median_ci", "if coverage >= level:", "if coverage >= level - 0.05:"))])
def test_median_ci_covers_at_the_level_with_the_tightest_ranks(n):
    """Bug class: a median interval whose coverage is below 95% (wrong rank j) or needlessly wide."""
    x = np.arange(n, dtype=float)[::-1] * 3.0  # unsorted input
    med, lo, hi = median_ci(x)
    assert med == float(np.median(x)) and lo <= med <= hi
    s = np.sort(x)
    cover = lambda j: sps.binom.cdf(n - j, n, 0.5) - sps.binom.cdf(j - 1, n, 0.5)  # noqa: E731
    j = max([c for c in range(1, n // 2 + 1) if cover(c) >= LEVEL], default=0)
    assert (lo, hi) == ((s[j - 1], s[n - j]) if j else (s[0], s[-1]))
    if n == 7:
        assert (lo, hi) == (s[0], s[-1])  # the paper's seven repetitions: (min, max), coverage 98.4%
    assert len(median_ci([])) == 3 and all(math.isnan(v) for v in median_ci([]))


# ------------------------------------------------------------------ dependency omission (revalidation)
def omission_records() -> pd.DataFrame:
    """Two workloads, one mechanism, two rates, exact linking: distinct false-allow counts per cell."""
    rows = []
    for workload, exposed in (("refund", 1.0), ("vendor", 0.5)):
        for rate, allows in ((0.0, 0), (0.2, 3 if workload == "refund" else 1)):
            for i in range(10):
                rows.append({"workload": workload, "mechanism": "ATR", "rate": rate, "linking": "exact",
                             "oracle": "BLOCK", "outcome": "KEEP" if i < allows else "BLOCK", "released": i < allows,
                             "payload_stale": False, "premises_evaluated": 2, "changes": 1, "omitted": int(i < allows),
                             "critical": 1.0, "exposed": float(i < 10 * exposed), "links": 3})
    return pd.DataFrame(rows)


@pytest.mark.planted("analysis.revalidation.omission:table",
                     'out["false_allow_rate"] = out["false_allows"] / out["executions"]',
                     'out["false_allow_rate"] = out["false_allows"] / out["executions"].sum()')
def test_omission_rate_is_per_cell_not_over_the_sweep():
    """Bug class: a share over the whole sweep instead of one rate (or one workload): each row's rate is its own
    false allows over its own executions; the ``all`` row sums the workloads at that rate only."""
    tab = omission.table(omission_records())
    got = {(r.workload, r.rate): (r.false_allows, r.executions, r.false_allow_rate) for r in tab.itertuples()}
    assert got[("refund", 0.2)] == (3, 10, 0.3) and got[("vendor", 0.2)] == (1, 10, 0.1)
    assert got[("all", 0.2)] == (4, 20, 0.2) and got[("all", 0.0)] == (0, 20, 0.0)
    assert_interval_columns(tab, "false_allow_rate", "false_allows", "executions")


@pytest.mark.planted("analysis.revalidation.omission:table",
                     'out["expected_rate"] = out["rate"] * out["exposed_share"]',
                     'out["expected_rate"] = out["rate"] * out["critical_share"]')
def test_omission_expectation_is_p_times_the_share_that_matters():
    """Bug class: an expectation formula with the wrong parameter (p x the share touching a critical edge, or p
    alone, instead of p x the share whose edge is still missing after linking)."""
    tab = omission.table(omission_records())
    row = tab[(tab["workload"] == "vendor") & (tab["rate"] == 0.2)].iloc[0]
    assert row["exposed_share"] == 0.5 and row["critical_share"] == 1.0
    assert row["expected_rate"] == pytest.approx(0.1)
    assert (row["expected_low"], row["expected_high"]) == expectation_interval(10, 0.1)
    assert bool(row["within_expected"]) == (row["expected_low"] <= 0.1 <= row["expected_high"])


@pytest.mark.planted("analysis.revalidation.omission:report",
                     'paper = paper_rate(t["mechanism"], t["linking"], t["rate"])',
                     'paper = paper_rate(t["mechanism"], "exact", t["rate"])')
def test_omission_report_sets_each_published_rate_beside_its_own_cell():
    """Bug class: a report row that sets a published number beside the wrong measured cell (another rate, another
    linking or another mechanism)."""
    published = {(v["mechanism"], v["linking"], v["rate"]): v["value"] for v in reference("revalidation_omission")["values"]}
    rows = []
    for (mech, linking, rate), value in published.items():
        for lk in ("exact", "conservative"):
            for i in range(200):
                allows = round(200 * rate * (2 if lk == "exact" else 0.5))  # distinct from the paper and per cell
                rows.append({"workload": "refund", "mechanism": mech, "rate": rate, "linking": lk, "oracle": "BLOCK",
                             "outcome": "KEEP" if i < allows else "BLOCK", "released": i < allows,
                             "payload_stale": False, "premises_evaluated": 2, "changes": 1, "omitted": 0,
                             "critical": 1.0, "exposed": 1.0, "links": 3, "schedule": "s1"})
    records = pd.DataFrame(rows)
    tab = omission.table(records)
    section = omission.report(tab, records)
    assert len(section.rows) == 2 * len(published)
    for r in section.rows:
        mech, linking, p = r["metric"].split(",")[0], r["metric"].split(", ")[1].split()[0], r["metric"].split("p = ")[1]
        rate = float(p.split("%")[0]) / 100
        measured = tab[(tab.workload == "all") & (tab.mechanism == mech) & (tab.linking == linking)
                       & np.isclose(tab.rate, rate)].iloc[0]
        assert r["ours"].startswith(f"{100 * measured.false_allow_rate:.2f}%")
        key = next((k for k in published if k[:2] == (mech, linking) and math.isclose(k[2], rate)), None)
        assert r["paper"] == (f"{100 * published[key]:.2f}%" if key else "not published"), r


# ------------------------------------------------------------------ contract omission (isolation)
def contract_records(k_matter: int = 2, declared: int = 5) -> pd.DataFrame:
    rows = []
    for rate, hits in ((0.0, 0), (0.1, 4), (0.3, 9)):
        for i in range(20):
            rows.append({"rate": rate, "mechanism": "SSI", "incompatible_admitted": int(i < hits),
                         "contracts_that_matter": k_matter, "contracts": declared})
    return pd.DataFrame(rows)


@pytest.mark.planted("analysis.isolation.contract_omission:table",
                     'out["share"] = out["incompatible_admitted"] / out["executions"]',
                     'out["share"] = out["incompatible_admitted"] / out["executions"].sum()')
def test_contract_omission_share_is_per_rate():
    """Bug class: a share over the whole sweep instead of one rate."""
    records = contract_records().iloc[::-1].reset_index(drop=True)  # rows in any order: the table sorts by rate
    tab = contract_omission.table(records)
    assert list(tab.columns) == contract_omission.COLUMNS  # one mechanism: no mechanism column
    assert list(tab["rate"]) == [0.0, 0.1, 0.3]
    assert list(tab["share"]) == [0.0, 0.2, 0.45] and list(tab["executions"]) == [20, 20, 20]
    label = contract_omission.report(tab, records).rows[1]["metric"]
    assert label == "p = 10%: share of executions admitting an incompatible combination"
    assert_interval_columns(tab, "share", "incompatible_admitted", "executions")


@pytest.mark.planted("analysis.isolation.contract_omission:expected",
                     'k = int(records.loc[records["rate"] == rate, "contracts_that_matter"].max())',
                     'k = int(records.loc[records["rate"] == rate, "contracts"].max())')
def test_contract_omission_expectation_uses_the_contracts_that_matter_in_the_report():
    """Bug class: an expectation formula with the wrong parameter: 1-(1-p)^k with k the declared contracts (5)
    instead of those that matter (2), in the report."""
    records = contract_records()
    assert contract_omission.expected(records, 0.3) == pytest.approx(1 - 0.7 ** 2)
    section = contract_omission.report(contract_omission.table(records), records)
    assert f"| 30% | 45.00% | {100 * (1 - 0.7 ** 2):.2f}% |" in section.notes
    assert "2 of the 5 contracts matter" in section.notes
    assert "95% CI" in section.rows[0]["ours"]


@pytest.mark.planted("figures.isolation.contract_omission:draw",
                     'k = int(records["contracts_that_matter"].max())',
                     'k = int(records["contracts"].max())')
def test_contract_omission_expectation_uses_the_contracts_that_matter_in_the_figure(tmp_path, monkeypatch):
    """Bug class: an expectation formula with the wrong parameter in the figure (the dotted expectation line drawn
    with all declared contracts)."""
    import figures.isolation.contract_omission as fig_module

    drawn = {}
    monkeypatch.setattr(fig_module, "save", lambda fig, out: drawn.setdefault("fig", fig) and [])
    records = contract_records()
    fig_module.draw(records, contract_omission.table(records), tmp_path / "f")
    line = next(ln for ln in drawn["fig"].axes[0].get_lines() if ln.get_label().startswith("1 - (1 - p)^"))
    p = np.asarray(line.get_xdata())
    assert line.get_label() == "1 - (1 - p)^2"
    assert np.allclose(line.get_ydata(), 1 - (1 - p) ** 2)
    assert p.max() == pytest.approx(0.3)


# ------------------------------------------------------------------ concurrent resume
def concurrency_records() -> pd.DataFrame:
    rows = []
    for runtime, fired, served in (("sequencer", 1, 1), ("naive", 3, 3), ("langgraph", 4, 4)):
        for rep in range(2):
            rows.append({"runtime": runtime, "backend": "postgres", "k": 4, "jitter_ms": 25.0, "effects_fired": fired,
                         "served": served, "refused": 4 - served, "failed": 0, "indeterminate": 0,
                         "repetition": rep})
    for k in (2, 3):
        rows.append({"runtime": "langgraph", "backend": "postgres", "k": k, "jitter_ms": 25.0, "effects_fired": k,
                     "served": k, "refused": 0, "failed": 0, "indeterminate": 0, "repetition": 0})
    return pd.DataFrame(rows)


@pytest.mark.planted("analysis.resume.concurrency:table",
                     '"saturation": float((g["effects_fired"] / g["k"]).mean()),',
                     '"saturation": float((g["effects_fired"] / g["served"]).mean()),')
def test_saturation_is_effects_over_k_not_over_served():
    """Bug class: a rate over the wrong population: saturation over served racers (always 1 when every served
    racer fires) instead of over the k racers."""
    tab = concurrency.table(concurrency_records()).set_index(["runtime", "k"])
    assert tab.loc[("sequencer", 4), "saturation"] == 0.25
    assert tab.loc[("naive", 4), "saturation"] == 0.75
    assert tab.loc[("langgraph", 4), "saturation"] == 1.0 and tab.loc[("langgraph", 2), "saturation"] == 1.0
    assert tab.loc[("naive", 4), "repetitions"] == 2 and tab.loc[("naive", 4), "effects_fired_mean"] == 3.0


@pytest.mark.planted("analysis.resume.concurrency:report",
                     'published.get((b, int(k), float(j)), ref',
                     'published.get((b, 2, float(j)), ref')
def test_concurrency_report_sets_published_saturation_beside_its_own_cell():
    """Bug class: a report row that sets a published number beside the wrong measured cell (another k, another
    backend, or another runtime than the one the paper measured)."""
    records = concurrency_records()
    section = concurrency.report(concurrency.table(records), records)
    mats = {m.title.split(":")[0]: m for m in section.matrices}
    ref = reference("resume_concurrency")
    published = {(v["backend"], int(v["k"]), float(v["jitter_ms"])): v["saturation"] for v in ref["values"]}
    lg = mats["langgraph"]
    for (r, c), paper in lg.paper.items():
        backend, k = r.split(" k=")
        expect = published.get((backend, int(k), float(c.split()[0])), ref["default_saturation"])
        assert paper == f"{expect:.3g}", (r, c)
    assert lg.paper[("postgres k=4", "25 ms")] == "0.95" and lg.cells[("postgres k=4", "25 ms")] == "1"
    assert lg.paper[("postgres k=2", "25 ms")] == "0.95" and lg.paper[("postgres k=3", "25 ms")] == "0.933"
    assert not mats["sequencer"].paper and not mats["naive"].paper
    lg_row = next(r for r in section.rows if r["metric"] == "langgraph: cells with saturation 1.0")
    assert lg_row["paper"].startswith(f"{ref['cells_saturated']} of {ref['cells']}")
    assert next(r for r in section.rows if r["metric"] == "naive: cells with saturation 1.0")["paper"] == "not published"


# ------------------------------------------------------------------ controlled outcomes
@pytest.mark.planted("analysis.revalidation.outcomes:report",
                     'p = paper_value("revalidation_outcomes", mechanism=m, metric=metric)',
                     'p = paper_value("revalidation_outcomes", mechanism="ATR", metric=metric)')
def test_outcomes_report_sets_each_published_count_beside_its_own_mechanism_and_metric():
    """Bug class: a report row that sets a published number beside the wrong measured cell (another mechanism's
    or another metric's count)."""
    rows = []
    for mech in ("ATR", "NoCheck", "VersionAbort", "FullScan"):
        for oracle in ("KEEP", "REFRESH", "REPLAN", "BLOCK"):
            rows.append({"workload": "refund", "mechanism": mech, "mutation_class": "blocking", "schedule": "s1",
                         "oracle": oracle, "outcome": "KEEP" if mech == "NoCheck" else "REPLAN" if mech == "VersionAbort"
                         else oracle, "released": mech == "NoCheck" or oracle in ("KEEP", "REFRESH"),
                         "payload_stale": mech == "NoCheck" and oracle == "REFRESH", "premises_evaluated": 3,
                         "changes": 1})
    records = pd.DataFrame(rows)
    section = outcomes.report(outcomes.table(records), records)
    by_metric = {r["metric"]: r for r in section.rows}
    n = reference("revalidation_outcomes")["executions_per_mechanism"]
    for v in reference("revalidation_outcomes")["values"]:
        r = by_metric[f"{v['mechanism']}: {v['metric'].replace('_', ' ')}"]
        want = f"{100 * v['value']:.2f}%" if v["metric"] == "oracle_agreement" else f"{v['value']:,.0f} of {n:,}"
        assert r["paper"].startswith(want), r
    assert by_metric["NoCheck: invalid effects"]["ours"].startswith("3 of 4")
    assert by_metric["ATR: invalid effects"]["paper"] == "not published"
    assert by_metric["FullScan: false allows"]["paper"] == "not published"


# ------------------------------------------------------------------ latency points
@pytest.mark.planted("analysis.revalidation.scaling:table",
                     'median, low, high = median_ci(g["latency_us"])',
                     'median, low, high = median_ci(g["latency_us"], level=0.5)')
def test_scaling_table_interval_columns_bracket_the_median():
    """Bug class: interval columns asserted nowhere: each latency point's interval brackets its median and is the
    95% order-statistic interval of its own repetitions."""
    rng = np.random.default_rng(7)
    rows = [{"mechanism": m, "reads": r, "latency_us": float(v), "premises_evaluated": 1, "reads_reread": 0}
            for m in ("ATR", "floor") for r in (13, 61) for v in rng.lognormal(2, 0.3, 9)]
    records = pd.DataFrame(rows)
    tab = scaling.table(records)
    for t in tab.itertuples():
        g = records[(records.mechanism == t.mechanism) & (records.reads == t.reads)]["latency_us"]
        assert t.ci_low_us <= t.median_us <= t.ci_high_us
        assert (t.median_us, t.ci_low_us, t.ci_high_us) == median_ci(g)
        assert t.repetitions == 9
    atr = tab[tab.mechanism == "ATR"].set_index("reads")
    floor = tab[tab.mechanism == "floor"].set_index("reads")
    assert atr.loc[61, "ratio_to_floor"] == pytest.approx(atr.loc[61, "median_us"] / floor.loc[61, "median_us"])


def two_mechanism_records() -> pd.DataFrame:
    """Two mechanisms, two rates; the contracts that matter differ by rate (2 at p = 0, 3 at p = 0.1)."""
    rows = []
    for rate, hits, k in ((0.0, 0, 2), (0.1, 4, 3)):
        for mech in ("SSI", "SSI+inference"):
            for i in range(20):
                rows.append({"rate": rate, "mechanism": mech, "incompatible_admitted": int(i < hits and mech == "SSI"),
                             "contracts_that_matter": k, "contracts": 5})
    return pd.DataFrame(rows)


GOLDEN_CONTRACT_OMISSION = "# h\n\n## Contract omission: incompatible combinations SSI admits (`isolation_contract_omission`)\n\n| metric | ours | paper | difference |\n|---|---|---|---|\n| SSI, p = 0%: share of executions admitting an incompatible combination | 0.00% (0 of 20; 95% CI 0.00%-16.84%) | not published | n/a |\n| SSI+inference, p = 0%: share of executions admitting an incompatible combination | 0.00% (0 of 20; 95% CI 0.00%-16.84%) | not published | n/a |\n| SSI, p = 10%: share of executions admitting an incompatible combination | 20.00% (4 of 20; 95% CI 5.73%-43.66%) | not published | n/a |\n| SSI+inference, p = 10%: share of executions admitting an incompatible combination | 0.00% (0 of 20; 95% CI 0.00%-16.84%) | not published | n/a |\n\nNot in the paper: the fault makes its declaration assumption fail at a known rate.\n\nEach of the 5 declared contracts of `omission_pipeline` is dropped with probability p (seeded, per\nexecution) from what the mechanism sees; the compatibility-skew checker judges by all of them. 3 of\nthe 5 contracts matter (dropping one alone lets SSI admit an incompatible pair; measured by\nrunning), so SSI's failure rate should track 1 - (1 - p)^k: a guarantee over declared contracts\ndegrades exactly with the declarations. Intervals are exact (Clopper-Pearson).\n\n| p | measured | expected 1-(1-p)^k | 95% interval of expectation | inside |\n|---|---|---|---|---|\n| 0% | 0.00% | 0.00% | 0.00%-0.00% | yes |\n| 0% | 0.00% | 0.00% | 0.00%-0.00% | yes |\n| 10% | 20.00% | 27.10% | 10.00%-45.00% | yes |\n| 10% | 0.00% | 27.10% | 10.00%-45.00% | **no** |\n"


@pytest.mark.planted("analysis.isolation.contract_omission:report",
                     'e = expected(records, r.rate)',
                     'e = expected(records, tab.rate.max())')
def test_contract_omission_report_per_mechanism_and_rate_as_rendered():
    """Bug classes: a report row that sets a number beside the wrong cell (another mechanism's or another rate's
    share, count or interval), and an expectation with the wrong parameter (k of another rate): the whole rendered
    section is pinned for two mechanisms x two rates."""
    from analysis.report import render_sections

    records = two_mechanism_records()
    tab = contract_omission.table(records)
    assert list(tab.columns) == ["mechanism", *contract_omission.COLUMNS]
    assert contract_omission.expected(records, 0.1) == pytest.approx(1 - 0.9 ** 3)
    assert "# h\n\n" + render_sections([contract_omission.report(tab, records)]) == GOLDEN_CONTRACT_OMISSION
