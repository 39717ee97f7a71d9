"""The agent family's mechanism stacks: stock LangGraph and every subset of the guard's layers (issue 15).

``REGISTRY`` maps a stack name (``stock``, ``once``, ``premises``, ``pinning``,
``once+premises`` ... ``once+premises+pinning``) to the class that builds it.
"""
from __future__ import annotations

from vocabulary.agent import STACKS

REGISTRY: dict[str, str] = {name: "mechanisms.agent.stacks:Stack" for name in STACKS}
