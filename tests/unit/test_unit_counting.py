"""The revalidation counting rules (``analysis.revalidation.counting``), one execution per row.

Bug classes (issue 16 §7): an invalid effect counted from the stated outcome instead of what was released; a false
allow or a false block under the wrong oracles; a rate over the wrong population (premises per change inverted, a
total row that drops or double-counts a group); a report's coverage counts over the wrong columns.
"""
from __future__ import annotations

import pandas as pd
import pytest

from analysis.revalidation.counting import classify, order_with_all, plural, run_counts, with_all, with_counts

FLAGS = ["agree", "invalid_effect", "false_allow", "false_block", "unnecessary_replan"]


@pytest.mark.parametrize("oracle,outcome,released,stale,expect", [
    # oracle   outcome   released stale   agree  invalid false_allow false_block unnecessary_replan
    ("KEEP", "KEEP", True, False, (True, False, False, False, False)),
    ("KEEP", "KEEP", True, True, (True, True, False, False, False)),       # a stale payload released
    ("KEEP", "REPLAN", False, False, (False, False, False, True, True)),   # a safe change replanned
    ("KEEP", "BLOCK", False, False, (False, False, False, True, False)),
    ("REFRESH", "REPLAN", False, False, (False, False, False, True, False)),  # a false block, not "unnecessary"
    ("REFRESH", "KEEP", True, True, (False, True, False, False, False)),
    ("REFRESH", "REFRESH", True, False, (True, False, False, False, False)),
    ("REPLAN", "KEEP", True, False, (False, True, True, False, False)),    # released although forbidden
    ("BLOCK", "KEEP", True, False, (False, True, True, False, False)),
    pytest.param("BLOCK", "BLOCK", True, False, (True, True, True, False, False),  # said BLOCK, released anyway
                 marks=pytest.mark.planted("analysis.revalidation.counting:classify",
                                           '"invalid_effect": released & (stale | forbidden),',
                                           '"invalid_effect": (stale | forbidden) & ~outcome.isin(STOPS),')),
    ("BLOCK", "KEEP", False, False, (False, False, False, False, False)),  # said KEEP, released nothing
    ("BLOCK", "REPLAN", False, True, (False, False, False, False, False)),  # stale but never released
    ("REPLAN", "BLOCK", False, False, (False, False, False, False, False)),
])
def test_classify_counts_from_what_was_released(oracle, outcome, released, stale, expect):
    """Bug class: an invalid effect or false allow counted from the stated outcome instead of what was released, a
    stale payload that was never released counted, a false block under an oracle that forbids release, an
    unnecessary replan counted where the oracle is not KEEP."""
    rec = pd.DataFrame([{"oracle": oracle, "outcome": outcome, "released": released, "payload_stale": stale}])
    got = classify(rec)
    assert list(got.columns) == FLAGS
    assert tuple(bool(got[c].iloc[0]) for c in FLAGS) == expect


@pytest.mark.planted("analysis.revalidation.counting:classify",
                     'records["premises_evaluated"] / records["changes"]',
                     'records["changes"] / records["premises_evaluated"]')
def test_classify_keeps_the_index_and_divides_premises_by_changes():
    """Bug class: a rate over the wrong population: premises per change inverted or multiplied; counts aligned with
    the wrong records (the index renumbered)."""
    rec = pd.DataFrame([{"oracle": "KEEP", "outcome": "KEEP", "released": 1, "payload_stale": 0,
                         "premises_evaluated": 6, "changes": 3},
                        {"oracle": "BLOCK", "outcome": "KEEP", "released": 1, "payload_stale": 0,
                         "premises_evaluated": 5, "changes": 2}], index=[10, 20])
    got = classify(rec)
    assert list(got.index) == [10, 20]
    assert list(got["premises_per_change"]) == [2.0, 2.5]
    assert list(got["false_allow"]) == [False, True]
    assert "premises_per_change" not in classify(rec.drop(columns="changes"))
    assert "premises_per_change" not in classify(rec.drop(columns="premises_evaluated"))


@pytest.mark.planted("analysis.revalidation.counting:classify",
                     'if missing:',
                     'if False:')
def test_classify_refuses_records_without_the_columns_it_counts_from():
    """Bug class: counts computed from a missing column (silently all false) instead of refused."""
    with pytest.raises(KeyError, match="lack the column\\(s\\) released, payload_stale"):
        classify(pd.DataFrame([{"oracle": "KEEP", "outcome": "KEEP"}]))
    with pytest.raises(KeyError, match="lack the column\\(s\\) oracle"):
        classify(pd.DataFrame([{"outcome": "KEEP", "released": True, "payload_stale": False}]))


@pytest.mark.planted("analysis.revalidation.counting:with_counts",
                     'records[keys].reset_index(drop=True)',
                     'records[keys]')
def test_with_counts_sets_keys_beside_their_own_flags():
    """Bug class: counts beside the wrong keys (indexes not realigned) or an extra index column."""
    rec = pd.DataFrame([{"workload": "w1", "oracle": "BLOCK", "outcome": "KEEP", "released": True,
                         "payload_stale": False},
                        {"workload": "w2", "oracle": "KEEP", "outcome": "KEEP", "released": True,
                         "payload_stale": False}], index=[5, 7])
    out = with_counts(rec, ["workload"])
    assert list(out.columns) == ["workload", *FLAGS]
    assert list(out.index) == [0, 1]
    assert list(zip(out["workload"], out["false_allow"])) == [("w1", True), ("w2", False)]


@pytest.mark.planted("analysis.revalidation.counting:with_all",
                     'range(1, len(columns) + 1)',
                     'range(1, len(columns))')
def test_with_all_stacks_every_subset_as_totals():
    """Bug class: a total row that drops a group or a subset of the columns (the grand total), or double-counts."""
    frame = pd.DataFrame({"a": ["x", "y"], "b": ["p", "q"], "n": [1, 2]}, index=[3, 4])
    out = with_all(frame, ["a", "b"])
    assert len(out) == 8 and list(out.index) == list(range(8))
    assert list(zip(out["a"], out["b"])) == [("x", "p"), ("y", "q"), ("all", "p"), ("all", "q"), ("x", "all"),
                                             ("y", "all"), ("all", "all"), ("all", "all")]
    assert out.groupby(["a", "b"])["n"].sum()[("all", "all")] == 3
    assert len(with_all(frame, [])) == 2


@pytest.mark.planted("analysis.revalidation.counting:order_with_all",
                     '["all", *head, *[v for v in seen if v not in head]]',
                     '[*head, *[v for v in seen if v not in head], "all"]')
def test_order_with_all():
    """Bug class: totals (``all``) not first, or the declared order ignored."""
    assert order_with_all(["b", "all", "a", "b", "c"]) == ["all", "b", "a", "c"]
    assert order_with_all(["b", "a", "c"], ["c", "z", "a"]) == ["all", "c", "a", "b"]


@pytest.mark.planted("analysis.revalidation.counting:run_counts",
                     'records[["workload", "mutation_class"]].drop_duplicates().shape[0]',
                     'records[["workload", "mutation_class"]].shape[0]')
def test_run_counts_counts_distinct_values_of_their_own_columns():
    """Bug class: a report's coverage counted over the wrong column (or rows instead of distinct values)."""
    rec = pd.DataFrame({"workload": ["w1", "w1", "w2", "w2", "w2"], "mutation_class": ["a", "b", "a", "a", "a"],
                        "schedule": ["s1", "s1", "s1", "s1", "s1"], "mechanism": ["M", "N", "M", "N", "O"]})
    assert run_counts(rec) == {"executions": 5, "workloads": 2, "mutation_cases": 3, "mutation_classes": 2,
                               "schedules": 1, "mechanisms": 3}
    assert run_counts(rec[["mutation_class"]]) == {"executions": 5, "mutation_classes": 2}
    assert run_counts(rec[["workload"]]) == {"executions": 5, "workloads": 2}
    assert run_counts(rec[["workload", "mutation_class"]]) == {"executions": 5, "workloads": 2, "mutation_cases": 3,
                                                              "mutation_classes": 2}
    assert run_counts(pd.DataFrame({"x": [1]})) == {"executions": 1}


@pytest.mark.parametrize("n,word,text", [(1, "workload", "1 workload"), (2, "workload", "2 workloads"),
                                         (0, "cell", "0 cells"), (1, "class", "1 class"),
                                         (3, "mutation class", "3 mutation classes"), (1234, "schedule", "1,234 schedules")])
def test_plural(n, word, text):
    assert plural(n, word) == text
