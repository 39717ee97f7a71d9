"""The report: the findings first, then each artifact's measured numbers beside the paper's, difference stated.

An artifact's ``report`` function returns a :class:`Section`; this module
renders the sections into ``report.md``.  Comparison rows are built with
:func:`row`, which states the difference the same way everywhere: in
percentage points for shares, as a ratio for quantities, as a plain
difference for counts where the run has the paper's size.

The report opens with **Findings** (:func:`render_findings`), built only from
this run's sections: the artifacts' own :class:`Finding` lines grouped by
topic (frameworks, the guards' cost, ...) and a tally of the papers' published
numbers that this run reproduced within the tolerance :func:`reproduced`
states.  Each section then opens with the question it answers.
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


@dataclass(frozen=True)
class Finding:
    """One line of the report's opening Findings, under ``topic`` (e.g. "frameworks"), about ``subject``."""

    topic: str
    subject: str
    text: str


@dataclass
class Section:
    artifact: str
    title: str
    rows: list[dict] = field(default_factory=list)  # metric, ours, paper, difference
    notes: str = ""
    files: list[str] = field(default_factory=list)
    matrices: list[Matrix] = field(default_factory=list)  # Hermitage-style sections
    question: str = ""  # the question the section answers (analysis/questions.py), its first line
    findings: list[Finding] = field(default_factory=list)  # lines for the report's opening Findings


def _fmt(value: float, kind: str) -> str:
    if kind == "share":
        return f"{100 * value:.2f}%"
    if kind == "count":
        return f"{value:,.0f}"
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.1f}"


def row(metric: str, ours: float, paper: float | None, kind: str = "value", ours_of: int | None = None,
        paper_of: int | None = None, unit: str = "") -> dict:
    """One comparison row.  ``kind``: share (0..1), count (with optional denominators), value, or size (a count
    that states how big the run was, such as executions or cells: never a finding to reproduce)."""
    shown = Row(_row(metric, ours, paper, "count" if kind == "size" else kind, ours_of, paper_of, unit))
    shown.measured = (kind, ours, paper, ours_of, paper_of)
    return shown


class Row(dict):
    """A comparison row (metric, ours, paper, difference) that remembers the numbers it shows (``measured``:
    kind, ours, paper, ours_of, paper_of), so the Findings can tell whether it reproduced the paper."""

    measured: tuple = ()


#: The tolerance under which a published number counts as reproduced (stated in the report's Findings).
TOLERANCE = ("shares within 1 pp (or the paper's value inside our 95% CI where one is given), counts equal "
             "(as shares within 1 pp where the run's size differs), measured quantities within a factor of 2, "
             "matrix cells equal")


def reproduced(r: dict) -> bool | None:
    """Whether a comparison row reproduces its published number (:data:`TOLERANCE`); None where there is nothing
    to reproduce (no published value, a size, a row made without :func:`row`)."""
    if not getattr(r, "measured", ()):
        return None
    kind, ours, paper, ours_of, paper_of = r.measured
    if kind == "size" or paper is None or ours is None:
        return None
    diff = r.get("difference", "")
    if "inside our CI" in diff or "outside our CI" in diff:
        return "inside our CI" in diff
    if kind == "share":
        return abs(ours - paper) <= 0.01 + 1e-12
    if kind == "count":
        if ours_of and paper_of:
            return abs(ours / ours_of - paper / paper_of) <= 0.01 + 1e-12
        return ours == paper
    if paper == 0:
        return ours == 0
    return 0.5 <= ours / paper <= 2.0


def _row(metric: str, ours: float, paper: float | None, kind: str, ours_of: int | None, paper_of: int | None,
         unit: str) -> dict:
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


def paper_tally(sections: list[Section]) -> tuple[int, int, list[str]]:
    """(reproduced, compared, what differs) over every published number of the run's sections."""
    ok, total, differ = 0, 0, []
    for s in sections:
        for r in s.rows:
            verdict = reproduced(r)
            if verdict is None:
                continue
            total += 1
            ok += verdict
            if not verdict:
                differ.append(f"{r['metric']} ({s.artifact}: ours {r['ours']}, paper {r['paper']})")
        for m in s.matrices:
            total += len(m.paper)
            ok += len(m.paper) - len(m.differences())
            differ += [f"{m.title}, {r} x {c} ({s.artifact}: ours {o}, paper {p})" for r, c, o, p in m.differences()]
    return ok, total, differ


#: the order of the Findings' topics; a topic no artifact uses is left out, an unknown one comes last
TOPICS = ("frameworks", "guards", "guards' cost", "nemesis", "power loss")


def render_findings(sections: list[Section]) -> str:
    """The report's opening section: every artifact's findings by topic, then the papers' tally."""
    found: dict[str, list[Finding]] = {}
    for s in sections:
        for f in s.findings:
            found.setdefault(f.topic, []).append(f)
    out = ["## Findings", ""]
    for topic in sorted(found, key=lambda t: (TOPICS.index(t) if t in TOPICS else len(TOPICS), t)):
        out += [f"### {topic[0].upper()}{topic[1:]}", ""]
        for f in found[topic]:
            if f.text.startswith("|"):  # a small table, set apart by blank lines
                out += ["", f.text, ""]
            else:
                out.append(f"- **{f.subject}** {f.text}" if f.subject else f"- {f.text}")
        out.append("")
    ok, total, differ = paper_tally(sections)
    if total:
        out += ["### The papers", "",
                f"- **{ok} of {total}** published numbers of the papers reproduced by this run ({TOLERANCE}); "
                + (f"these {len(differ)} differ:" if differ else "none differs.")]
        out += [f"  - {d}" for d in differ[:12]]
        if len(differ) > 12:
            out.append(f"  - ... and {len(differ) - 12} more (each section below states its own)")
        out.append("")
    return "\n".join(out)


FINDINGS_END = "<!-- end of findings -->"


def render(sections: list[Section], header: str) -> str:
    """The whole report: the header, the Findings, then every section."""
    return "\n".join([header.rstrip(), "", render_findings(sections), FINDINGS_END, "", render_sections(sections)])


def render_sections(sections: list[Section]) -> str:
    out = []
    for s in sections:
        out += [f"## {s.title} (`{s.artifact}`)", ""]
        if s.question:
            out += [f"*{s.question}*", ""]
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
