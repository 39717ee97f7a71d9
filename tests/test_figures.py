"""Figures: the same records draw the same files (figures/save.py), PNG and SVG byte for byte."""
from __future__ import annotations

import pandas as pd
import pytest

from figures.revalidation.scaling import draw


@pytest.mark.planted("figures.save:save", '{"svg.hashsalt": "driftlab"}', '{"svg.hashsalt": None}')
def test_the_same_table_draws_the_same_files(tmp_path):
    """A real figure (errorbars clipped to the axes, a log scale, a legend) drawn twice from one table in one process
    gives identical PNG and SVG files.  Planted bug this catches: SVG ids left to matplotlib's random salt (every run's
    SVG differs from the last, so no two reports of the same records are the same files)."""
    tab = pd.DataFrame({"mechanism": ["ATR", "ATR", "FullScan", "FullScan", "floor", "floor"],
                        "reads": [10, 100, 10, 100, 10, 100],
                        "median_us": [5.0, 9.0, 20.0, 210.0, 1.0, 2.0],
                        "ci_low_us": [4.0, 8.0, 18.0, 200.0, 1.0, 2.0],
                        "ci_high_us": [6.0, 10.0, 22.0, 220.0, 1.0, 2.0]})
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = draw(pd.DataFrame(), tab, tmp_path / "a" / "fig")
    second = draw(pd.DataFrame(), tab, tmp_path / "b" / "fig")
    assert [p.suffix for p in first] == [".png", ".svg"]
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes(), f"{a.name}: two drawings of the same table differ"
