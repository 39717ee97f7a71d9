"""``resume_profile`` judges the executions ``resume_faults`` made of the same fault cells in the same run
(``runners/resume/profile.py``: :func:`executed`), and executes a cell itself where there is none.

Real fault cells (a SIGKILL after the gated effect, a recovery in a new process) on the lab's ``sequencer``, on
SQLite.
"""
from __future__ import annotations

import pandas as pd
import pytest

from runners.execute import write_cell
from runners.experiment import Cell, Options
from runners.resume.faults import ResumeFaults
from runners.resume.profile import ResumeProfile

PARAMS = (("runtime", "sequencer"), ("fault_cell", "crash_resume_after_effect_act"), ("backend", "sqlite"))
#: what differs between two executions of one fault cell: its wall time
TIMED = ["wall_us"]


def _records(out) -> dict:
    return {k: list(v) for k, v in out.records.items() if k not in TIMED}


@pytest.mark.planted("runners.resume.profile:executed", 'frame["seed"] = [', 'frame["kept"] = [')
def test_the_profile_takes_the_fault_matrixs_execution_of_the_same_cell(tmp_path):
    """Bug classes: a reused cell that keeps the fault matrix's seed column (the profile's records would then
    depend on whether resume_faults ran first; planted); a reuse whose history still names the other experiment or
    hides where it was executed; a profile that never reuses (its records equal to its own execution only by
    chance)."""
    options = Options(run_dir=tmp_path)
    faults = Cell("resume_faults", PARAMS, 1, 3)
    write_cell(tmp_path, faults, ResumeFaults().run_cell(faults, options))
    cell = Cell("resume_profile", PARAMS, 1, 3)
    reused = ResumeProfile().run_cell(cell, options)
    (tmp_path / "elsewhere").mkdir()
    own = ResumeProfile().run_cell(cell, Options(run_dir=tmp_path / "elsewhere"))
    assert reused.history.meta["executed_by"] == f"resume_faults/{faults.id}"
    assert reused.history.meta["experiment"] == "resume_profile" and "executed_by" not in own.history.meta
    assert _records(reused) == _records(own)  # the profile's own seeds, the same verdicts and witnesses
    timed = pd.read_parquet(tmp_path / "records" / "resume_faults" / faults.filename)["wall_us"]
    assert reused.records["wall_us"] == list(timed)  # the fault matrix's execution, not one of its own


@pytest.mark.planted("runners.resume.profile:executed", "return None  # another seed", "pass  # another seed")
@pytest.mark.parametrize("reps,seed", [(2, 3), (1, 4)], ids=["other-repetitions", "other-seed"])
def test_a_cell_of_another_definition_is_executed_again(tmp_path, reps, seed):
    """Only the same definition is reused: another repetition count or seed is another cell (planted bug: a reuse
    keyed on the file's name, which says the runtime, fault cell and backend only)."""
    options = Options(run_dir=tmp_path)
    faults = Cell("resume_faults", PARAMS, 1, 3)
    write_cell(tmp_path, faults, ResumeFaults().run_cell(faults, options))
    out = ResumeProfile().run_cell(Cell("resume_profile", PARAMS, reps, seed), options)
    assert "executed_by" not in out.history.meta
    assert sorted(set(out.records["repetition"])) == list(range(reps))
