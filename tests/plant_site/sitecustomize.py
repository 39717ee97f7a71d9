"""Planted variants in the lab's child processes (tests/planting.py): a ``driftlab`` CLI started by a test whose
planted variant is being checked runs with the same plant.

The hook in ``tests/conftest.py`` puts this folder on ``PYTHONPATH`` and the plant in ``DRIFTLAB_PLANT`` (JSON:
``[target, old, new]``) while it runs a test the second time; Python imports ``sitecustomize`` at start-up, so
every interpreter the test starts with that environment swaps the function's code before it runs anything.
Without ``DRIFTLAB_PLANT`` this module does nothing.
"""
import json
import os
import sys

_PLANT = os.environ.get("DRIFTLAB_PLANT")
if _PLANT:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/, for planting
    try:
        from planting import planted

        _KEPT = planted(*json.loads(_PLANT))  # held for the life of this process (its exit would restore the code)
        _KEPT.__enter__()
    except ImportError:  # a Python without the lab (a tool's own interpreter): nothing of the lab to plant in
        pass
    finally:
        sys.path.pop(0)
