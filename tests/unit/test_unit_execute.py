"""A cell's records as written (runners/execute.py ``_framed``): experiment, cell id and parameters lead, typed as
the scalars they are, in the order the cell declares them, whether the cell has records or none."""
from __future__ import annotations

import pandas as pd
import pytest

from runners.execute import _framed
from runners.experiment import Cell

CELL = Cell("exp", (("mechanism", "ATR"), ("k", 4), ("rate", 0.5), ("durable", True)), 1, 7)


@pytest.mark.planted("runners.execute:_framed", '{"experiment": cell.experiment, "cell": cell.id, **dict(cell.params)}',
                     '{**dict(cell.params), "experiment": cell.experiment, "cell": cell.id}')
@pytest.mark.parametrize("records", [
    {"verdict": ["valid", "invalid"], "n": [1, 2]},
    pytest.param({"verdict": [], "n": []}, marks=pytest.mark.planted("runners.execute:_framed", "if n:", "if True:")),
], ids=["two-rows", "no-rows"])
def test_leading_columns_are_the_cells_identity_typed_as_its_scalars(records):
    """Bug class: parameters written in another order, or (a cell with no records) as float columns that no longer
    concatenate with the other cells' typed ones."""
    frame = _framed(CELL, records)
    assert list(frame.columns) == ["experiment", "cell", "mechanism", "k", "rate", "durable", "verdict", "n"]
    assert [str(t) for t in frame.dtypes.iloc[3:6]] == ["int64", "float64", "bool"]
    assert len(frame) == len(records["n"])
    assert (frame["cell"] == "ATR/4/0.5/True").all() and (frame["k"] == 4).all()
    assert frame.iloc[:, :6].dtypes.equals(_framed(CELL, {"verdict": ["x"], "n": [0]}).iloc[:, :6].dtypes)


@pytest.mark.parametrize("cell,records", [
    (CELL, {"k": [1]}),  # a record column named as a parameter
    (Cell("exp", (("k", 1), ("k", 2)), 1, 7), {"n": [1]}),  # a parameter twice
    (Cell("exp", (("cell", "x"),), 1, 7), {"n": [1]}),  # a parameter named as a leading column
], ids=["record-column", "twice", "leading"])
def test_a_name_given_twice_is_an_error_of_the_lab(cell, records):
    with pytest.raises(ValueError, match="share a name"):
        _framed(cell, records)


def test_the_frame_is_what_pandas_reads_back(tmp_path):
    frame = _framed(CELL, {"n": [1, 2]})
    frame.to_parquet(tmp_path / "c.parquet", index=False)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "c.parquet"), frame)
