"""pytest configuration of the microbenchmarks: collect ``bench_*.py`` of every family's folder.

``pytest tests`` never sees this folder (``testpaths = ["tests"]``); run the
benchmarks with ``pytest benchmarks/<family>`` (or one file).  A family's own
options live in its folder's conftest (``benchmarks/revalidation/conftest.py``).
"""
from __future__ import annotations

import os
import sys

import pytest


# The folder driftlab was started from (set by the scaling experiment): at the *end* of sys.path, so that a
# user's own mechanism resolves from there while nothing in it can shadow an installed package.
for _path in os.environ.get("DRIFTLAB_PLUGIN_PATH", "").split(os.pathsep):
    if _path and _path not in sys.path:
        sys.path.append(_path)


def pytest_collect_file(file_path, parent):
    # A file named on the command line is collected by pytest itself; a folder's bench_*.py files by this hook.
    if file_path.suffix == ".py" and file_path.name.startswith("bench_") and not parent.session.isinitpath(file_path):
        return pytest.Module.from_parent(parent, path=file_path)
    return None
