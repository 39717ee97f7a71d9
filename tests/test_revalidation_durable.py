"""The durable SQLite cells: the store's compare-and-set, real process boundaries, and what the cells show.

Pins the ATR paper's durable result (§5 "Durable workflow cells"): after a
checkpoint, a second actor's change and a resume in a new process, ATR
evaluates fewer premises per change than FullScan in every cell, with the
same outcomes, and both agree with the declared oracle; NoCheck releases the
invalid effects.
"""
from __future__ import annotations

import os
from contextlib import closing

import pandas as pd
import pytest

from analysis.revalidation import durable as analysis
from runners.experiment import Options
from runners.revalidation.durable import WORKLOADS, RevalidationDurable, Workspace
from runners.revalidation.sqlite_store import SqliteStore
from scenarios.revalidation.workload import load_workloads
from vocabulary.revalidation import MUTATION_CLASSES

pytestmark = pytest.mark.xdist_group("test_revalidation_durable")  # one worker: its module-scoped fixture runs once

STATE = {"order.amount": 80, "order.refunded": False, "policy.refund_limit": 100}


def fork(fn) -> int:
    """Start ``fn()`` in a forked child (exit code 0 if it returned True); its pid."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if fn() else 3
        finally:
            os._exit(code)
    return pid


def exit_code(pid: int) -> int:
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def in_process(fn) -> int:
    """Run ``fn()`` in a forked child and wait; its exit code."""
    return exit_code(fork(fn))


# ------------------------------------------------------------ SqliteStore
def test_commit_refuses_a_stale_token_and_applies_nothing(tmp_path):
    with SqliteStore.create(tmp_path / "b.db", STATE) as store:
        _, limit_version = store.read("policy.refund_limit")
        store.write({"policy.refund_limit": 50})  # the limit changes after the check
        before = (store.seq, store.version("order"), store.read("order.refunded"))
        assert store.commit([("policy.refund_limit", limit_version)], {"order.refunded": True}) is False
        assert (store.seq, store.version("order"), store.read("order.refunded")) == before
        assert store.changes_since(0) == (["policy.refund_limit"], 1)
        # with the current token the same commit goes through, as one logged write
        assert store.commit([("policy.refund_limit", limit_version + 1), ("order", 0)], {"order.refunded": True})
        assert store.read("order.refunded") == (True, 1) and store.version("order") == 1
        assert store.changes_since(1) == (["order.refunded"], 2)


def test_a_write_in_another_process_makes_the_token_stale(tmp_path):
    path = tmp_path / "b.db"
    SqliteStore.create(path, STATE).close()
    with SqliteStore(path) as store:
        _, token = store.read("policy.refund_limit")

    def other_actor() -> bool:
        with SqliteStore(path) as s:
            s.write({"policy.refund_limit": 50})
        return True

    assert in_process(other_actor) == 0
    with SqliteStore(path) as store:
        assert store.commit([("policy.refund_limit", token)], {"order.refunded": True}) is False
        assert store.value("order.refunded") is False and store.value("policy.refund_limit") == 50


def test_two_processes_committing_the_same_token_exactly_one_wins(tmp_path):
    """The compare and the apply are one transaction: a CAS that checked outside it would let both win."""
    for round_ in range(15):
        path = tmp_path / f"race{round_}.db"
        SqliteStore.create(path, STATE).close()
        go_r, go_w = os.pipe()

        def racer() -> bool:
            with SqliteStore(path) as s:
                os.read(go_r, 1)  # both start together
                return s.commit([("order.refunded", 0)], {"order.refunded": True})

        pids = [fork(racer), fork(racer)]
        os.write(go_w, b"xx")
        codes = sorted(exit_code(p) for p in pids)
        os.close(go_r), os.close(go_w)
        assert codes == [0, 3], f"round {round_}: exit codes {codes} (0 = committed, 3 = refused)"
        with SqliteStore(path) as s:
            assert s.version("order.refunded") == 1 and s.changes_since(0)[0] == ["order.refunded"]


def test_same_api_as_memory_store(tmp_path):
    from runners.revalidation.stores import MemoryStore

    mem, sql = MemoryStore(STATE), SqliteStore.create(tmp_path / "b.db", STATE)
    with closing(sql):
        for store in (mem, sql):
            store.write({"order.amount": 90, "policy.refund_limit": 95})
        for ref in STATE:
            assert mem.read(ref) == sql.read(ref)
        for key in ("order", "policy", "order.amount"):
            assert mem.version(key) == sql.version(key)
        assert mem.seq == sql.seq and mem.changes_since(1) == sql.changes_since(1)
        with pytest.raises(KeyError):
            sql.read("order.nope")


# ------------------------------------------------------------ one durable execution
def test_an_execution_crosses_processes_and_leaves_nothing_behind():
    workload = load_workloads()["refund"]
    with Workspace() as space:
        record = space.execute(workload, "blocking", "ATR", seed=1, rep=0)
        steps = dict(space.workflow.execute("SELECT step, pid FROM steps WHERE repetition = 0"))
        (blob,) = space.workflow.execute("SELECT blob FROM checkpoints WHERE repetition = 0").fetchone()
        folder = space.folder
    assert set(steps) == {"decide", "mutate", "resume"}
    assert len(set(steps.values())) == 3 and os.getpid() not in steps.values()
    assert record["processes"] == 4
    assert '"workload": "refund"' in blob  # the resumed process started from this checkpoint row
    assert record["outcome"] == record["oracle"] == "BLOCK" and not record["released"] and not record["effect_committed"]
    assert not folder.exists()


# ------------------------------------------------------------ the cells
#: executions per cell and mechanism: the smallest size at which every cell runs each mechanism more than once
REPS = 2


@pytest.fixture(scope="module")
def outputs() -> list:
    """(cell, its CellOutput) for every cell: the records and the history the cell's verdicts were judged on."""
    experiment, options = RevalidationDurable(), Options(extra={"repetitions": REPS})
    return [(cell, experiment.run_cell(cell, options)) for cell in experiment.cells("quick", 7, options)]


@pytest.fixture(scope="module")
def records(outputs) -> pd.DataFrame:
    frames = []
    for cell, out in outputs:
        frame = pd.DataFrame(out.records)
        for key, value in cell.params:
            frame[key] = value
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def test_ten_cells_by_four_mechanisms(records):
    assert len(analysis.cell_order(records)) == len(WORKLOADS) * len(MUTATION_CLASSES) == 10
    assert set(records["mechanism"]) == {"NoCheck", "VersionAbort", "FullScan", "ATR"}
    assert (records["processes"] == 4).all()
    assert (records["released"] == records["effect_committed"]).all()  # the result row matches the database


def test_atr_and_fullscan_agree_with_the_oracle(records):
    for m in ("ATR", "FullScan"):
        sub = records[records["mechanism"] == m]
        assert (sub["outcome"] == sub["oracle"]).all(), sub[sub["outcome"] != sub["oracle"]]


def test_atr_evaluates_fewer_premises_than_fullscan_in_every_cell_with_the_same_outcomes(records):
    tab = analysis.table(records)
    per_cell = analysis.cells_only(tab).pivot(index="cell", columns="mechanism", values="premises_per_change")
    assert len(per_cell) == 10
    assert (per_cell["ATR"] < per_cell["FullScan"]).all(), per_cell
    same, paired = analysis.same_outcomes(records, "ATR", "FullScan")
    assert same == paired == 10 * REPS


def test_nocheck_releases_every_invalid_effect(records):
    sub = records[records["mechanism"] == "NoCheck"]
    assert sub["released"].all()
    tab = analysis.table(records).set_index(["cell", "mechanism"])
    invalid = (sub["oracle"] != "KEEP").sum()
    assert invalid > 0 and tab.loc[("all", "NoCheck"), "invalid_effects"] == invalid
    assert tab.loc[("all", "NoCheck"), "false_allows"] == sub["oracle"].isin(["REPLAN", "BLOCK"]).sum()
    # counted from what was released: the presentation cells' payloads were stale
    assert sub.loc[sub["oracle"] == "REFRESH", "payload_stale"].all()
    assert tab.loc[("all", "ATR"), "invalid_effects"] == 0 and tab.loc[("all", "FullScan"), "invalid_effects"] == 0
    refreshed = records[(records["oracle"] == "REFRESH") & records["mechanism"].isin(["ATR", "FullScan"])]
    assert refreshed["released"].all() and not refreshed["payload_stale"].any()


def test_table_and_report(records):
    tab = analysis.table(records)
    assert {"cell", "mechanism", "executions", "oracle_agreement", "premises_per_change"} <= set(tab.columns)
    total = analysis.totals(tab)
    assert total.loc["ATR", "executions"] == 10 * REPS and total.loc["ATR", "oracle_agreement"] == 1
    per_workload = tab[(tab["workload"] != "all") & (tab["mutation_class"] == "all")].set_index(["workload", "mechanism"])
    assert per_workload.loc[("refund", "ATR"), "executions"] == 5 * REPS and per_workload.loc[("refund", "ATR"), "cell"] == "refund/all"
    section = analysis.report(tab, records)
    rows = {r["metric"]: r for r in section.rows}
    assert rows["ATR: premises per resumed change"]["paper"] == "0.6"
    assert rows["FullScan: premises per resumed change"]["paper"] == "6"
    assert rows["ATR: executions agreeing with the oracle, all cells"]["ours"].startswith(f"{10 * REPS} of {10 * REPS}")
    least = next(r for m, r in rows.items() if m.startswith("ATR: executions agreeing with the oracle, least"))
    assert least["ours"].startswith(f"{REPS} of {REPS}") and least["paper"].startswith("100 of 100")
    assert "The 10 cells are the lab's choice" in section.notes and "2 workloads (**refund**, **procurement**)" in section.notes


@pytest.mark.planted("analysis.revalidation.checkers:OracleAgreement._one", 'if v.get("outcome") == v.get("oracle"):',
                     'if v.get("outcome") == v.get("oracle") or v.get("released"):')  # released effects pass
def test_the_oracle_agreement_checker_judges_every_execution(records, outputs):
    """Planted bug caught: a checker that passes NoCheck's released REPLAN/BLOCK effects.  The records' verdicts
    were judged when the cells ran (the module's fixture, before any plant); NoCheck's histories are judged again
    here, so a planted checker is the one judging."""
    from analysis.revalidation.checkers import OracleAgreement

    for cell, out in outputs:
        if dict(cell.params)["mechanism"] != "NoCheck":
            continue
        oracle = {op.value["group"]: op.value["oracle"] for op in out.history.operations if op.name == "release"}
        judged = {g.group: g.verdict.value for g in OracleAgreement().judge(out.history)}
        assert judged == {g: ("invalid" if o != "KEEP" else "valid") for g, o in oracle.items()}, (cell.params, judged)
    for m in ("ATR", "FullScan"):
        assert (records.loc[records["mechanism"] == m, "verdict"] == "valid").all()
    nocheck = records[records["mechanism"] == "NoCheck"]
    assert ((nocheck["verdict"] == "invalid") == (nocheck["oracle"] != "KEEP")).all()
    tab = analysis.table(records).set_index(["cell", "mechanism"])
    assert tab.loc[("all", "NoCheck"), "invalid"] == (nocheck["oracle"] != "KEEP").sum()
    assert tab.loc[("all", "ATR"), "unknown"] == 0


@pytest.mark.planted("runners.revalidation.durable:Workspace.execute", "pid, code = self.server.call(step, *args)",
                     "pid, code = self.server.call(step, *args); code = 0")  # a step's death not looked at
def test_a_mechanism_whose_release_step_dies_or_raises_stops_the_cell_and_is_never_a_result(tmp_path):
    """Planted bug caught (issue 16 §3, a plug-in that fails is never a result): a mechanism whose validate
    SIGKILLs its own process or raises, recorded as an indeterminate release and an UNKNOWN execution (a
    published row) instead of stopping the cell with one line naming the mechanism and how it died (planted: a step
    whose process died read as finished)."""
    from runners.experiment import Cell, compute

    experiment, options = RevalidationDurable(), Options(extra={"repetitions": 2})
    for mechanism, says in (("toy_family.killer:Killer", "exited with code -9"),
                            ("toy_family.killer:Raiser", "validate() raised RuntimeError: validation exploded")):
        cell = Cell(experiment.name, (("workload", "refund"), ("mutation_class", "blocking"), ("mechanism", mechanism)), 2, 7)
        _, output = compute(experiment, cell, options)
        assert isinstance(output, str) and f"mechanism {mechanism}: " in output and says in output, output
