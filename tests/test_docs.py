"""The README stays a page, its two set-up commands stay true, and no measurement in the docs is undated.

A measured number (a time, a size, a rate said to be *measured*, *taken* or *on this machine*) in the README or
the documentation site is either generated (the headline block, the history tables, the CLI reference) or
carries the date it was measured: a reader must be able to tell today's numbers from last month's.  The site
itself is built with ``mkdocs build --strict`` in ``.ci/run`` (a broken link or a missing page fails CI).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SETUP = ("./dev driftlab reproduce --profile quick", "./dev pytest")
#: a number with a unit of time, size or ratio, or a count of tests
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(\.\d+)?\s?(s|ms|µs|us|min|MB|GB|KB|%|×|x)(?!\w)|\b\d[\d,]* tests\b")
#: words that make a number a measurement of this lab's runs (not a paper's value, a parameter or a limit)
MEASURING = re.compile(r"\b(measured|took|takes|on this (2-core )?machine|on the 2-core|quiet|loaded)\b", re.I)
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
GENERATED = re.compile(r"<!-- (history|headline):.*?<!-- /(history:\w+|headline) -->", re.S)


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def undated(text: str) -> list[str]:
    """The paragraphs of ``text`` that state a measurement without a date (generated blocks and code left out)."""
    text = GENERATED.sub("", text)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return [p.strip().splitlines()[0] for p in re.split(r"\n\s*\n", text)
            if NUMBER.search(p) and MEASURING.search(p) and not DATE.search(p)]


@pytest.mark.parametrize("text, flagged", [
    ("The quick profile took 3 min 19 s on the 2-core machine.", True),
    ("The quick profile took 3 min 19 s on the 2-core machine (measured 2026-12-01).", False),
    ("Paper: ATR 8.8 → 9.3 µs, FullScan 12.1 → 2,595.9 µs.", False),
    ("A resume call is cut after 60 s.", False),
    ("<!-- headline: x -->\nmeasured 3 s\n<!-- /headline -->", False),
], ids=["undated", "dated", "paper-value", "a-limit", "generated"])
def test_the_rule_itself(text, flagged):
    """Bug class: a rule that flags nothing (every page would pass) or flags the papers' published values."""
    assert bool(undated(text)) is flagged


def test_no_measurement_in_the_docs_is_undated():
    """Bug class: a hand-written timing or count that silently goes stale (a test count, a profile's time)."""
    found = [f"{p.relative_to(REPO)}: {first[:80]}" for p in pages() for first in undated(p.read_text())]
    assert not found, "date these measurements (YYYY-MM-DD) or generate them:\n" + "\n".join(found)


def test_the_readme_is_a_page_that_starts_with_the_two_commands():
    """Bug classes: the README growing back into a manual; its set-up commands drifting from what CI runs."""
    readme = (REPO / "README.md").read_text().splitlines()
    assert len(readme) <= 150
    opening = "\n".join(readme[:6])
    assert all(cmd in opening for cmd in SETUP)
    assert "./dev pytest" in (REPO / ".ci" / "run").read_text()


def test_every_page_is_in_the_navigation():
    """Bug class: a page written but unreachable from the site's navigation (generated pages included)."""
    nav = (REPO / "mkdocs.yml").read_text()
    for p in sorted((REPO / "docs").rglob("*.md")):
        assert str(p.relative_to(REPO / "docs")) in nav, p
    for generated in ("reference/cli.md", "guard.md", "histories.md"):
        assert generated in nav
