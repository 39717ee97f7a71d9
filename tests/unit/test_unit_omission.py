"""Dependency omission (``analysis.revalidation.omission``): the table's columns, the totals, the cost of
conservative linking and the report as rendered, on one small hand-made grid.

Bug classes (issue 16 §7): a rate over the wrong population (a cost per removed false allow over all false allows,
premises per change over the sweep); a published number beside the wrong cell (another linking or another rate);
an expectation with the wrong parameter; a report note that says the opposite of the table (a measured rate
outside its expectation shown as inside).
"""
from __future__ import annotations

import math

import pandas as pd
import pytest

import analysis.revalidation.omission as omission
from analysis.reference import reference

#: the published rates, read from the reference file (never copied into a test)
PUBLISHED = {(v["mechanism"], v["linking"], v["rate"]): v["value"] for v in reference("revalidation_omission")["values"]}


def omission_report_records() -> pd.DataFrame:
    """Two workloads x one mechanism x two rates (one published) x two linkings, 20 executions per cell."""
    rows = []
    for workload, critical in (("refund", 1.0), ("vendor", 0.5)):
        for rate in (0.05, 0.2):
            for linking in ("conservative", "exact"):
                allows = 0 if linking == "conservative" else (2 if rate == 0.05 else 5) + (workload == "vendor")
                for i in range(20):
                    rows.append({"workload": workload, "mechanism": "ATR", "rate": rate, "linking": linking,
                                 "schedule": f"s{i % 2}", "mutation_class": "blocking", "oracle": "BLOCK",
                                 "outcome": "KEEP" if i < allows else "BLOCK", "released": i < allows,
                                 "payload_stale": False,
                                 "premises_evaluated": 4 if linking == "conservative" else 2, "changes": 2 if i % 2 else 1,
                                 "omitted": int(i < allows), "critical": critical,
                                 "exposed": 0.0 if linking == "conservative" else float(i < 10 * critical),
                                 "links": 5 if linking == "conservative" else 3})
    return pd.DataFrame(rows)


GOLDEN_NOTES = (
    'Every execution is a blocking case: 2 workloads (refund, vendor), each with its blocking variants,'
    ' under 2 schedules; 160 executions in all. The fault drops, with probability p drawn from the'
    " execution's seeded RNG, the change's critical edges: field written → premise whose declared rule"
    ' fails on the changed state with a severity that forbids release (computed from the scenario files,'
    ' not from a mechanism; a variant that breaks two such premises has two, dropped together by one'
    ' draw). A *false allow* is an effect released although the oracle (BLOCK) forbids it'
    ' (`analysis/revalidation/counting.py`, the one definition). Share of executions whose change'
    ' touches a critical edge: 0.750; the share whose critical edge matters (still missing after'
    ' linking) is measured per row, and the expectation is p × that share. A mechanism that trusts the'
    ' graph (ATR) should land inside the 95% interval of its expectation; FullScan, if run, is a control'
    ' that ignores the graph. Exact and conservative linking run on the same seeds, so their false'
    ' allows are paired.\n'
    '\n'
    '**Does the rate track p?**\n'
    '\n'
    '| mechanism | linking | p | executions | false allows | measured | 95% CI | share that matters |'
    ' expected (p × share) | 95% interval of expectation | inside |\n'
    '|---|---|---|---|---|---|---|---|---|---|---|\n'
    '| ATR | exact | 5% | 40 | 5 | 12.50% | 4.19%–26.80% | 0.375 | 1.88% | 0.00%–7.50% | **no** |\n'
    '| ATR | conservative | 5% | 40 | 0 | 0.00% | 0.00%–8.81% | 0.000 | 0.00% | 0.00%–0.00% | yes |\n'
    '| ATR | exact | 20% | 40 | 11 | 27.50% | 14.60%–43.89% | 0.375 | 7.50% | 0.00%–17.50% | **no** |\n'
    '| ATR | conservative | 20% | 40 | 0 | 0.00% | 0.00%–8.81% | 0.000 | 0.00% | 0.00%–0.00% | yes |\n'
    '\n'
    '**What conservative linking costs** (every recorded read linked to every premise; paper:'
    ' "Conservatively linking all supplied inputs can avoid missing-edge false allows (§7; no number'
    ' published)"):\n'
    '\n'
    '| mechanism | p | premises/change exact | premises/change conservative | false allows exact | false'
    ' allows conservative | removed | extra premises per removed false allow |\n'
    '|---|---|---|---|---|---|---|---|\n'
    '| ATR | 5% | 1.500 | 3.000 | 5 | 0 | 5 | 16.0 |\n'
    '| ATR | 20% | 1.500 | 3.000 | 11 | 0 | 11 | 7.3 |\n'
    '\n'
    "**Per workload** (the table's rows beside the totals, `workload = all`):\n"
    '\n'
    '| workload | mechanism | linking | p | executions | false allows | measured | expected (p × share)'
    ' | inside |\n'
    '|---|---|---|---|---|---|---|---|---|\n'
    '| refund | ATR | exact | 5% | 20 | 2 | 10.00% | 2.50% | yes |\n'
    '| refund | ATR | conservative | 5% | 20 | 0 | 0.00% | 0.00% | yes |\n'
    '| refund | ATR | exact | 20% | 20 | 5 | 25.00% | 10.00% | yes |\n'
    '| refund | ATR | conservative | 20% | 20 | 0 | 0.00% | 0.00% | yes |\n'
    '| vendor | ATR | exact | 5% | 20 | 3 | 15.00% | 1.25% | **no** |\n'
    '| vendor | ATR | conservative | 5% | 20 | 0 | 0.00% | 0.00% | yes |\n'
    '| vendor | ATR | exact | 20% | 20 | 6 | 30.00% | 5.00% | **no** |\n'
    '| vendor | ATR | conservative | 20% | 20 | 0 | 0.00% | 0.00% | yes |\n'
)


@pytest.mark.planted("analysis.revalidation.omission:cost",
                     'out["extra_premises_per_removed"] = (extra / out["false_allows_removed"])',
                     'out["extra_premises_per_removed"] = (extra / out["false_allows_exact"])')
def test_totals_and_cost_of_conservative_linking():
    """Bug class: a rate over the wrong population: the cost per removed false allow is the extra premises over
    the false allows removed (not all false allows), per mechanism and rate; no cost where nothing was removed."""
    tab = omission.table(omission_report_records())
    tot = omission.totals(tab)
    assert list(tot.index) == [0, 1, 2, 3] and set(tot["workload"]) == {"all"}
    assert list(zip(tot["rate"], tot["linking"])) == [(0.05, "exact"), (0.05, "conservative"), (0.2, "exact"),
                                                     (0.2, "conservative")]
    cost = omission.cost(tab)
    assert cost.to_dict("records") == [
        {"mechanism": "ATR", "rate": 0.05, "premises_per_change_exact": 1.5, "premises_per_change_conservative": 3.0,
         "false_allows_exact": 5, "false_allows_conservative": 0, "false_allows_removed": 5,
         "extra_premises_per_removed": 16.0},
        {"mechanism": "ATR", "rate": 0.2, "premises_per_change_exact": 1.5, "premises_per_change_conservative": 3.0,
         "false_allows_exact": 11, "false_allows_conservative": 0, "false_allows_removed": 11,
         "extra_premises_per_removed": pytest.approx(80 / 11)}]
    leaky = omission_report_records()  # conservative linking lets one false allow through: 4 removed, not 5
    first = leaky.index[(leaky["linking"] == "conservative") & (leaky["rate"] == 0.05)][0]
    leaky.loc[first, ["outcome", "released"]] = ["KEEP", True]
    assert omission.cost(omission.table(leaky))["extra_premises_per_removed"].iloc[0] == 80 / 4
    same = omission_report_records()
    same.loc[same["linking"] == "conservative", ["outcome", "released"]] = same.loc[
        same["linking"] == "exact", ["outcome", "released"]].to_numpy()
    none_removed = omission.cost(omission.table(same))
    assert list(none_removed["false_allows_removed"]) == [0, 0]
    assert none_removed["extra_premises_per_removed"].isna().all()


@pytest.mark.planted("analysis.revalidation.omission:table",
                     'out["linking"] = pd.Categorical(out["linking"], LINKING_ORDER, ordered=True)',
                     'out["linking"] = pd.Categorical(out["linking"], sorted(LINKING_ORDER), ordered=True)')
def test_table_columns_order_and_types():
    """Bug class: a row beside the wrong cell: rows sorted by workload (totals first), mechanism in order of
    appearance, rate, linking (exact before conservative); counts are integers."""
    tab = omission.table(omission_report_records())
    assert list(tab.columns) == omission.COLUMNS
    assert list(zip(tab["workload"], tab["rate"], tab["linking"]))[:6] == [
        ("all", 0.05, "exact"), ("all", 0.05, "conservative"), ("all", 0.2, "exact"), ("all", 0.2, "conservative"),
        ("refund", 0.05, "exact"), ("refund", 0.05, "conservative")]
    assert all(type(v) is str for v in tab["workload"]) and all(type(v) is str for v in tab["linking"])
    for col in ("omitted", "false_allows", "premises_evaluated"):
        assert str(tab[col].dtype) == "int64"
    row = tab.iloc[0]
    assert (row["omitted"], row["premises_evaluated"], row["links"], row["premises_per_change"]) == (5, 80, 3.0, 1.5)
    assert (row["critical_share"], row["exposed_share"], row["expected_rate"]) == (0.75, 0.375, 0.05 * 0.375)
    assert not row["within_expected"] and tab.iloc[4]["within_expected"]


@pytest.mark.parametrize("mechanism,linking,rate,value", [
    ("ATR", "exact", 0.05, PUBLISHED["ATR", "exact", 0.05]),
    ("ATR", "exact", 0.05 + 1e-12, PUBLISHED["ATR", "exact", 0.05]),
    ("ATR", "exact", 0.1, PUBLISHED["ATR", "exact", 0.1]),
    pytest.param("ATR", "conservative", 0.05, None, marks=pytest.mark.planted(  # another linking's value
        "analysis.revalidation.omission:paper_rate", '(v["mechanism"], v["linking"], v["metric"]) == (mechanism, linking,',
        '(v["mechanism"], v["linking"], v["metric"]) == (mechanism, v["linking"],')),
    ("FullScan", "exact", 0.05, None), ("ATR", "exact", 0.2, None),
])
def test_paper_rate_is_the_published_value_of_that_cell(mechanism, linking, rate, value):
    """Bug class: a published number beside the wrong cell (another linking, mechanism or rate)."""
    assert omission.paper_rate(mechanism, linking, rate) == value


@pytest.mark.planted("analysis.revalidation.omission:report",
                     'r["ours"] += f" ({t[\'false_allows\']:,} of {t[\'executions\']:,}; 95% CI {pct(t[\'ci_low\'])}–{pct(t[\'ci_high\'])})"',
                     'r["ours"] += f" ({t[\'false_allows\']:,} of {t[\'executions\']:,})"')
def test_report_as_rendered():
    """Bug classes: a published number beside the wrong cell; a measured rate outside its expectation's interval
    shown as inside; a note on coverage (workloads, schedules, executions) over the wrong columns; the cost table
    over the wrong population. The whole section is pinned for one small grid."""
    records = omission_report_records()
    section = omission.report(omission.table(records), records)
    assert section.artifact == "revalidation_omission"
    assert section.title == "Dependency omission: false-allow rate vs omission probability"
    assert section.rows == [
        {"metric": "ATR, exact linking, p = 5%: false-allow rate", "ours": "12.50% (5 of 40; 95% CI 4.19%–26.80%)",
         "paper": omission.pct(PUBLISHED["ATR", "exact", 0.05]),
         "difference": f"{100 * (5 / 40 - PUBLISHED['ATR', 'exact', 0.05]):+.2f} pp (paper value inside our CI)"},
        {"metric": "ATR, conservative linking, p = 5%: false-allow rate",
         "ours": "0.00% (0 of 40; 95% CI 0.00%–8.81%)", "paper": "not published", "difference": "n/a"},
        {"metric": "ATR, exact linking, p = 20%: false-allow rate", "ours": "27.50% (11 of 40; 95% CI 14.60%–43.89%)",
         "paper": "not published", "difference": "n/a"},
        {"metric": "ATR, conservative linking, p = 20%: false-allow rate",
         "ours": "0.00% (0 of 40; 95% CI 0.00%–8.81%)", "paper": "not published", "difference": "n/a"}]
    assert section.notes == GOLDEN_NOTES


@pytest.mark.planted("analysis.revalidation.omission:report",
                     '("inside" if t["ci_low"] <= paper <= t["ci_high"] else "outside")',
                     '"inside"')
def test_report_paper_value_outside_the_ci_and_critical_share_by_row():
    """Bug class: a published number said to lie inside our interval when it lies outside; a share of critical
    executions shown as one number where it differs by row."""
    records = omission_report_records()
    records.loc[records["rate"] == 0.2, "critical"] = 0.25
    records.loc[(records["rate"] == 0.05) & (records["linking"] == "exact"), ["outcome", "released"]] = ["KEEP", True]
    section = omission.report(omission.table(records), records)
    assert section.rows[0]["difference"] == (f"{100 * (1 - PUBLISHED['ATR', 'exact', 0.05]):+.2f} pp "
                                             "(paper value outside our CI)")
    assert ("Share of executions whose change touches a critical edge: 0.250–0.750 by row; the share whose critical "
            "edge matters") in section.notes


def test_pct():
    assert omission.pct(0.1234) == "12.34%" and omission.pct(1) == "100.00%"


@pytest.mark.planted("analysis.revalidation.omission:table",
                     'list(dict.fromkeys(records["mechanism"]))',
                     'sorted(set(records["mechanism"]))')
def test_rows_follow_the_records_order_of_workloads_and_mechanisms():
    """Bug class: a row beside the wrong cell: workloads and mechanisms in the order the records give them (totals
    first), not alphabetical; the cost table in the same order, its counts integers."""
    records = omission_report_records()
    records["workload"] = records["workload"].map({"refund": "zeta", "vendor": "alpha"})
    other = records.assign(mechanism="Aardvark")
    records = pd.concat([records.assign(mechanism="Zebra"), other], ignore_index=True)
    tab = omission.table(records)
    assert list(dict.fromkeys(tab["workload"])) == ["all", "zeta", "alpha"]
    assert list(dict.fromkeys(tab["mechanism"])) == ["Zebra", "Aardvark"]
    assert list(omission.totals(tab).columns) == omission.COLUMNS
    cost = omission.cost(tab)
    assert list(zip(cost["mechanism"], cost["rate"])) == [("Zebra", 0.05), ("Zebra", 0.2), ("Aardvark", 0.05),
                                                          ("Aardvark", 0.2)]
    assert str(cost["false_allows_exact"].dtype) == "int64" and str(cost["false_allows_conservative"].dtype) == "int64"


@pytest.mark.planted("analysis.revalidation.omission:cost",
                     '.where(out["false_allows_removed"] > 0)',
                     '.where(out["false_allows_removed"] > 1)')
def test_one_false_allow_removed_has_a_cost_and_none_removed_says_so():
    """Bug class: a rate over the wrong population: one removed false allow has its cost (not n/a); none removed is
    said in words in the report."""
    records = omission_report_records()
    exact = (records["linking"] == "exact") & (records["rate"] == 0.05)
    records.loc[exact, "released"] = False
    records.loc[exact[exact].index[0], "released"] = True
    cost = omission.cost(omission.table(records))
    assert list(cost["false_allows_removed"]) == [1, 11] and list(cost["extra_premises_per_removed"])[0] == 80.0
    records.loc[exact, "released"] = False
    notes = omission.report(omission.table(records), records).notes
    assert "| ATR | 5% | 1.500 | 3.000 | 0 | 0 | 0 | n/a (none removed) |" in notes


@pytest.mark.planted("analysis.revalidation.omission:report",
                     't["ci_low"] <= paper <= t["ci_high"]',
                     't["ci_low"] < paper < t["ci_high"]')
def test_a_published_value_on_an_interval_bound_is_inside(monkeypatch):
    """Bug class: a published number said to lie outside our interval when it lies on its bound (the interval is
    closed); without a published claim on conservative linking, the report says none is published."""
    records = omission_report_records()
    records.loc[records["linking"] == "conservative", "released"] = True  # 40 of 40: the interval reaches 1
    published = {"values": [{"mechanism": "ATR", "linking": "exact", "rate": 0.2, "metric": "false_allow_rate",
                             "value": 0.0},
                            {"mechanism": "ATR", "linking": "conservative", "rate": 0.2, "metric": "false_allow_rate",
                             "value": 1.0}]}
    monkeypatch.setattr(omission, "reference", lambda artifact: published)
    records.loc[(records["linking"] == "exact") & (records["rate"] == 0.2), "released"] = False  # 0 of 40: from 0
    section = omission.report(omission.table(records), records)
    diffs = {r["metric"]: r["difference"] for r in section.rows}
    assert diffs["ATR, exact linking, p = 20%: false-allow rate"].endswith("(paper value inside our CI)")
    assert diffs["ATR, conservative linking, p = 20%: false-allow rate"].endswith("(paper value inside our CI)")
    assert 'paper: "no number published"):' in section.notes
