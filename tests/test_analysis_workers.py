"""A run's analysis built in worker processes (``runners.engine.map_in_workers``, ``analysis.pipeline.analyze``):
each experiment's tables, figures and report section, handed back in the order given, published only once all
were built."""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest

from analysis.artifact import Artifact
from analysis.pipeline import analyze
from analysis.report import Section
from runners.engine import map_in_workers
from runners.execute import write_cell
from runners.experiment import Cell


def _slow(i: int) -> int:
    time.sleep((0.6, 0.0, 0.3, 0.0)[i])  # the first finishes last
    return i * 10


def _fails(i: int) -> int:
    if i == 2:
        raise KeyError(f"no column for item {i}")
    return i


@pytest.mark.planted("runners.engine:map_in_workers",
                     "got[i][0] if got[i] is not None else fn(items[i]) for i in range(len(items))",
                     "v[0] if v is not None else None for v in got.values()")  # completion order
@pytest.mark.planted("runners.engine:map_in_workers", "else fn(items[i])", "else []")  # a failed item dropped
def test_items_come_back_in_the_order_given_and_a_failing_one_raises_its_own_error():
    """Planted bugs: results handed back in the order the workers finished, so the report files one experiment's
    tables under another's sections; an item whose build raised in a worker dropped, so the run reports no error
    and its artifacts are missing."""
    assert map_in_workers(_slow, [0, 1, 2, 3]) == [0, 10, 20, 30]
    with pytest.raises(KeyError, match="no column for item 2"):
        map_in_workers(_fails, [0, 1, 2, 3])


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    for exp in ("exp_a", "exp_b"):
        write_cell(run, Cell(exp, (("n", 1),), 1, 0), {"value": [1, 2]})
    return run


def _draw(records: pd.DataFrame, table: pd.DataFrame, out: Path) -> list[Path]:
    out.with_suffix(".png").write_text(out.name)
    return [out.with_suffix(".png")]


def _artifact(name: str, experiment: str, fail: bool = False) -> Artifact:
    def table(records: pd.DataFrame) -> pd.DataFrame:
        if fail:
            raise ValueError(f"{name}: no column 'verdict'")
        return pd.DataFrame({"cells": [len(records)]})
    return Artifact(name, table, lambda table, records: Section(name, name), _draw, experiment)


@pytest.mark.planted("analysis.pipeline:analyze", "shutil.rmtree(stage, ignore_errors=True)", "pass")
@pytest.mark.planted("analysis.pipeline:analyze", "Path(path).replace(figures / Path(path).name)", "pass")
@pytest.mark.planted("analysis.pipeline:analyze", "(a for a in artifacts if a.experiment in of)",
                     "(a for arts in groups.values() for a in arts)")
def test_figures_are_published_with_their_tables_and_nothing_when_one_experiment_fails(tmp_path):
    """Every experiment's tables and figures land in ``tables/`` and ``figures/``, and the report lists them in the
    artifacts' order; when one experiment's table raises, nothing is published and no staging folder is left.
    Planted bugs: the staging folder kept after a failure (a half-built analysis left in the run folder); figures
    left in the staging folder, so the report lists files that are not there; sections in the order experiments
    were built, not the artifacts' (an artifact declared after another experiment's moves up the report)."""
    run = _run(tmp_path)
    arts = [_artifact("a1", "exp_a"), _artifact("b1", "exp_b"), _artifact("a2", "exp_a")]
    sections = analyze(run, arts, map_in_workers)
    assert [s.files for s in sections] == [[f"tables/{n}.csv", f"tables/{n}.md", f"figures/{n}.png"]
                                          for n in ("a1", "b1", "a2")]
    assert all((run / f).is_file() for s in sections for f in s.files)
    assert (run / "figures" / "b1.png").read_text() == "b1"

    again = _run(tmp_path / "second")
    with pytest.raises(ValueError, match="b1: no column 'verdict'"):
        analyze(again, [_artifact("a1", "exp_a"), _artifact("b1", "exp_b", fail=True)], map_in_workers)
    assert sorted(p.name for p in again.iterdir()) == ["records"]
