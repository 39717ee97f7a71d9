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
    pytest.param("The quick profile took 3 min 19 s on the 2-core machine.", True, marks=pytest.mark.planted(
        "test_docs:undated", "if NUMBER.search(p) and MEASURING.search(p) and not DATE.search(p)]", "if False]")),
    ("The quick profile took 3 min 19 s on the 2-core machine (measured 2026-12-01).", False),
    pytest.param("Paper: ATR 8.8 → 9.3 µs, FullScan 12.1 → 2,595.9 µs.", False, marks=pytest.mark.planted(
        "test_docs:undated", "and MEASURING.search(p) and", "and")),  # any number with a unit flagged
    ("A resume call is cut after 60 s.", False),
    ("<!-- headline: x -->\nmeasured 3 s\n<!-- /headline -->", False),
], ids=["undated", "dated", "paper-value", "a-limit", "generated"])
def test_the_rule_itself(text, flagged):
    """Bug class: a rule that flags nothing (every page would pass) or flags the papers' published values."""
    assert bool(undated(text)) is flagged


def test_no_measurement_in_the_docs_is_undated():
    """Bug class: a hand-written timing or count that silently goes stale (a test count, a profile's time)."""
    def all_dated(texts: dict[str, str]) -> None:
        found = [f"{name}: {first[:80]}" for name, text in texts.items() for first in undated(text)]
        assert not found, "date these measurements (YYYY-MM-DD) or generate them:\n" + "\n".join(found)

    texts = {str(p.relative_to(REPO)): p.read_text() for p in pages()}
    all_dated(texts)
    with pytest.raises(AssertionError):  # planted: a hand-written, undated timing added to the README
        all_dated({**texts, "README.md": texts["README.md"] + "\n\nThe whole suite takes 95 s on this machine.\n"})


def test_the_readme_is_a_page_that_starts_with_the_two_commands():
    """Bug classes: the README growing back into a manual; its set-up commands drifting from what CI runs."""
    def a_page_with_the_commands(readme: list[str], ci: str) -> None:
        assert len(readme) <= 150
        opening = "\n".join(readme[:6])
        assert all(cmd in opening for cmd in SETUP)
        assert "./dev pytest" in ci

    readme, ci = (REPO / "README.md").read_text().splitlines(), (REPO / ".ci" / "run").read_text()
    a_page_with_the_commands(readme, ci)
    with pytest.raises(AssertionError):  # planted: the README grown into a manual
        a_page_with_the_commands(readme + ["A manual's paragraph."] * 150, ci)
    with pytest.raises(AssertionError):  # planted: the README's test command drifted from ./dev pytest
        a_page_with_the_commands([line.replace("./dev pytest", "pytest -x") for line in readme], ci)
    with pytest.raises(AssertionError):  # planted: CI runs the tests another way than the README says
        a_page_with_the_commands(readme, ci.replace("./dev pytest", "python -m pytest"))


def test_every_page_is_in_the_navigation():
    """Bug class: a page written but unreachable from the site's navigation (generated pages included)."""
    def every_page_in(nav: str, pages: list[str]) -> None:
        for p in pages:
            assert p in nav, p
        for generated in ("reference/cli.md", "guard.md", "histories.md"):
            assert generated in nav

    nav = (REPO / "mkdocs.yml").read_text()
    written = [str(p.relative_to(REPO / "docs")) for p in sorted((REPO / "docs").rglob("*.md"))]
    every_page_in(nav, written)
    with pytest.raises(AssertionError):  # planted: a page written and never added to the navigation
        every_page_in(nav, [*written, "a-new-page.md"])
    with pytest.raises(AssertionError):  # planted: a generated page dropped from the navigation
        every_page_in(nav.replace("histories.md", "histories-old.md"), [p for p in written if p != "histories.md"])
