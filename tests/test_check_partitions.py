"""How ``driftlab check`` partitions a chunk on its quick path (issue 28): each operation's local partition, numbered
in the order the partitions first appear, and the inner partitions' operations handed to the checkers, grouped
by partition in file order.

The quick path (``_scan_chunk``: a chunk validated a field at a time) numbers partitions in one C-level pass and
skips the partition key's own type test when the validator's test of the common keys already made it; the inner
partitions are gathered by appending each picked operation to its partition's list.  Each is held to a plain
reference: the per-line path (``_scan_lines``, union-find over keys) for the partitions, a sort by partition for
the grouping, the declared types for the skipped test.
"""
from __future__ import annotations

import random
from array import array
from itertools import groupby

import orjson
import pytest

from analysis.checkers import schemas
from runners.check import Chunk, _scan_chunk, _scan_lines, inner_partitions, key_typed
from vocabulary.schema import HistorySchema, Key, OpSpec, Validator


def reference_inner(objs: list, order: list[int], picked: list[int] | None, outer: set[int]) -> list[list]:
    """The picked operations grouped by partition the slow way: sorted by partition number (stable, so each
    partition in file order), the outer ones and the empty ones left out."""
    picked = sorted(range(len(objs)) if picked is None else picked, key=order.__getitem__)
    return [[objs[k] for k in ks] for p, ks in groupby(picked, order.__getitem__) if p not in outer]


@pytest.mark.planted("runners.check:inner_partitions", "if ops and p not in outer", "if ops")
@pytest.mark.planted("runners.check:inner_partitions", "map(objs.__getitem__, picked)",
                     "map(objs[1:].__getitem__, picked)")
def test_inner_partitions_are_the_picked_operations_by_partition_in_file_order():
    """Planted bugs: the partitions that reach an edge judged inside the chunk too (their verdicts counted twice),
    or operations handed to the partition of their neighbour: on random chunks (partitions numbered by first
    appearance, interleaved, some with nothing picked) the grouping must equal a stable sort by partition."""
    rng = random.Random(28)
    for trial in range(300):
        count = rng.randrange(0, 60)
        keys = [rng.randrange(rng.randrange(1, 12)) for _ in range(count)]
        first = {k: i for i, k in enumerate(dict.fromkeys(keys))}
        order = array("q", [first[k] for k in keys])
        objs = [{"index": k, "key": key} for k, key in enumerate(keys)]
        picked = None if trial % 5 == 0 else [k for k in range(count) if rng.random() < 0.4]
        outer = {p for p in first.values() if rng.random() < 0.3}
        got = inner_partitions(objs, order, len(first), picked, outer)
        assert got == reference_inner(objs, list(order), picked, outer), trial
        assert all(ops for ops in got), "no empty partition is handed on"


def race_lines(rng: random.Random, groups: int) -> list[bytes]:
    """Operation lines of a few interleaved groups (string and integer keys, some lines without one)."""
    names = ["setup", "begin", "read_target", "commit", "audit"]
    rows, t = [], 0.0
    keys = [rng.choice([g, f"g{g}"]) for g in range(groups)]
    for index in range(rng.randrange(1, 80)):
        value = {} if rng.random() < 0.1 else {"group": rng.choice(keys)}
        name = rng.choice(names)
        if name in ("setup", "audit"):  # their state is required (vocabulary.revalidation.HISTORY)
            value["state"] = {"refunds": 0}
        rows.append({"index": index, "actor": "a", "op": name, "status": "ok", "start": t, "end": t + 0.5,
                     "value": value})
        t += 1.0
    return [orjson.dumps(r) for r in rows]


def partitions_of(part: array, keys: dict[int, list]) -> list[frozenset]:
    """Each operation's partition as the set of keys that make it (so two numberings can be compared)."""
    return [frozenset(keys[p]) for p in part]


@pytest.mark.planted("runners.check:_scan_chunk", "map(len, repeat(local))", "map(len, repeat(keys))")
@pytest.mark.planted("runners.check:_scan_chunk", "local.setdefault, keys,", "local.setdefault, keys[::-1],")
def test_the_quick_path_partitions_a_chunk_as_the_per_line_path_does():
    """Planted bugs: every new key given one number (distinct partitions merged into one), or the keys read out of
    line order (operations tied to another line's partition): the quick path's partition of each operation, and
    its numbering in the order the partitions first appear, must be the per-line path's (union-find over keys)."""
    validator = Validator(schemas()["revalidation"], schemas(), False)
    rng = random.Random(2028)
    for trial in range(200):
        lines = race_lines(rng, rng.randrange(1, 8))
        quick = _scan_chunk(lines, validator.fresh(), Chunk())
        slow = _scan_lines(lines, validator.fresh(), Chunk())
        assert quick is not None and slow is not None, trial
        assert partitions_of(quick[2], quick[3]) == partitions_of(slow[2], slow[3]), trial
        assert list(dict.fromkeys(quick[2])) == list(range(len(quick[3]))), "numbered in the order they first appear"


def schema_with_group(kind: str, required: str = "optional") -> HistorySchema:
    return HistorySchema("t", operations=(OpSpec("x", "an operation"),), partition=("group",),
                         common=(Key("group", kind, required),))


@pytest.mark.planted("runners.check:key_typed", "types is not None and types <= {str, int}", "True")
def test_a_partition_keys_own_type_test_is_skipped_only_when_the_declared_type_is_a_key():
    """Planted bug: the partition key's own type test skipped whatever its declared type, so a chunk whose key is
    a number (declared ``string|number``) is partitioned instead of refused with the line that holds it."""
    def typed(kind: str) -> bool:
        schema = schema_with_group(kind)
        return key_typed(Validator(schema, {"t": schema}, False), "group")

    assert typed("key") and typed("string") and typed("integer") and typed("integer|string")
    assert not typed("string|number") and not typed("any") and not typed("number") and not typed("object")
    schema = schema_with_group("string|number")
    lines = [orjson.dumps({"index": i, "actor": "a", "op": "x", "status": "ok", "start": 0, "end": 1,
                           "value": {"group": g}}) for i, g in enumerate(["a", 1.5, "a"])]
    out = Chunk()
    assert _scan_chunk(lines, Validator(schema, {"t": schema}, False), out) is None, "refused: the line says where"
    assert _scan_lines(lines, Validator(schema, {"t": schema}, False), out) is None
    assert out.error == (2, "value.group: a partition key must be a string or an integer (got 1.5)")
