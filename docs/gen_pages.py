"""Pages generated at every `mkdocs build` (mkdocs-gen-files): nothing here is typed by hand twice.

- ``reference/cli.md``: every command's ``--help``, from ``runners.cli.parser()``;
- ``histories.md``: the page as written, its per-family operation tables regenerated from
  ``vocabulary.<family>.HISTORY`` (the declarations ``driftlab check`` validates with);
- ``guard.md``: the guard's own README (``guard/README.md``, its PyPI long description).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["COLUMNS"] = "100"  # argparse wraps help at the terminal's width: fix it, so the page is the same anywhere

from analysis.checkers import schemas  # noqa: E402
from runners.cli import parser  # noqa: E402
from vocabulary.schema import with_tables  # noqa: E402


def commands(p: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, argparse.ArgumentParser]]:
    out = [(" ".join(("driftlab", *path)), p)]
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += commands(sub, (*path, name))
    return out


lines = ["# CLI reference", "", "Generated from the argument parser (`runners/cli.py`) at every build of this site.", ""]
for name, p in commands(parser()):
    p.prog = name
    lines += [f"## `{name}`", "", "```text", p.format_help().rstrip(), "```", ""]
with mkdocs_gen_files.open("reference/cli.md", "w") as fh:
    fh.write("\n".join(lines))

with mkdocs_gen_files.open("histories.md", "w") as fh:
    fh.write(with_tables((ROOT / "docs" / "histories.md").read_text(encoding="utf-8"), schemas()))

guard = (ROOT / "guard" / "README.md").read_text(encoding="utf-8")
with mkdocs_gen_files.open("guard.md", "w") as fh:
    fh.write(guard.replace("](guard/", "]("))
