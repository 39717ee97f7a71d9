"""Resume scenario files, the oracle's effect count, the artifacts' columns, and determinism.

Catches: a parser that accepts a malformed cell (planted: an unknown crash
point, a fork without its new run, a graph with two interrupts) or answers
with more than one line; an oracle that counts a fork as a whole new run
(planted bug: fork_twice would expect 9 effects, not 7); tables whose
columns drift from issue 10's lists; records that change between two runs
with the same seed.
"""
from __future__ import annotations


import pandas as pd
import pytest

import scenarios
from analysis.resume import concurrency as resume_concurrency, faults as resume_faults, independence as resume_independence, profile as resume_profile
from runners.experiment import Options
from runners.resume.faults import ResumeFaults
from scenarios import ScenarioError
from scenarios.resume.loader import by_kind, cell_graph, expected_effects

SCEN = scenarios.load_scenarios(family="resume")["resume"]

GOOD = '''family = "resume"
kind = "cell"
name = "mine"
operation = "resume"
crash_point = "after_effect"
[[steps]]
call = "start"
run = "a"
[[steps]]
call = "resume"
run = "a"
value = "yes"
crash = "after_effect"
node = "act"
'''


@pytest.mark.parametrize("old,new,field", [
    ('crash = "after_effect"', 'crash = "halfway"', "steps[1].crash"),
    ('call = "start"', 'call = "begin"', "steps[0].call"),
    ('value = "yes"', 'value = 3', "steps[1].value"),
    ('crash_point = "after_effect"', 'crash_point = "soon"', "crash_point"),
    ('kind = "cell"', 'kind = "cells"', "kind"),
])
def test_malformed_cell_is_one_line_naming_file_and_field(tmp_path, old, new, field):
    (tmp_path / "bad.toml").write_text(GOOD.replace(old, new))
    with pytest.raises(ScenarioError) as exc:
        scenarios.load_scenarios((tmp_path,), family="resume")
    msg = str(exc.value)
    assert "\n" not in msg and "bad.toml" in msg and field in msg


def test_user_cell_loads_and_graph_with_two_interrupts_is_refused(tmp_path):
    (tmp_path / "mine.toml").write_text(GOOD)
    assert "mine" in scenarios.load_scenarios((tmp_path,), family="resume")["resume"]
    (tmp_path / "g.toml").write_text('family = "resume"\nkind = "graph"\nname = "g2"\n'
                                     '[[nodes]]\nname = "a"\ninterrupt = true\n[[nodes]]\nname = "b"\ninterrupt = true\n')
    with pytest.raises(ScenarioError, match="g.toml: nodes: .*exactly one node must be the interrupt"):
        scenarios.load_scenarios((tmp_path,), family="resume")


@pytest.mark.planted("scenarios.resume.loader:expected_effects", "forks * per_fork", "forks * per_start")
def test_oracle_counts_effects_per_run_and_per_fork():
    """Planted bug: a fork counted as a whole run (its pre-interrupt effect was fired by its source)."""
    graphs = by_kind(SCEN, "graph")
    assert expected_effects(SCEN["recover_twice"], cell_graph(SCEN["recover_twice"], graphs)) == 2 * 3
    assert expected_effects(SCEN["fork_twice"], cell_graph(SCEN["fork_twice"], graphs)) == 3 + 2 + 2


def test_tables_have_the_issues_columns_and_records_repeat(tmp_path):
    exp = ResumeFaults()
    opts = Options(run_dir=tmp_path, mechanisms=("naive", "sequencer"),
                   mechanism_families={"resume": ("naive", "sequencer")})
    cells = [c for c in exp.cells("quick", 5, opts) if c.p["fault_cell"] in ("crash_resume_after_effect_act",
                                                                          "second_resume_head")]

    def records():
        frames = []
        for c in cells:
            f = pd.DataFrame(exp.run_cell(c, opts).records)
            for k, v in c.params:
                f[k] = v
            frames.append(f)
        return pd.concat(frames, ignore_index=True)

    a, b = records(), records()
    assert a.drop(columns="wall_us").equals(b.drop(columns="wall_us"))
    assert list(resume_faults.table(a).columns) == ["runtime", "cell", "crash_point", "operation", "property",
                                                    "verdict", "effects_fired", "effects_expected", "witness"]
    assert list(resume_profile.table(a).columns) == ["runtime", "property", "verdict", "witness_cell"]
    ind = a[a["runtime"] == "sequencer"].assign(runtime="sequencer+none")
    assert list(resume_independence.table(ind).columns) == ["fault_switch", "property", "verdict", "witness"]
    conc = pd.DataFrame({"runtime": ["naive"] * 2, "backend": ["sqlite"] * 2, "k": [4, 4], "jitter_ms": [0.0, 0.0],
                         "effects_fired": [4, 3], "served": [4, 3], "refused": [0, 0], "failed": [0, 1],
                         "indeterminate": [0, 0]})
    t = resume_concurrency.table(conc)
    assert list(t.columns) == ["runtime", "backend", "k", "jitter_ms", "repetitions", "effects_fired_mean",
                               "saturation", "saturation_min", "saturation_max", "served_mean", "refused_mean",
                               "failed_mean", "indeterminate"]
    assert t["saturation"].iloc[0] == pytest.approx((1.0 + 0.75) / 2)
    assert (t["saturation_min"].iloc[0], t["saturation_max"].iloc[0]) == (0.75, 1.0)  # the interval over repetitions
    assert (t["served_mean"].iloc[0], t["failed_mean"].iloc[0]) == (3.5, 0.5)  # a racer that failed is not served
