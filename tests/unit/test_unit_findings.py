"""The report's opening Findings: the papers' tally, the frameworks' cell matrix, the losers' fates.

Each test names the class of bug it catches; the synthetic records are the
columns ``resume_frameworks`` writes.
"""
from __future__ import annotations

import pandas as pd
import pytest

from analysis.report import Matrix, Section, paper_tally, render, render_findings, reproduced, row
from analysis.resume import frameworks_cells, frameworks_losers


# ---------------------------------------------------------------------------------------------- the papers' tally
@pytest.mark.parametrize("made, expected", [
    (row("a share", 0.405, 0.40, "share"), True),
    (row("a share 2 pp off", 0.42, 0.40, "share"), False),
    (row("a count", 5, 5, "count"), True),
    pytest.param(row("a count off by one", 6, 5, "count"), False, marks=pytest.mark.planted(
        "analysis.report:reproduced", "return ours == paper", "return abs(ours - paper) <= 1")),
    (row("counts as shares", 20, 2000, "count", ours_of=100, paper_of=10_000), True),
    (row("counts as shares, 2 pp off", 22, 2000, "count", ours_of=100, paper_of=10_000), False),
    (row("a latency within 2x", 15.0, 8.8, unit="us"), True),
    (row("a latency 4x off", 2.0, 8.8, unit="us"), False),
    (row("zero published", 0.0, 0.0), True),
    (row("a size", 2100, 210_000, "size"), None),
    (row("not published", 3, None, "count"), None),
    ({"metric": "hand-made", "ours": "1", "paper": "1", "difference": "+0"}, None),
], ids=lambda v: v["metric"] if isinstance(v, dict) else str(v))
def test_what_counts_as_reproduced(made, expected):
    """Bug classes: a size (executions, cells) counted as a finding that differs; a share compared without its
    tolerance; counts of runs of different sizes compared as raw counts; a row without a published value counted."""
    assert reproduced(made) is expected


@pytest.mark.planted("analysis.report:reproduced",
                     'if "inside our CI" in diff or "outside our CI" in diff:',
                     'if False:')
def test_the_ci_decides_where_a_row_states_one():
    """Bug class: a rate whose published value lies inside our CI counted as differing because it is > 1 pp off."""
    r = row("rate", 0.1214, 0.0997, "share")
    r["difference"] += " (paper value inside our CI)"
    assert reproduced(r) is True
    r["difference"] = r["difference"].replace("inside", "outside")
    assert reproduced(r) is False


@pytest.mark.planted("analysis.report:paper_tally",
                     'total += len(m.paper)',
                     'total += 0')
def test_tally_counts_rows_and_matrix_cells_and_names_what_differs():
    """Bug classes: matrix cells left out of the tally; a differing number counted as reproduced; the list of
    differences naming the wrong section."""
    m = Matrix("levels", ["SSI"], ["skew", "escape"], {("SSI", "skew"): "prevented", ("SSI", "escape"): "occurs"},
               paper={("SSI", "skew"): "prevented", ("SSI", "escape"): "prevented"})
    sections = [Section("a", "A", rows=[row("x", 1, 1, "count"), row("y", 2, 1, "count")]),
                Section("b", "B", matrices=[m])]
    ok, total, differ = paper_tally(sections)
    assert (ok, total) == (2, 4)
    assert differ[0].startswith("y (a:") and "levels, SSI x escape (b:" in differ[1]
    text = render_findings(sections)
    assert "**2 of 4** published numbers" in text and "these 2 differ" in text


@pytest.mark.planted("analysis.report:render",
                     'return "\\n".join([header.rstrip(), "", render_findings(sections), FINDINGS_END, "", render_sections(sections)])',
                     'return "\\n".join([header.rstrip(), "", render_sections(sections), render_findings(sections), FINDINGS_END, ""])')
def test_a_section_opens_with_its_question_and_the_report_with_its_findings():
    """Bug class: the findings rendered after the sections (the user reads timings first), a question dropped."""
    text = render([Section("a", "A", rows=[row("x", 1, 1, "count")], question="Does x hold?")], "# header")
    assert text.index("## Findings") < text.index("## A (`a`)") < text.index("*Does x hold?*")


# ---------------------------------------------------------------------------------------------- synthetic records
def rec(runtime, cell, prop, verdict, *, k=0, crash="-", rep=0, fired=1, served=0, refused=0, failed=0, lost=0,
        witness=""):
    return {"runtime": runtime, "framework": runtime.split("@")[0], "release": "1.0", "variant": "",
            "fault_cell": cell, "cell": f"{runtime}/{cell}/{k}", "crash_point": crash, "k": k, "repetition": rep,
            "property": prop, "verdict": verdict, "witness": witness, "effects_fired": fired, "served": served,
            "refused": refused, "failed": failed, "indeterminate": lost}


def race(runtime, k, served, refused, failed, fired, lost=0, rep=0):
    """One race, as resume_frameworks records it: one row per property, the racer counts on each."""
    return [rec(runtime, "concurrent_resume", p, "valid", k=k, rep=rep, fired=fired, served=served, refused=refused,
                failed=failed, lost=lost) for p in ("EO", "CO")]


# ---------------------------------------------------------------------------------------------- losers' fates
@pytest.mark.parametrize("k, served, refused, failed, fired, lost, expected", [
    # k, served, refused, failed, effects, unanswered -> losers, refused, inert, failed, fired_again, no_winner
    (2, 1, 1, 0, 1, 0, (1, 1, 0, 0, 0, 0)),      # the gate: one served, one refused loudly
    (4, 4, 0, 0, 4, 0, (3, 0, 0, 0, 3, 0)),      # every racer served and fired
    (3, 3, 0, 0, 1, 0, (2, 0, 2, 0, 0, 0)),      # served twice more, no further effect: inert
    pytest.param(3, 1, 0, 2, 1, 0, (2, 0, 0, 2, 0, 0), marks=pytest.mark.planted(  # two raised: failed, never refused
        "analysis.resume.frameworks_losers:fates", '"refused": race["refused"].astype(int),',
        '"refused": race["refused"].astype(int) + race["failed"].astype(int),')),
    (2, 0, 1, 1, 0, 0, (2, 1, 0, 1, 0, 1)),      # nobody served: no winner, both are losers
    (2, 1, 0, 0, 1, 1, (1, 0, 0, 0, 0, 0)),      # one answer never came
], ids=["gate", "all-fire", "inert", "failed", "no-winner", "unanswered"])
def test_each_loser_gets_one_fate(k, served, refused, failed, fired, lost, expected):
    """Bug classes: a failed racer counted as refused (or as served); a loser that fired again counted as inert;
    the winner counted among the losers; a race with no winner counted as if one racer had won."""
    f = frameworks_losers.fates(pd.DataFrame(race("fw@1", k, served, refused, failed, fired, lost)[:1]))
    got = f.iloc[0]
    assert (got.losers, got.refused, got.inert, got.failed, got.fired_again, got.no_winner) == expected
    assert got.unanswered == lost


@pytest.mark.planted("analysis.resume.frameworks_losers:races",
                     'return r.drop_duplicates(subset=["runtime", "cell", "repetition"])',
                     'return r')
def test_loud_only_when_every_loser_is_refused_and_a_lost_effect_is_named():
    """Bug classes: "loud" read from one race instead of all; a race that fired nothing hidden in a mean; the race
    counted once per property row."""
    records = pd.DataFrame([*race("gate@1", 2, 1, 1, 0, 1, rep=0), *race("gate@1", 2, 1, 1, 0, 1, rep=1),
                            *race("leaky@1", 2, 1, 1, 0, 1, rep=0), *race("leaky@1", 2, 2, 0, 0, 0, rep=1)])
    tab = frameworks_losers.table(records).set_index("runtime")
    assert tab.loc["gate@1", "races"] == 2 and bool(tab.loc["gate@1", "loud"])
    assert not tab.loc["leaky@1", "loud"] and tab.loc["leaky@1", "races_0_effects"] == 1
    answer = frameworks_losers.answer(tab.reset_index().to_dict("records")[1])
    assert answer.startswith("no: of 2 losers") and "1 accepted inert" in answer and "fired no effect" in answer


# ---------------------------------------------------------------------------------------------- the cell matrix
def frameworks_records():
    return pd.DataFrame([
        rec("safe@1", "crash_resume_after_effect_act", "EO", "valid", crash="after_effect"),
        rec("safe@1", "second_resume_head", "CO", "valid"),
        rec("safe@1", "fork_twice", "FD", "not applicable", witness="cannot fork"),
        *race("safe@1", 2, 1, 1, 0, 1),
        rec("twice@1", "crash_resume_after_effect_act", "EO", "invalid", crash="after_effect",
            witness="effect charge fired 2 times."),
        rec("twice@1", "crash_resume_after_effect_act", "PC", "valid", crash="after_effect"),
        rec("twice@1", "second_resume_head", "CO", "invalid", witness="consumed 2 values."),
        rec("twice@1", "fork_twice", "FD", "unknown"),
        *race("twice@1", 2, 2, 0, 0, 2),
        rec("maybe@1", "crash_resume_after_effect_act", "EO", "unknown", crash="after_effect"),
    ])


@pytest.mark.planted("analysis.resume.frameworks_cells:group",
                     'if crash_point != "-":',
                     'if False:')
def test_cells_are_grouped_and_name_what_they_violate():
    """Bug classes: a crash cell grouped as a second resume (or a race as a plain cell); unknown shown as holds;
    n/a shown as holds; the witness of a lesser property shown instead of the worst (EO before CO)."""
    tab = frameworks_cells.table(frameworks_records())
    at = {(r.runtime, r.fault_cell): r for r in tab.itertuples()}
    assert at[("safe@1", "crash_resume_after_effect_act")].group == "crash"
    assert at[("safe@1", "second_resume_head")].group == "second resume or fork"
    assert at[("safe@1", "concurrent_resume")].group == "race"
    assert at[("safe@1", "fork_twice")].verdict == "n/a"
    assert at[("twice@1", "fork_twice")].verdict == "unknown FD"
    assert at[("twice@1", "crash_resume_after_effect_act")].verdict == "violates EO"
    assert at[("twice@1", "crash_resume_after_effect_act")].witness == "effect charge fired 2 times."
    assert at[("maybe@1", "crash_resume_after_effect_act")].verdict == "unknown EO"
    groups = [g for g in tab[tab["runtime"] == "safe@1"]["group"]]
    assert groups == sorted(groups, key=frameworks_cells.GROUPS.index)


@pytest.mark.planted("analysis.resume.frameworks_cells:findings",
                     'elif unknown:',
                     'elif False:')
def test_one_finding_per_framework_answering_the_two_questions():
    """Bug classes: a framework with an unknown crash cell called safe; a violating one called safe; the SIGKILL
    answer read from race cells; the loud-refusal answer given to a framework whose losers fired again."""
    records = frameworks_records()
    found = {f.subject: f.text for f in frameworks_cells.findings(frameworks_cells.table(records), records)}
    assert "**safe**" in found["safe@1"] and "Exactly once after a SIGKILL: yes" in found["safe@1"]
    assert "Refuses a second resumer loudly: yes" in found["safe@1"]
    assert "**not safe**: breaks EO, CO" in found["twice@1"]
    assert "SIGKILL: no, in 1 of 1 crash cells" in found["twice@1"]
    assert "loudly: no: of 1 losers in 1 races, 1 fired the effect again" in found["twice@1"]
    assert "Worst witness (crash_resume_after_effect_act): effect charge fired 2 times" in found["twice@1"]
    assert "**undecided**" in found["maybe@1"] and "SIGKILL: undecided" in found["maybe@1"]


@pytest.mark.planted("analysis.resume.frameworks_cells:findings",
                     'text += f" {remedy(meta[\'framework\'])}".rstrip()',
                     'text += f" {remedy(meta[\'runtime\'])}".rstrip()')
def test_a_not_safe_framework_says_what_to_add_and_whether_the_guard_helps():
    """Issue 29: the report says, for each framework found not safe, what a user must add to resume exactly once
    and whether the lab's guard helps.  Bug classes: the advice looked up by the row (``dbos@1``) instead of its
    framework, so it never shows; advice printed under a row the run found safe; a declared framework with no
    advice written."""
    import tomllib
    from pathlib import Path

    from analysis.resume.remedies import remedies

    records = frameworks_records()
    records.loc[records["runtime"] == "twice@1", ["runtime", "framework"]] = ("dbos@1", "dbos")
    records.loc[records["runtime"] == "safe@1", ["runtime", "framework"]] = ("langgraph@1", "langgraph")
    found = {f.subject: f.text for f in frameworks_cells.findings(frameworks_cells.table(records), records)}
    assert "To resume exactly once, add step bodies idempotent" in found["dbos@1"]
    assert found["dbos@1"].endswith("The lab's guard: no: the guard wraps LangGraph checkpointers only.")
    assert "To resume exactly once" not in found["langgraph@1"]
    envs = Path(__file__).resolve().parents[2] / "data" / "envs"
    frameworks = {spec["framework"] for p in envs.glob("*/pyproject.toml")
                  for spec in tomllib.loads(p.read_text())["tool"]["driftlab"]["runtimes"].values()}
    assert frameworks and frameworks <= set(remedies()), frameworks - set(remedies())
    assert all(set(r) == {"add", "guard"} for r in remedies().values())


@pytest.mark.planted("analysis.resume.frameworks_losers:table",
                     'races_2plus_effects=int((t["effects"] > 1).sum()),',
                     'races_2plus_effects=int((t["effects"] >= 1).sum()),')
def test_the_losers_table_pinned_for_a_small_grid():
    """The whole table for three races of two runtimes, every column: bug classes of any single count (effects per
    race 0 / 1 / 2+ swapped or off by one, the runtimes merged or reordered, a column dropped), and the exact answer.
    """
    records = pd.DataFrame([*race("a@1", 2, 1, 1, 0, 1, rep=0), *race("a@1", 3, 3, 0, 0, 3, rep=1),
                            *race("b@1", 2, 0, 1, 1, 0, rep=0)])
    tab = frameworks_losers.table(records)
    assert list(tab.columns) == frameworks_losers.COLUMNS
    assert tab.to_dict("records") == [
        {"runtime": "a@1", "races": 2, "losers": 3, "refused": 1, "inert": 0, "failed": 0, "fired_again": 2,
         "unanswered": 0, "no_winner": 0, "races_0_effects": 0, "races_1_effect": 1, "races_2plus_effects": 1,
         "loud": False},
        {"runtime": "b@1", "races": 1, "losers": 2, "refused": 1, "inert": 0, "failed": 1, "fired_again": 0,
         "unanswered": 0, "no_winner": 1, "races_0_effects": 1, "races_1_effect": 0, "races_2plus_effects": 0,
         "loud": False}]
    assert frameworks_losers.answer(tab.to_dict("records")[0]) == \
        "no: of 3 losers in 2 races, 1 refused loudly, 2 fired the effect again"
    assert frameworks_losers.answer(tab.to_dict("records")[1]) == \
        "no: of 2 losers in 1 races, 1 refused loudly, 1 failed (raised); 1 race(s) fired no effect at all"
    assert frameworks_losers.answer({"losers": 0}) == "no race was run"
    assert frameworks_losers.table(records.iloc[0:0]).empty and frameworks_losers.table(
        records.drop(columns=["served"])).empty  # records written before the racers were counted


@pytest.mark.planted("analysis.resume.frameworks_cells:_ordered",
                     'key=lambda p: SEVERITY.index(p) if p in SEVERITY else len(SEVERITY))',
                     'key=str)')
def test_the_cell_table_pinned_for_a_small_grid():
    """Every column of the per-cell table and every group, in order: bug classes of a property order (the worst
    witness would change), a group misread, an unknown folded into holds."""
    records = frameworks_records()
    tab = frameworks_cells.table(records)
    got = [(r["runtime"], r["group"], r["fault_cell"], r["verdict"], r["violated"], r["unknown"], r["witness"])
           for r in tab.to_dict("records")]
    assert got == [
        ("maybe@1", "crash", "crash_resume_after_effect_act", "unknown EO", "", "EO", ""),
        ("safe@1", "crash", "crash_resume_after_effect_act", "holds", "", "", ""),
        ("safe@1", "second resume or fork", "fork_twice", "n/a", "", "", "cannot fork"),
        ("safe@1", "second resume or fork", "second_resume_head", "holds", "", "", ""),
        ("safe@1", "race", "concurrent_resume", "holds", "", "", ""),
        ("twice@1", "crash", "crash_resume_after_effect_act", "violates EO", "EO", "", "effect charge fired 2 times."),
        ("twice@1", "second resume or fork", "fork_twice", "unknown FD", "", "FD", ""),
        ("twice@1", "second resume or fork", "second_resume_head", "violates CO", "CO", "", "consumed 2 values."),
        ("twice@1", "race", "concurrent_resume", "holds", "", "", "")]
    assert [frameworks_cells.group(*a) for a in (("x", "-", 2), ("x", "after_effect", 0), ("fork_twice", "-", 0),
                                                 ("baseline", "-", 0))] == ["race", "crash", "second resume or fork",
                                                                            "other"]
    assert frameworks_cells._ordered(["liveness", "CO", "EO", "CO"]) == ["EO", "CO", "liveness"]
    assert frameworks_cells.sigkill_answer(tab, "safe@1") == "yes, in all 1 crash cells run"
    assert frameworks_cells.sigkill_answer(tab, "nobody") == "no crash cell could be run"


@pytest.mark.planted("analysis.resume.frameworks_cells:sigkill_answer", 'if not stuck.empty:', "if False:")
def test_a_run_that_never_goes_on_after_a_sigkill_is_not_exactly_once():
    """Bug class: a framework whose killed run can never be continued (liveness violated in a crash cell) reported
    as "exactly once after a SIGKILL: yes" because nothing ran twice (it ran zero times)."""
    records = pd.DataFrame([rec("stuck@1", "crash_resume_after_effect_act", "EO", "valid", crash="after_effect"),
                            rec("stuck@1", "crash_resume_after_effect_act", "liveness", "invalid", crash="after_effect",
                                witness="run never reached done"),
                            rec("stuck@1", "crash_start_after_effect_prepare", "EO", "valid", crash="after_effect")])
    tab = frameworks_cells.table(records)
    assert frameworks_cells.sigkill_answer(tab, "stuck@1") == \
        "no: nothing ran twice, but the run never finished in 1 of 2 crash cells"
