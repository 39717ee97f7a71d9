"""Reading a run's records (Parquet, one file per finished cell) into pandas.

Records are the truth of a run, so reading them is strict: a file that is
not Parquet, is truncated or empty, or has another schema than its siblings
is a one-line :class:`RecordsError` naming the file, never a silent merge
or a partial table.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

RECORDS = "records"
KEY_COLUMNS = ("experiment", "cell")


class RecordsError(ValueError):
    """Records that cannot be read as one table; the message is one line naming the file."""


def experiments_in(run_dir: Path) -> list[str]:
    root = Path(run_dir) / RECORDS
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def _read(path: Path) -> pa.Table:
    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        problem = "empty file" if path.stat().st_size == 0 else str(exc).splitlines()[0]
        raise RecordsError(f"{path}: not a readable Parquet records file ({problem})") from None


def _kind(t: pa.DataType) -> str | None:
    """What a column holds, as far as one schema must agree: a number (integer or float: a cell with a NaN
    stores floats), text, a boolean...; None for a column of nulls only."""
    if pa.types.is_null(t):
        return None
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    return str(t)


def check_schemas(run_dir: Path, experiment: str) -> None:
    """Every records file of ``experiment`` is Parquet with the same columns *and column types* as the first
    (read from the files' footers only, so it is cheap before a rerun); RecordsError naming the file."""
    files = sorted((Path(run_dir) / RECORDS / experiment).glob("*.parquet"))
    first = None
    for f in files:
        try:
            schema = pq.read_schema(f)
        except (pa.ArrowException, OSError, ValueError) as exc:
            problem = "empty file" if f.stat().st_size == 0 else str(exc).splitlines()[0]
            raise RecordsError(f"{f}: not a readable Parquet records file ({problem})") from None
        if first is None:
            first = (f, schema)
            continue
        names, first_names = schema.names, first[1].names
        if names != first_names:
            extra = sorted(set(names) ^ set(first_names))
            raise RecordsError(f"{f}: its columns differ from {first[0].name}'s"
                               + (f" ({extra[0]!r})" if extra else " (order)") + "; records of one experiment share one schema")
        for field in schema:
            other = first[1].field(field.name).type
            if None not in (_kind(field.type), _kind(other)) and _kind(field.type) != _kind(other):
                raise RecordsError(f"{f}: column {field.name!r} is {field.type}, not {other} as in {first[0].name}; "
                                   "records of one experiment share one schema")


def load_records(run_dir: Path, experiment: str) -> pd.DataFrame:
    """All records of one experiment in a run folder, in a stable order."""
    files = sorted((Path(run_dir) / RECORDS / experiment).glob("*.parquet"))
    if not files:
        return pd.DataFrame()
    tables = []
    with ThreadPoolExecutor(max_workers=4) as pool:  # Arrow reads without the GIL: a cell's file is mostly I/O
        read = list(pool.map(_read, files))  # in order: the first unreadable file (sorted) is the one named
    for f, table in zip(files, read):
        missing = [c for c in KEY_COLUMNS if c not in table.column_names]
        if missing:
            raise RecordsError(f"{f}: not a driftlab records file (no {missing[0]!r} column)")
        if tables and table.column_names != tables[0].column_names:
            extra = sorted(set(table.column_names) ^ set(tables[0].column_names))
            raise RecordsError(f"{f}: its columns differ from {files[0].name}'s"
                               + (f" ({extra[0]!r})" if extra else " (order)") + "; records of one experiment share one schema")
        held = set(table.column("experiment").unique().to_pylist())
        if table.num_rows and held != {experiment}:
            raise RecordsError(f"{f}: holds records of {sorted(held, key=str)[0]!r}, not {experiment!r}")
        tables.append(table)
    try:  # one conversion to pandas for the whole experiment (a cell's file is a few rows: per-file costs dominate)
        frame = pa.concat_tables(tables, promote_options="permissive").to_pandas()
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # columns of kinds Arrow will not merge: pandas' object columns
        frame = pd.concat([t.to_pandas() for t in tables], ignore_index=True)
    order = [c for c in ("cell", "repetition") if c in frame.columns]
    return frame.sort_values(order, kind="stable").reset_index(drop=True) if order else frame
