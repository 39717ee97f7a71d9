"""The shared core: a new family plugs in through registries alone; cells run on a Dask cluster.

- A tiny test-only family ("toy": one scenario file, one mechanism protocol, one checker, one experiment,
  one artifact) is registered without editing any revalidation module, then reproduced, listed and checked.
  Planted bug it catches: a registry or the engine that knows only the revalidation family.
- ``--executor dask`` gives the same table as the local pool, and a worker SIGKILLed mid-run still ends in a
  complete run with no duplicate record.  Planted bugs: workers writing the run folder themselves (a retried
  cell duplicates records), a lost worker's cell dropped.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import analysis.checkers
import mechanisms
import runners.engine
import runners.experiments
import scenarios
from runners.cli import main

HERE = Path(__file__).resolve().parent


@pytest.fixture
def toy(monkeypatch):
    from toy_family import toy

    monkeypatch.setitem(mechanisms.FAMILIES, "toy", mechanisms.Family(
        "toy", {"Alternating": "toy_family.toy:Alternating", "Sticky": "toy_family.toy:Sticky"}, ("flip",), "flip(i) -> side"))
    monkeypatch.setitem(analysis.checkers.FAMILY_MODULES, "toy", "toy_family.toy")
    monkeypatch.setitem(scenarios.PARSERS, "toy", ("toy_family.toy:parse_scenario", HERE / "toy_family"))
    monkeypatch.setitem(runners.experiments.EXPERIMENTS, "toy_flips", toy.ToyFlips())
    for module in (runners.experiments, runners.engine):
        monkeypatch.setattr(module, "FAMILIES", (*runners.experiments.FAMILIES, "toy"))
    return toy


def test_a_new_family_plugs_in_through_its_registries(toy, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["reproduce", "--only", "toy", "--jobs", "1", "--out", str(out), "--quiet",
                 "--mechanisms", "Alternating,Sticky"]) == 0
    table = pd.read_csv(out / "tables" / "toy_flips.csv").set_index("mechanism")
    assert table.loc["Alternating", "valid"] == 4 and table.loc["Sticky", "valid"] == 0
    report = (out / "report.md").read_text()
    assert "| Alternating | holds |" in report and "| Sticky | violated |" in report
    histories = sorted((out / "histories" / "toy_flips").glob("*.jsonl"))
    assert len(histories) == 2
    capsys.readouterr()
    codes = {h.name: main(["check", str(h)]) for h in histories}
    text = capsys.readouterr().out
    assert sorted(codes.values()) == [0, 1] and "two tails in a row" in text
    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    assert "[toy]" in listed and "toy_flips" in listed and "alternates" in listed and "Sticky" in listed


def test_check_says_unknown_for_an_indeterminate_operation_and_never_valid(toy, tmp_path, capsys):
    from vocabulary import History, Operation, history_to_jsonl

    ops = (Operation(0, "coin", "flip", value={"side": "tails"}), Operation(1, "coin", "flip", "indeterminate", value={"side": "?"}))
    path = tmp_path / "h.jsonl"
    path.write_text(history_to_jsonl(History("toy", ops)))
    assert main(["check", str(path)]) == 2
    captured = capsys.readouterr()
    assert "unknown" in captured.out and "not a valid one" in captured.err


def quick_omission(tmp: Path, name: str, *extra: str) -> Path:
    out = tmp / name
    assert main(["reproduce", "--only", "revalidation_omission", "--repetitions", "3", "--jobs", "2",
                 "--out", str(out), "--quiet", *extra]) == 0
    return out


def test_dask_gives_the_same_table_as_the_local_pool(tmp_path):
    local = quick_omission(tmp_path, "local")
    dask = quick_omission(tmp_path, "dask", "--executor", "dask")
    assert (local / "tables" / "revalidation_omission.csv").read_text() == (dask / "tables" / "revalidation_omission.csv").read_text()
    assert '"executor": "dask"' in (dask / "provenance.json").read_text()


def test_a_worker_killed_mid_run_still_ends_in_a_complete_run_without_duplicates(tmp_path):
    import psutil
    from dask.distributed import LocalCluster


    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        out = tmp_path / "run"
        records = out / "records" / "revalidation_omission"
        killed: list[int] = []

        def kill_one_worker() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and len(list(records.glob("*.parquet"))) < 5:
                time.sleep(0.01)
            worker = psutil.Process(next(iter(cluster.workers.values())).process.pid)  # the nanny's worker process
            killed.append(worker.pid)
            os.kill(worker.pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_one_worker)
        killer.start()
        assert main(["reproduce", "--only", "revalidation_omission", "--repetitions", "40", "--out", str(out), "--quiet",
                     "--executor", "dask", "--scheduler", cluster.scheduler_address]) == 0
        killer.join()
    assert killed, "a worker process was killed mid-run"
    got = pd.concat(pd.read_parquet(p) for p in records.glob("*.parquet"))
    cells = len(list(records.glob("*.parquet")))
    assert len(got) == cells * 40 and not got.duplicated(["cell", "repetition"]).any()
    whole = quick_omission(tmp_path, "whole", "--repetitions", "40")
    assert (whole / "tables" / "revalidation_omission.csv").read_text() == (out / "tables" / "revalidation_omission.csv").read_text()


@pytest.mark.planted("runners.engine:batches", "return [[n] for n in alone] + ([rest] if rest else [])",
                     "return [alone + rest]")
def test_benchmarks_run_first_and_alone_and_every_other_experiment_shares_one_pool():
    """The order of a whole run: each benchmark (``parallel = False``) in a batch of its own, before anything else
    has started a worker, then every other experiment in one batch (one pool), in the registry's order; on Dask one
    experiment at a time.  Planted bug: benchmarks in the shared pool, timed beside other experiments' cells (and so
    with one job: a pool holding a benchmark runs everything one cell at a time)."""
    from runners.engine import Request, batches

    names = list(runners.experiments.EXPERIMENTS)
    alone = [n for n in names if not runners.experiments.EXPERIMENTS[n].parallel]
    got = batches(Request(tuple(names)))
    assert alone and got == [[n] for n in alone] + [[n for n in names if n not in alone]]
    assert batches(Request(tuple(names), executor="dask")) == [[n] for n in alone + got[-1]]
