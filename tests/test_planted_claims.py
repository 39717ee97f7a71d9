"""Every test that names the bug it catches keeps that bug planted beside it (issue 24 §9), or is listed as debt.

A test's docstring that says "Bug class: ..." (or names a planted bug) is a claim.  The claim is checked by
``pytest --plants`` (``.ci/run``) when the test carries a ``@pytest.mark.planted(...)`` marker (tests/planting.py:
the bug is planted after the test passes, and the test must then fail) or runs its own planted variant in its body (``planted_...`` functions
passed through the same check, under ``pytest.raises(AssertionError)``).  Tests written before this rule that do
neither are listed in ``tests/data/unplanted.txt``: the list may only shrink.  Bug classes caught: a new test whose
claim is never checked; a listed test that gained its plant but stays listed (the list then hides new debt).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEBT = HERE / "data" / "unplanted.txt"
CLAIM = re.compile(r"bug class|planted bug|planted:", re.I)
CHECKED = re.compile(r"planted|pytest\.raises\(AssertionError")


def _segment(lines: list[bytes], node: ast.AST) -> str:
    """``ast.get_source_segment`` from the file's lines split once (that function splits the whole file at every call:
    10 s of CPU over the suite's tests before)."""
    first, last = node.lineno - 1, node.end_lineno - 1
    if first == last:
        return lines[first][node.col_offset:node.end_col_offset].decode()
    return b"".join([lines[first][node.col_offset:], *lines[first + 1:last], lines[last][:node.end_col_offset]]).decode()


def claims() -> tuple[set[str], set[str]]:
    """(tests that claim a bug class, those among them whose claim is checked), as ``path::name``."""
    claimed, checked = set(), set()
    for path in sorted(HERE.rglob("test_*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.encode().splitlines(keepends=True)  # the AST's column offsets count UTF-8 bytes
        for node in ast.walk(ast.parse(source)):
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
                continue
            doc = ast.get_docstring(node) or ""
            if not CLAIM.search(doc):
                continue
            name = f"{path.relative_to(HERE).as_posix()}::{node.name}"
            claimed.add(name)
            body = "\n".join(_segment(lines, b) for b in node.body[1:])
            if any("planted" in _segment(lines, d) for d in node.decorator_list) or CHECKED.search(body):
                checked.add(name)
    return claimed, checked


def test_no_new_claim_goes_unchecked_and_the_debt_only_shrinks():
    claimed, checked = claims()
    debt = {ln.strip() for ln in DEBT.read_text(encoding="utf-8").splitlines() if ln.strip() and ln[0] != "#"}
    new = sorted(claimed - checked - debt)
    assert not new, f"{len(new)} test(s) name a bug class without planting it (tests/planting.py): {new[:5]}"
    paid = sorted(debt & checked)
    assert not paid, f"remove from {DEBT.name}, their claims are now checked: {paid[:5]}"
    gone = sorted(debt - claimed)
    assert not gone, f"remove from {DEBT.name}, no such claiming test: {gone[:5]}"
