"""The shared vocabulary: histories in and out of JSON Lines, their groups, operations and results in prose.

Bug classes (issue 16 §7): a history reader that accepts a malformed line (or names the wrong line) instead of
refusing it in one line; a round trip that loses or reorders what a history holds; an operation grouped under the
wrong execution; a witness that names the wrong operation.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from vocabulary import (INDETERMINATE, CheckResult, History, HistoryError, Operation, Verdict, Witness,
                        history_from_jsonl, history_to_jsonl)

HEAD = '{"history": 1, "family": "fam", "meta": {"seed": 7}}'
LINE = '{"actor": "w", "op": "read", "status": "ok", "value": {"k": 1}}'


@pytest.mark.planted("vocabulary:history_to_jsonl",
                     'return "\\n".join(lines) + "\\n"',
                     'return "\\n".join(lines)')
def test_round_trip_keeps_every_field_and_the_text_is_stable():
    """Bug class: a round trip that loses or reorders what a history holds (keys unsorted, a field dropped, a
    non-JSON meta value refused instead of written as text, the final newline missing)."""
    ops = (Operation(3, "worker-1", "commit", "ok", 1.0, 2.0, {"a": 1, "b": "x"}),
           Operation(4, "w", "read", INDETERMINATE, 2.5, None, {}))
    h = History("fam", ops, {"p": Path("/x"), "seed": 7})
    text = history_to_jsonl(h)
    assert text == (
        '{"family": "fam", "history": 1, "meta": {"p": "/x", "seed": 7}}\n'
        '{"actor": "worker-1", "end": 2.0, "index": 3, "op": "commit", "start": 1.0, "status": "ok", '
        '"value": {"a": 1, "b": "x"}}\n'
        '{"actor": "w", "end": null, "index": 4, "op": "read", "start": 2.5, "status": "indeterminate", "value": {}}\n')
    back = history_from_jsonl(text)
    assert back == History("fam", ops, {"p": "/x", "seed": 7})
    assert back.operations[1].indeterminate and not back.operations[0].indeterminate


@pytest.mark.planted("vocabulary:history_from_jsonl",
                     'int(obj.get("index", len(ops)))',
                     'int(obj.get("index", n))')
def test_reader_defaults_index_value_and_meta_and_skips_blank_lines():
    """Bug class: a history reader that misnumbers operations without an explicit index (not their position), or
    refuses an operation without a value, or a header without meta."""
    text = "\n" + '{"history": 1, "family": "fam"}' + "\n  \n" + LINE + "\n" + \
        '{"actor": "v", "op": "write", "status": "fail"}' + "\n"
    h = history_from_jsonl(text)
    assert h.family == "fam" and h.meta == {}
    assert [(o.index, o.actor, o.name, o.status, o.value, o.start, o.end) for o in h.operations] == [
        (0, "w", "read", "ok", {"k": 1}, None, None), (1, "v", "write", "fail", {}, None, None)]
    timed = history_from_jsonl(HEAD + "\n" + '{"index": 9, "actor": "w", "op": "read", "status": "ok", '
                               '"start": 1, "end": 2.5}\n')
    assert timed.meta == {"seed": 7}
    assert [(o.index, o.start, o.end) for o in timed.operations] == [(9, 1, 2.5)]


@pytest.mark.parametrize("text,message", [
    ("", "src: empty file (expected a header line, then one line per operation)"),
    ("\n   \n", "src: empty file (expected a header line, then one line per operation)"),
    ("\nnot json", "src: line 2: not JSON (Expecting value)"),
    ("[1, 2]", "src: line 1: expected a JSON object"),
    ('{"history": 2, "family": "fam"}', 'src: line 1: the header must be {"history": 1, "family": "<family>", '
                                        '"meta": {...}}'),
    ('{"history": 1, "family": 3}', 'src: line 1: the header must be {"history": 1, "family": "<family>", '
                                    '"meta": {...}}'),
    ('{"history": 1}', 'src: line 1: the header must be {"history": 1, "family": "<family>", "meta": {...}}'),
    ('{"family": "fam"}', 'src: line 1: the header must be {"history": 1, "family": "<family>", "meta": {...}}'),
    ('{"history": 1, "family": "fam", "meta": [1]}', "src: line 1: 'meta' must be an object"),
    (HEAD + "\n\n" + '{"op": "read", "status": "ok"}', "src: line 3: 'actor' must be a string"),
    (HEAD + "\n" + '{"actor": "w", "op": 5, "status": "ok"}', "src: line 2: 'op' must be a string"),
    (HEAD + "\n" + '{"actor": "w", "op": "read"}', "src: line 2: 'status' must be a string"),
    pytest.param(HEAD + "\n" + '{"actor": "w", "op": "read", "status": "done"}',
                 "src: line 2: status 'done' is not one of ok, fail, indeterminate",
                 marks=pytest.mark.planted("vocabulary:history_from_jsonl", 'if obj["status"] not in STATUSES:',
                                           "if False:")),
    (HEAD + "\n" + LINE + "\n" + '{"actor": "w", "op": "read", "status": "ok", "start": "1"}',
     "src: line 3: 'start' must be a number or null"),
    (HEAD + "\n" + '{"actor": "w", "op": "read", "status": "ok", "end": [2]}',
     "src: line 2: 'end' must be a number or null"),
    (HEAD + "\n" + '{"actor": "w", "op": "read", "status": "ok", "value": [1]}',
     "src: line 2: 'value' must be an object"),
    (HEAD + "\n" + '"just a string"', "src: line 2: expected a JSON object"),
])
def test_reader_refuses_a_malformed_line_in_one_line_naming_it(text, message):
    """Bug class: a history reader that accepts a malformed line (a missing or mistyped field, an unknown status, a
    header of another format) or names the wrong line; the message is exactly one line."""
    with pytest.raises(HistoryError) as exc:
        history_from_jsonl(text, "src")
    assert str(exc.value) == message
    assert isinstance(exc.value, ValueError)


def test_reader_names_its_source_by_default():
    with pytest.raises(HistoryError, match=r"^history: empty file"):
        history_from_jsonl("")


@pytest.mark.planted("vocabulary:History.groups",
                     'if key not in cache:',
                     'if not cache:')
def test_groups_split_in_history_order_per_key_and_are_shared():
    """Bug class: an operation grouped under the wrong execution (another key, or lost when it has none), or a
    cached split of one key answered for another."""
    ops = tuple(Operation(i, a, "op", "ok", value=v) for i, (a, v) in enumerate(
        [("a", {"group": 1, "run": "x"}), ("b", {"group": 2, "run": "x"}), ("c", {"group": 1}), ("d", {})]))
    h = History("fam", ops)
    g = h.groups()
    assert {k: [o.index for o in v] for k, v in g.items()} == {1: [0, 2], 2: [1], None: [3]}
    assert list(g) == [1, 2, None]
    assert h.groups("group") is g  # split once, shared by every checker that asks
    runs = h.groups("run")
    assert {k: [o.index for o in v] for k, v in runs.items()} == {"x": [0, 1], None: [2, 3]}
    assert h.groups() is g and h.groups("run") is runs
    assert History("fam", ()).groups() == {}


@pytest.mark.planted("vocabulary:Operation.describe",
                     'return f"#{self.index} {self.actor} {self.name}[{self.status}]({shown})"',
                     'return f"#{self.index} {self.actor} {self.name}({shown})"')
def test_describe_and_prose_name_each_witness_step():
    """Bug class: a witness that names the wrong operation (another index), or drops the summary, the explanation
    or an operation's status and values."""
    op = Operation(3, "worker-1", "commit", "ok", 1.0, 2.0, {"a": 1, "b": "x"})
    assert op.describe() == "#3 worker-1 commit[ok](a=1, b='x')"
    assert Operation(0, "w", "read", "fail").describe() == "#0 w read[fail]()"
    h = History("fam", (Operation(9, "w", "read"), op))
    r = CheckResult("chk", Verdict.INVALID, (Witness((3, 7), "why"), Witness((9,), "again")), "sum")
    assert r.prose(h) == ("chk: invalid - sum\n  witness: why\n    #3 worker-1 commit[ok](a=1, b='x')\n"
                          "  witness: again\n    #9 w read[ok]()")
    assert r.prose() == "chk: invalid - sum\n  witness: why\n  witness: again"
    assert CheckResult("c", Verdict.UNKNOWN).prose(h) == "c: unknown"


@pytest.mark.planted("vocabulary:history_to_jsonl",
                     '"start": op.start, "end": op.end, "value": op.value}, sort_keys=True, default=str))',
                     '"start": op.start, "end": op.end, "value": op.value}, sort_keys=True, default=lambda o: None))')
def test_operation_values_json_cannot_write_are_written_as_text_and_composites_pass_the_history():
    """Bug class: a round trip that loses what a history holds (an operation value JSON cannot write refused
    instead of written as text); a composite that judges something other than the history it was given."""
    h = History("fam", (Operation(0, "w", "read", value={"p": Path("/x")}),))
    assert history_from_jsonl(history_to_jsonl(h)).operations[0].value == {"p": "/x"}
    from vocabulary import Composite

    class Seen:
        name, family = "seen", "fam"

        def check(self, history):
            return CheckResult(self.name, Verdict.VALID if history is h else Verdict.INVALID)

    assert Composite([Seen()]).check_all(h)[0] is Verdict.VALID
