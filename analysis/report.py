"""The report: each artifact's measured numbers beside the paper's, difference stated.

An artifact's ``report`` function returns a :class:`Section`; this module
renders the sections into ``report.md``.  Comparison rows are built with
:func:`row`, which states the difference the same way everywhere: in
percentage points for shares, as a ratio for quantities, as a plain
difference for counts where the run has the paper's size.
"""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Matrix:
    """A Hermitage-style matrix: rows x columns, a short verdict in each cell.

    ``cells[(row, column)]`` is what this run measured (e.g. "prevented",
    "occurs", "holds", "violated"); ``paper`` holds the published cell where
    there is one, and the rendering marks every cell that differs from it.
    """

    title: str
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], str]
    paper: dict[tuple[str, str], str] = field(default_factory=dict)

    def differences(self) -> list[tuple[str, str, str, str]]:
        """(row, column, ours, paper) for every cell whose published value differs from ours."""
        return [(r, c, self.cells.get((r, c), "-"), self.paper[(r, c)])
                for r in self.rows for c in self.columns
                if (r, c) in self.paper and self.paper[(r, c)] != self.cells.get((r, c), "-")]

    def render(self) -> str:
        lines = [f"**{self.title}**", "", "| | " + " | ".join(self.columns) + " |", "|---|" + "---|" * len(self.columns)]
        for r in self.rows:
            shown = []
            for c in self.columns:
                ours = self.cells.get((r, c), "-")
                paper = self.paper.get((r, c))
                shown.append(ours if paper is None or paper == ours else f"{ours} (paper: {paper})")
            lines.append(f"| {r} | " + " | ".join(shown) + " |")
        diffs = self.differences()
        if self.paper:
            lines += ["", "Cells that differ from the paper: " + ("none" if not diffs else
                      "; ".join(f"{r} x {c}: ours {o}, paper {p}" for r, c, o, p in diffs)) + "."]
        return "\n".join(lines) + "\n"


@dataclass
class Section:
    artifact: str
    title: str
    rows: list[dict] = field(default_factory=list)  # metric, ours, paper, difference
    notes: str = ""
    files: list[str] = field(default_factory=list)
    matrices: list[Matrix] = field(default_factory=list)  # Hermitage-style sections


def _fmt(value: float, kind: str) -> str:
    if kind == "share":
        return f"{100 * value:.2f}%"
    if kind == "count":
        return f"{value:,.0f}"
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.1f}"


def row(metric: str, ours: float, paper: float | None, kind: str = "value", ours_of: int | None = None,
        paper_of: int | None = None, unit: str = "") -> dict:
    """One comparison row.  ``kind``: share (0..1), count (with optional denominators), value."""
    u = f" {unit}" if unit else ""
    if kind == "count" and ours_of:
        ours_txt = f"{ours:,.0f} of {ours_of:,} ({100 * ours / ours_of:.2f}%)"
    else:
        ours_txt = _fmt(ours, kind) + u
    if paper is None:
        return {"metric": metric, "ours": ours_txt, "paper": "not published", "difference": "n/a"}
    if kind == "count" and paper_of:
        paper_txt = f"{paper:,.0f} of {paper_of:,} ({100 * paper / paper_of:.2f}%)"
        if ours_of:
            diff = f"{100 * (ours / ours_of - paper / paper_of):+.2f} pp" + ("" if ours_of == paper_of else " (as shares; run size differs)")
        else:
            diff = f"{ours - paper:+,.0f}"
    else:
        paper_txt = _fmt(paper, kind) + u
        if kind == "share":
            diff = f"{100 * (ours - paper):+.2f} pp"
        elif kind == "count":
            diff = f"{ours - paper:+,.0f}"
        else:
            diff = f"{ours - paper:+,.3g}{u} ({ours / paper:.2f}x)" if paper else f"{ours - paper:+,.3g}{u}"
    return {"metric": metric, "ours": ours_txt, "paper": paper_txt, "difference": diff}


def markdown_table(frame) -> str:
    """A pandas frame as a Markdown table (floats to 4 significant digits)."""
    def cell(v) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in frame.itertuples(index=False)]
    return "\n".join(lines) + "\n"


#: A paragraph of a note longer than this is split into paragraphs of whole sentences.
PARAGRAPH_CHARS = 500
#: Lines of report.md prose are wrapped at this width.
LINE_CHARS = 100
_SENTENCE_END = re.compile(r"(?<=[.;:])\s+(?=[A-Z(`'\"*])")


def paragraphs(notes: str) -> str:
    """A note as short paragraphs of whole sentences, each wrapped at :data:`LINE_CHARS` (list items and
    tables kept as written)."""
    out = []
    for block in re.split(r"\n\s*\n", notes.strip()):
        if block.lstrip().startswith(("-", "*", "|", "1.")):
            out.append(block.strip())
            continue
        text, chunk = " ".join(block.split()), ""
        for sentence in _SENTENCE_END.split(text):
            if chunk and len(chunk) + len(sentence) > PARAGRAPH_CHARS:
                out.append(textwrap.fill(chunk, LINE_CHARS, break_long_words=False, break_on_hyphens=False))
                chunk = ""
            chunk = f"{chunk} {sentence}".strip()
        if chunk:
            out.append(textwrap.fill(chunk, LINE_CHARS, break_long_words=False, break_on_hyphens=False))
    return "\n\n".join(out)


def render(sections: list[Section], header: str) -> str:
    out = [header.rstrip(), ""]
    for s in sections:
        out += [f"## {s.title} (`{s.artifact}`)", ""]
        if s.rows:
            out += ["| metric | ours | paper | difference |", "|---|---|---|---|"]
            out += [f"| {r['metric']} | {r['ours']} | {r['paper']} | {r['difference']} |" for r in s.rows]
            out.append("")
        for m in s.matrices:
            out += [m.render()]
        if s.notes:
            out += [paragraphs(s.notes), ""]
        if s.files:
            out += ["Files: " + ", ".join(f"[`{f}`]({f})" for f in s.files), ""]
    return "\n".join(out)


def write_report(path: Path, sections: list[Section], header: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(render(sections, header), encoding="utf-8")
    tmp.replace(path)
