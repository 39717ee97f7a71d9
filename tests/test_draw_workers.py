"""``runners.engine.draw_in_workers``: a run's figures drawn in worker processes, handed back in the order given."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from runners.engine import draw_in_workers


def _draw(delay: float, fail: bool = False):
    def draw(records, table, out: Path) -> list[Path]:
        time.sleep(delay)
        if fail:
            raise KeyError(f"no column for {out.name}")
        out.with_suffix(".png").write_text(out.name)
        return [out.with_suffix(".png")]
    return draw


@pytest.mark.planted("runners.engine:draw_in_workers",
                     "got[i] if got[i] is not None else draw_here([jobs[i]])[0] for i in range(len(jobs))",
                     "v if v is not None else [] for v in got.values()")  # completion order
@pytest.mark.planted("runners.engine:draw_in_workers", "draw_here([jobs[i]])[0]", "[]")  # a failed figure dropped
def test_figures_come_back_in_the_order_given_and_a_failing_one_raises_its_own_error(tmp_path):
    """Planted bugs: the files handed back in the order the workers finished, so the report lists one figure's
    files under another's section; a figure whose drawing raised in a worker dropped, so the run reports no error
    and the figure is missing."""
    delays = (0.6, 0.0, 0.3, 0.0)  # the first finishes last
    jobs = [(_draw(d), None, None, tmp_path / f"fig{i}") for i, d in enumerate(delays)]
    assert draw_in_workers(jobs) == [[tmp_path / f"fig{i}.png"] for i in range(4)]
    assert [(tmp_path / f"fig{i}.png").read_text() for i in range(4)] == [f"fig{i}" for i in range(4)]
    with pytest.raises(KeyError, match="no column for bad"):
        draw_in_workers([*jobs[:2], (_draw(0.0, fail=True), None, None, tmp_path / "bad")])
