"""The quick test of a chunk (:meth:`Validator.check_many`, what ``driftlab check`` validates with, issue 28): a
chunk's parsed lines validated a field at a time, each declared operation name's lines listed in the same pass.

It must accept only chunks whose every line the per-line validator (:meth:`Validator.check`) accepts: a chunk it
refuses is validated line by line, which names the first bad line, so a test looser than the per-line one would
judge a malformed history instead of refusing it.  It must fire on a clean history (else every chunk is validated
line by line: correct, but the old speed), and its lists of each name's lines must be the lines of that name (the
checkers are handed the lines of the names they read from them).
"""
from __future__ import annotations

import json
import random

import orjson
import pytest
from test_check_fastpath import corruptions, random_history

from analysis.checkers import schemas
from benchmarks.bench_check import write_history
from vocabulary import HistoryError
from vocabulary.schema import Validator


def validator() -> Validator:
    return Validator(schemas()["revalidation"], schemas(), False)


@pytest.mark.planted("vocabulary.schema:_values_pass", "if types is not None and not kinds <= types:", "if False:")
@pytest.mark.planted("vocabulary.schema:Validator._check_many", "or not kinds <= _STATUS_SET",
                     "or not set(status[1:]) <= _STATUS_SET")
@pytest.mark.planted("vocabulary.schema:Validator._check_many", "if not _values_pass(value, self.common, fetched):",
                     "if not _values_pass(value, [], fetched):")
@pytest.mark.planted("vocabulary.schema:Validator._check_many", "for op_name in self.needy:",
                     "for op_name in sorted(self.needy)[:1]:")
@pytest.mark.planted("vocabulary.schema:Validator._check_many", "or set(map(type, actor)) != _STR", "")
@pytest.mark.planted("vocabulary.schema:Validator._check_many", "if not starts <= _TIME or not ends <= _TIME:",
                     "if not starts <= _TIME:")
def test_the_quick_test_accepts_only_what_the_lines_one_by_one_accept(tmp_path):
    """Planted bugs: the quick test skipping the value keys' types, the first line's status, the keys every operation may carry
    (``value.group``), the own keys of all but one of the names that declare some, the actor's type or the end's
    type: a line the per-line validator refuses would pass the chunk and be judged instead of refused."""
    path = random_history(tmp_path / "h.jsonl", 99, groups=12)
    rows = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    refused = 0
    for at in range(0, len(rows), 3):
        for bad in corruptions(rows[at]) + [{**rows[at], "start": None, "end": "1.0"}, {**rows[at], "end": True}]:
            objs = [orjson.loads(orjson.dumps(r)) for r in [*rows[:at], bad, *rows[at + 1:]]]
            one, lines_ok = validator(), True
            try:
                for n, obj in enumerate(objs, 1):
                    one.check(obj, n)
            except HistoryError:
                lines_ok = False
            at_once = validator()
            got = at_once.check_many(objs, {})
            assert got is None or lines_ok, (at, bad)
            if got is None:
                assert at_once.previous == validator().previous, "nothing changed unless every line passes"
            refused += not lines_ok
    assert refused > 100, "most corruptions are refused"


@pytest.mark.planted("vocabulary.schema:Validator._check_many", "index[0] <= self.previous", "index[0] >= self.previous")
def test_the_quick_test_fires_on_a_clean_race_history(tmp_path):
    """Planted bug: a quick test that never fires (every chunk validated line by line: correct, but slower)."""
    path = write_history(tmp_path / "race.jsonl", 3000)
    raw = path.read_bytes().splitlines()[1:]
    at_once = validator()
    for start in range(0, len(raw), 1000):
        assert at_once.check_many(list(map(orjson.loads, raw[start:start + 1000])), {}) is not None, start
    assert at_once.previous == len(raw) - 1


@pytest.mark.planted("vocabulary.schema:Validator._check_many", "range(len(name))", "range(1, len(name) + 1)")
@pytest.mark.planted("vocabulary.schema:Validator._check_many", "map(by_name.__getitem__, name)",
                     "map(by_name.__getitem__, name[::-1])")
def test_each_names_lines_are_the_lines_of_that_name(tmp_path):
    """Planted bugs: each name's lines off by one, or taken in reverse (the checkers then handed other lines than
    those of the names they read): every declared name maps to exactly the positions of its lines, in order, and
    the statuses are the set of the lines' statuses."""
    rng = random.Random(5)
    for seed in range(4):
        path = random_history(tmp_path / f"h{seed}.jsonl", seed, groups=rng.randrange(5, 30))
        objs = [orjson.loads(line) for line in path.read_bytes().splitlines()[1:]]
        got = validator().check_many(objs, {})
        assert got is not None, seed
        values, by_name, kinds = got
        assert list(values) == [obj["value"] for obj in objs]
        assert set(by_name) == set(validator().fast)
        for name, at in by_name.items():
            assert at == [k for k, obj in enumerate(objs) if obj["op"] == name], (seed, name)
        assert kinds == {obj["status"] for obj in objs}
