"""The house: a room per family in every layer, kept so by import-linter's contracts (pyproject.toml).

Planted bugs these tests catch: a family module importing another family's
module (in any layer), a layer importing upward (analysis importing runners,
figures importing analysis), and a family-specific module left at a layer's
root where a newcomer would take it for the shared core.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("vocabulary", "scenarios", "mechanisms", "faults", "analysis", "figures", "runners", "benchmarks")
FAMILIES = ("revalidation", "isolation", "resume", "agent")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    lint = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(lint), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_contracts_hold():
    """Every contract of pyproject.toml holds on this tree; a broken one fails with import-linter's own message."""
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("importer, line, contract", [
    ("runners/resume/cells.py", "from analysis.isolation import checkers", "resume family imports no other family"),
    ("analysis/revalidation/counting.py", "import runners.engine", "layers"),
    ("figures/isolation/levels.py", "from analysis import stats", "figures never import analysis"),
])
def test_a_planted_import_breaks_its_contract(tmp_path, importer, line, contract):
    """The contracts can fail: a cross-family import, an upward import and a figure reading analysis, each
    planted in a scratch copy, break the contract that forbids it (import-linter names the import)."""
    for name in (*PACKAGES, "pyproject.toml"):
        src = REPO / name
        (shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
         if src.is_dir() else shutil.copy(src, tmp_path / name))
    with open(tmp_path / importer, "a", encoding="utf-8") as fh:
        fh.write(f"\n{line}  # planted\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert contract in result.stdout and "BROKEN" in result.stdout.upper()
    assert importer.removesuffix(".py").replace("/", ".") in result.stdout


def test_layer_roots_hold_only_the_shared_core():
    """No module directly under a layer is specific to one family: no file or module name carries a family
    prefix, and each family's room is a package (vocabulary's rooms are its one module per family)."""
    for layer in PACKAGES[1:]:
        for path in (REPO / layer).glob("*.py"):
            assert not path.stem.startswith(FAMILIES), f"{path.relative_to(REPO)}: move it into its family's room"
    for layer in PACKAGES[1:]:
        for family in FAMILIES:
            room = REPO / layer / family
            if room.exists():
                assert (room / "__init__.py").is_file(), f"{room.relative_to(REPO)}: a room is a package"
