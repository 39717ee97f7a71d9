"""The report of ``resume_frameworks`` (``analysis/resume/frameworks.py``: report, langgraph_notes, cell_outcome,
changes, first_witness, na_reasons, published) on literal records (issue 24 §3).

One small run of three rows (LangGraph 1.2.9, the paper's release; LangGraph 1.2.24; DBOS 3.4) whose every line of
the report is worked out by hand from the records below and compared whole, plus one test per helper with the
planted variant it must fail on.  Bug classes: a note that says the opposite of the records (a verdict, a count, a
reproduced / NOT reproduced swapped); a published verdict set beside another release's or variant's row; the first
witness of another property or runtime; a race named as a fault cell; an n/a cell or a CO witness left out of a
probe's line; a change between releases read in the wrong direction.

mutmut (2026-12-04, the whole of ``analysis/resume/frameworks.py`` against tests/unit): 690 of 701 mutants killed
(98.4%).  The 11 survivors are equivalent: ``groupby("runtime", sort=None)`` (falsy, as False); the defaults of
``.get("values", [])`` (twice in report, once in published, each as None or missing) and ``.get("findings", [])``
(twice): the reference file always holds both keys; ``rows.empty and not ref`` (the reference always holds
[langgraph], so only ``rows.empty`` decides); ``break`` for ``continue`` after the saturation finding (it is the
last finding of data/reference/resume.toml); ``to_dict("RECORDS")`` (pandas reads the orient case-insensitively);
``'XX, XX'.join(releases)`` (every published framework and variant has one release, so the join never joins).
``analysis/resume/concurrency.py`` (with ``racer_counts``, the pure part of runners/resume/concurrency.py, moved
there): 364 of 367 (99.2%); survivors: ``.get("values", [])`` twice (always present) and ``paper_of`` for a row
with no paper value (rendered "not published" either way).
"""
from __future__ import annotations

import pytest

from analysis.resume import frameworks as fw
from test_unit_frameworks_analysis import frame, rec

R9, R24, D, PG = "langgraph@1.2.9", "langgraph@1.2.24", "dbos@3.4", "pydantic-graph@1.107"
RUN = frame(
    rec(R9, "CO", "invalid", "second_resume_head", fired=2, witness="CO: values ('yes', 'yes') consumed twice."),
    rec(R9, "EO", "invalid", "second_resume_head", fired=2, witness="EO: charge fired twice."),
    rec(R9, "CV", "valid", "invalid_state"),
    rec(R9, "EO", "invalid", "crash_resume_after_effect_act", fired=2, witness="EO: charge fired 2 times."),
    rec(R9, "EO", "valid", "concurrent_resume", k=2, fired=2),
    rec(R9, "EO", "valid", "concurrent_resume", k=4, fired=1),
    rec(R9, "PC", "not applicable", "replay_past_checkpoint", witness="no replay"),
    rec(R24, "CO", "valid", "second_resume_head"),
    rec(R24, "CV", "invalid", "invalid_state", witness="CV: invalid state persisted."),
    rec(R24, "EO", "valid", "crash_resume_after_effect_act"),
    rec(R24, "EO", "valid", "concurrent_resume", k=2, fired=2),
    rec(R24, "PC", "not applicable", "replay_past_checkpoint", witness="no replay either"),
    rec(D, "EO", "valid", "baseline"),
    rec(D, "CO", "valid", "second_resume_head"),
    *(rec(D, "FD", "not applicable", f"fork_{i}", witness=f"reason {i}") for i in range(7)),
    rec(PG, "liveness", "invalid", "crash_x", witness="liveness: stuck after GraphRuntimeError X."),
    rec(PG, "CO", "valid", "second_resume_head"), rec(PG, "CV", "valid", "invalid_state"),
)

NOTES = [
    "langgraph@1.2.9: gated effects per race: 0 races fired none, 1 once, 1 more than once.",
    "langgraph@1.2.9 beside the artifact's langgraph 1.2.9: differs in CV (artifact 1.2.9: violates, \"persists "
    "schema-invalid state silently\"; this run: holds). First violation: EO in second_resume_head: EO: charge fired "
    "twice. n/a: replay_past_checkpoint: no replay.",
    "langgraph@1.2.24: gated effects per race: 0 races fired none, 0 once, 1 more than once.",
    "langgraph@1.2.24 beside the artifact's langgraph 1.2.9: differs in CO (artifact 1.2.9: violates, \"records a "
    "second resume value and never consults it\"; this run: holds); EO (artifact 1.2.9: violates, \"re-executes "
    "durably recorded work after a real SIGKILL\"; this run: holds). First violation: CV in invalid_state: CV: "
    "invalid state persisted. n/a: replay_past_checkpoint: no replay either.",
    "dbos@3.4 beside the artifact's dbos 2.27.0: differs in FD (artifact 2.27.0: holds, \"forks determinate\"; this "
    "run: n/a). n/a: fork_0: reason 0; fork_1: reason 1; fork_2: reason 2; fork_3: reason 3; fork_4: reason 4; "
    "fork_5: reason 5.",
    "pydantic-graph@1.107 beside the artifact's pydantic-graph 1.107.1: every published cell agrees. First "
    "violation: liveness in crash_x: liveness: stuck after GraphRuntimeError X.",
    "Published in the artifact, with no row in this run: llamaindex 2.22.2 PC holds (a decision at a step boundary "
    "holds PC); llamaindex 2.22.2 EO holds (a decision at a step boundary holds EO); llamaindex 2.22.2 FD holds (a "
    "decision at a step boundary holds FD); llamaindex 2.22.2 CO holds (a second live response is not consumed "
    "twice); llamaindex 2.22.2 CV holds (a non-serializable value fails at to_dict); llamaindex 2.22.2 PC violates "
    "(with wait_for_event the step's prefix is re-executed on resume); llamaindex 2.22.2 EO violates (with "
    "wait_for_event the step's prefix is re-executed on resume); llamaindex 2.22.2 CV holds (a non-serializable "
    "value fails at to_dict); crewai 1.15.2 PC violates (a restore after success replays both methods; a "
    "crash-resume re-runs a completed start method; from_checkpoint re-runs completed work).",
    "langgraph@1.2.9, the paper's 1.2.9 findings: \"records a second resume value and never consults it\": CO "
    "violated in 1 of 1 cell(s) (reproduced); \"persists schema-invalid state silently\": CV violated in 0 of 1 "
    "cell(s) (NOT reproduced); \"re-executes durably recorded work after a real SIGKILL\": EO violated in 1 of 1 "
    "cell(s) (reproduced); saturation 1.0 in 1 of 2 races (paper: 36 of 40 cells).",
    "langgraph@1.2.24, the paper's 1.2.9 findings: \"records a second resume value and never consults it\": CO "
    "violated in 0 of 1 cell(s) (NOT reproduced); \"persists schema-invalid state silently\": CV violated in 1 of 1 "
    "cell(s) (reproduced); \"re-executes durably recorded work after a real SIGKILL\": EO violated in 0 of 1 "
    "cell(s) (NOT reproduced); saturation 1.0 in 1 of 1 races (paper: 36 of 40 cells).",
    "What changed from langgraph@1.2.9 to langgraph@1.2.24: crash_resume_after_effect_act EO: violates -> holds; "
    "invalid_state CV: holds -> violates; second_resume_head CO: violates -> holds.",
    "Finding, the framework's own replay fork (invoked again from a past checkpoint id, same thread) "
    "(replay_past_checkpoint): langgraph@1.2.9: n/a (no replay) | langgraph@1.2.24: n/a (no replay either).",
    "A resume addressed to the parked checkpoint's id after the run went on (second_resume_by_id) is read two ways: "
    "REMIT reads an explicit checkpoint id as fork intent and serves it its own value on a fresh branch of the same "
    "thread; the lab reads it as a second resume of a consumed interrupt (CO, and EO/PC when the gated node runs "
    "again).  The values in the CO witness say which a row does: ('yes', 'yes') = the first value served again "
    "(LangGraph #6663, the paper's fork finding), ('yes', 'again') = the new value served.",
    "'paper' in the grid is the artifact's published finding for the same framework at the older release named "
    "above; CO (inert) is REMIT's reading of consume-once (a stray second resume accepted with no effect conforms), "
    "CO the lab's (it must be refused).",
]


@pytest.mark.planted("analysis.resume.frameworks:report",
                     'differ = differences(r.runtime, pub, cells)',
                     'differ = differences(names[0], pub, cells)')
def test_the_report_of_a_small_run_says_what_its_records_say():
    """Bug class: any line of the report that disagrees with the records (worked out by hand above): a count, a
    saturation, a published verdict beside the wrong row, a reproduced claim that is not, a change read backwards,
    a matrix cell or paper cell of another row."""
    section = fw.report(fw.table(RUN), RUN)
    assert (section.artifact, section.title) == ("resume_frameworks",
                                                 "Frameworks side by side: framework@release x property")
    assert [(r["metric"], r["ours"]) for r in section.rows] == [
        (f"{R9}: fault cells with a violated property", "2 of 4 (50.00%)"),
        (f"{R9}: concurrency saturation, mean over 2 race cells (effects fired / k)", "0.625"),
        (f"{R24}: fault cells with a violated property", "1 of 4 (25.00%)"),
        (f"{R24}: concurrency saturation, mean over 1 race cells (effects fired / k)", "1"),
        (f"{D}: fault cells with a violated property", "0 of 9 (0.00%)"),
        (f"{PG}: fault cells with a violated property", "1 of 3 (33.33%)")]
    assert all(r["paper"] == "not published" for r in section.rows)
    assert section.notes.split("\n\n") == NOTES
    (m,) = section.matrices
    assert m.title == "framework@release x property (this run's histories)"
    assert m.rows == [R9, R24, D, PG] and m.columns == [*fw.PROPS, "CO (inert)"]
    verdicts = {R9: ("n/a", "violates", "n/a", "holds", "violates", "n/a", "n/a", "holds"),
                R24: ("n/a", "holds", "n/a", "violates", "holds", "n/a", "n/a", "holds"),
                D: ("n/a", "holds", "n/a", "n/a", "holds", "n/a", "n/a", "holds"),
                PG: ("n/a", "n/a", "n/a", "holds", "holds", "n/a", "violates", "holds")}
    assert m.cells == {(rt, c): v for rt, vs in verdicts.items() for c, v in zip(m.columns, vs)}
    assert m.paper == {(R9, "CO"): "violates", (R9, "CV"): "violates", (R9, "EO"): "violates",
                       (R24, "CO"): "violates", (R24, "CV"): "violates", (R24, "EO"): "violates",
                       (D, "EO"): "holds", (D, "FD"): "holds", (D, "CO"): "holds",
                       (PG, "liveness"): "violates", (PG, "CO"): "holds", (PG, "CV"): "holds"}


@pytest.mark.planted("analysis.resume.frameworks:report",
                     'pub = published(r.framework, r.variant) if r.release != "installed" else []',
                     'pub = published(r.framework, r.variant)')
def test_an_installed_row_and_a_run_without_langgraph_get_no_artifact_or_paper_lines():
    """Bug class: the lab's own LangGraph runtime (release "installed", not a pinned env) compared with the
    artifact's release, or the paper's LangGraph findings written for a run with no LangGraph release row."""
    t = frame(rec("langgraph@installed", "EO", "valid"), rec(D, "EO", "valid"))
    section = fw.report(fw.table(t), t)
    notes = section.notes.split("\n\n")
    assert notes[0] == "langgraph@installed."
    assert not any("the paper's 1.2.9 findings" in n or n.startswith("What changed") for n in notes)
    assert not any(k[0] == "langgraph@installed" for k in section.matrices[0].paper)
    assert fw.langgraph_notes(fw.table(t), t) == []
    only = frame(rec(D, "EO", "valid"))
    assert fw.langgraph_notes(fw.table(only), only) == []


@pytest.mark.planted("analysis.resume.frameworks:langgraph_notes",
                     'if len(races):',
                     'if True:')
def test_one_release_without_races_or_other_releases():
    """Bug class: a saturation line invented for a row that ran no race, a row that ran races only (no fault cell)
    breaking the table, a saturation of 0.999 (1.0 to three figures) not counted as 1.0, or a 'what changed' line
    with nothing to compare (one LangGraph release)."""
    t = frame(rec(R24, "EO", "valid", "crash_x"))
    assert fw.langgraph_notes(fw.table(t), t) == [
        f"{R24}, the paper's 1.2.9 findings: \"re-executes durably recorded work after a real SIGKILL\": EO violated "
        "in 0 of 1 cell(s) (NOT reproduced)."]
    t = frame(rec(R24, "EO", "valid", "concurrent_resume", k=1000, fired=999))  # 0.999 is 1.0 to three figures
    assert fw.langgraph_notes(fw.table(t), t)[0].endswith("saturation 1.0 in 1 of 1 races (paper: 36 of 40 cells).")
    t = frame(rec(R9, "EO", "valid", "crash_x"), rec(R24, "EO", "valid", "crash_x"))
    assert fw.langgraph_notes(fw.table(t), t)[-1] == f"What changed from {R9} to {R24}: nothing in this run's cells."


# ---------------------------------------------------------------------------------------------- the helpers
def planted_first_witness(records, runtime, prop):
    """Planted: the first invalid execution of any property of the runtime."""
    bad = records[(records["runtime"] == runtime) & (records["verdict"] == "invalid")]
    return (bad["fault_cell"].iloc[0], bad["witness"].iloc[0]) if len(bad) else ("", "")


def check_first_witness(first) -> None:
    t = frame(rec(R9, "CO", "invalid", "second_resume_head", witness="co"),
              rec(R9, "EO", "invalid", "concurrent_resume", k=4, witness="race"),
              rec(R9, "EO", "invalid", "crash_x", witness="crash"), rec(R24, "PC", "invalid", "a", witness="pc"))
    t.loc[1, ["jitter_ms", "backend"]] = [2.5, "postgres"]
    assert first(t, R9, "EO") == ("race postgres k=4 2.5 ms", "race")
    assert first(t, R9, "CO") == ("second_resume_head", "co")
    assert first(t, R9, "PC") == ("", "") and first(t, R24, "PC") == ("a", "pc")


def test_the_first_witness_is_of_that_property_and_a_race_is_named_as_one():
    """Bug class: a witness of another property (or runtime) printed as a violation's witness; a race cell named by
    its scenario instead of backend, k and jitter."""
    check_first_witness(fw.first_witness)
    with pytest.raises(AssertionError):
        check_first_witness(planted_first_witness)


@pytest.mark.planted("analysis.resume.frameworks:cell_outcome",
                     'shown = bad[bad["property"] == "CO"] if (bad["property"] == "CO").any() else bad',
                     'shown = bad')
def test_cell_outcome_names_n_a_holds_and_the_co_witness():
    """Bug class: a probe's line that hides an n/a reason, says "holds" for a violated cell, or prints an EO witness
    where the CO witness (the values consumed) says what the framework did."""
    t = frame(rec(R9, "EO", "invalid", "p", fired=2, witness="EO: twice."),
              rec(R9, "CO", "invalid", "p", fired=2, witness="CO: ('yes', 'again')."),
              rec(R9, "PC", "valid", "p", fired=2), rec(R9, "EO", "not applicable", "q", witness="no fork"),
              rec(R9, "EO", "valid", "r", fired=1, expected=2), rec(R9, "EO", "valid", "r", fired=2, expected=2),
              rec(R9, "PC", "invalid", "s", fired=0, witness="PC: re-ran prepare in TX."))
    assert fw.cell_outcome(t, R9, "p") == "EO, CO violated (2 effects fired, 1 expected); e.g. CO: ('yes', 'again')"
    assert fw.cell_outcome(t, R9, "q") == "n/a (no fork)"
    assert fw.cell_outcome(t, R9, "r") == "every property holds (1.5 effects fired, 2 expected)"
    assert fw.cell_outcome(t, R9, "s") == "PC violated (0 effects fired, 1 expected); e.g. PC: re-ran prepare in TX"
    assert fw.cell_outcome(t, R24, "p") == "" and fw.cell_outcome(t, R9, "none") == ""


@pytest.mark.planted("analysis.resume.frameworks:changes",
                     'f"{c} {p}: {a[(c, p)]} -> {b[(c, p)]}"',
                     'f"{c} {p}: {b[(c, p)]} -> {a[(c, p)]}"')
def test_changes_read_old_to_new_and_only_where_both_ran():
    """Bug class: a change between releases read backwards, or a cell only one release ran reported as changed."""
    t = frame(rec(R9, "EO", "invalid", "a"), rec(R9, "EO", "valid", "a"), rec(R24, "EO", "valid", "a"),
              rec(R9, "CO", "valid", "b"), rec(R24, "CO", "valid", "b"), rec(R24, "CV", "unknown", "c"))
    assert fw.changes(t, R9, R24) == ["a EO: violates -> holds"]
    assert fw.changes(t, R24, R9) == ["a EO: holds -> violates"]


@pytest.mark.planted("analysis.resume.frameworks:na_reasons",
                     'na = records[(records["runtime"] == runtime) & (records["verdict"] == "not applicable")]',
                     'na = records[records["verdict"] == "not applicable"]')
def test_na_reasons_are_the_runtimes_own_sorted_and_once():
    """Bug class: another runtime's n/a reasons, or one reason repeated per property, in a row's note."""
    t = frame(rec(R9, "EO", "not applicable", "b", witness="why b"), rec(R9, "CO", "not applicable", "b",
                                                                         witness="why b"),
              rec(R9, "EO", "not applicable", "a", witness="why a"), rec(R24, "EO", "not applicable", "c",
                                                                         witness="other"),
              rec(R9, "EO", "valid", "d", witness="not n/a"))
    assert fw.na_reasons(t, R9) == ["a: why a", "b: why b"]


@pytest.mark.planted("analysis.resume.frameworks:published",
                     'v["framework"] == framework and v.get("variant", "") == variant',
                     'v["framework"] == framework')
def test_published_is_per_framework_and_variant():
    """Bug class: another variant's published verdicts (LlamaIndex's wait-for-event) set beside the step-boundary
    row, or a framework's values beside another framework."""
    step = fw.published("llamaindex", "step-boundary")
    assert {p["variant"] for p in step} == {"step-boundary"} and len(step) == 5
    assert {p["property"] for p in fw.published("llamaindex", "wait-for-event")} == {"PC", "EO", "CV"}
    assert fw.published("llamaindex", "") == [] and fw.published("nobody", "") == []
    assert {p["framework"] for p in fw.published("dbos", "")} == {"dbos"}
