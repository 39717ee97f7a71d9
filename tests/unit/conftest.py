"""The fast unit layer (issue 16 §7): pure modules only, no process, no database, no run folder.

Every test under ``tests/unit/`` gets the ``unit`` marker, so ``pytest -m unit`` (or ``pytest tests/unit``)
runs the layer that mutmut runs against the pure modules (docs/contributing.md, "For contributors").  The whole layer runs
in well under a minute.
"""
from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.unit)
