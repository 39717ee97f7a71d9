"""Scenario files: validated on load, one-line errors, a fourth workload is one file."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scenarios.rules import RuleError, compile_rule
from scenarios.workload import BUILTIN_DIR, ScenarioError, load_workloads, parse_workload
from vocabulary.revalidation import MUTATION_CLASSES, Outcome

REFUND = (BUILTIN_DIR / "refund.toml").read_text()


def driftlab(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runners.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_builtin_workloads_have_one_mutation_per_class_with_the_rule_oracle():
    workloads = load_workloads()
    assert set(workloads) == {"refund", "cloud_remediation", "procurement"}
    for w in workloads.values():
        assert list(w.mutations) == list(MUTATION_CLASSES)
        for cls, m in w.mutations.items():
            assert m.oracle is MUTATION_CLASSES[cls]


def test_rules_parse_into_checks_without_eval():
    check, evidence = compile_rule("order.amount <= policy.refund_limit")
    assert evidence == ("order.amount", "policy.refund_limit")
    assert check({"order.amount": 80, "policy.refund_limit": 90}.__getitem__, {})
    assert not check({"order.amount": 80, "policy.refund_limit": 50}.__getitem__, {})
    check, _ = compile_rule("unchanged(customer.name)")
    assert check({"customer.name": "A"}.__getitem__, {"customer.name": "A"})
    assert not check({"customer.name": "B"}.__getitem__, {"customer.name": "A"})
    with pytest.raises(RuleError):
        compile_rule("__import__('os').system('true')")


BROKEN = [
    ("severity = \"BLOCK\"          # authority", "severity = \"MAYBE\"          # authority", "premises[0] (amount_within_limit): unknown outcome 'MAYBE'"),
    ('oracle = "KEEP"\nvariants = [ { "policy.refund_limit" = 90 }', 'oracle = "BLOCK"\nvariants = [ { "policy.refund_limit" = 90 }', "mutations.predicate_preserving.oracle: predicate_preserving changes have oracle KEEP, not BLOCK"),
    ('"order.shipping_note" = "ring the bell"', '"order.nope" = "ring the bell"', "mutations.irrelevant.variants[0]: 'order.nope' is not a field of any object"),
    ('rule = "order.refunded == false"', 'rule = "order.refunded = false"', "premises[1] (not_already_refunded): rule 'order.refunded = false'"),
    ("[mutations.blocking]", "[mutations.blockin]", "mutations: missing class 'blocking'"),
    ("refund_limit = 100", "refund_limit = 10", "premises[0] (amount_within_limit): does not hold in the initial objects"),
    ('"order.id", "order.amount",', '"order.id", "order.amount', "toml:"),
]


@pytest.mark.parametrize("old, new, message", BROKEN)
def test_a_malformed_file_gets_one_line_naming_file_field_and_problem(tmp_path, old, new, message):
    assert old in REFUND
    path = tmp_path / "broken.toml"
    path.write_text(REFUND.replace(old, new, 1).replace('name = "refund"', 'name = "broken"'))
    with pytest.raises(ScenarioError) as err:
        parse_workload(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(str(path)) and message in text


def test_cli_rejects_a_malformed_file_with_exit_2_and_writes_nothing(tmp_path):
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "broken.toml").write_text(REFUND.replace('name = "refund"', 'name = "broken"').replace("refund_limit = 100", "refund_limit = 10"))
    out = tmp_path / "run"
    result = driftlab("reproduce", "--scenario-dir", str(folder), "--out", str(out), "--repetitions", "1", "--quiet")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "broken.toml: premises[0]" in result.stderr
    assert not out.exists()


def test_a_fourth_workload_is_one_file(tmp_path):
    folder = tmp_path / "scenarios"
    folder.mkdir()
    shutil.copy(Path(__file__).parent / "data" / "lease_extension.toml", folder)
    out = tmp_path / "run"
    result = driftlab("reproduce", "--only", "revalidation_outcomes", "--scenario-dir", str(folder), "--out", str(out),
                      "--repetitions", "2", "--mechanisms", "ATR,NoCheck", "--jobs", "1", "--quiet")
    assert result.returncode == 0, result.stderr
    import pandas as pd

    table = pd.read_csv(out / "tables" / "revalidation_outcomes.csv")
    records = pd.read_parquet(out / "records" / "revalidation_outcomes")
    assert "lease_extension" in set(records["workload"])
    atr = table[(table.mechanism == "ATR") & (table.mutation_class == "all")].iloc[0]
    assert atr.executions == 4 * 5 * 7 * 2 and atr.oracle_agreement == 1.0
    lease = records[(records.workload == "lease_extension") & (records.mechanism == "ATR")]
    assert (lease["outcome"] == lease["oracle"]).all() and Outcome.BLOCK.name in set(lease["outcome"])
