"""Framework adapters of the resume family: each runs inside its own locked environment (issue 14).

Nothing in this package imports the lab or a framework at import time: the
lab reads the declarations (:func:`declared`, from ``data/envs/*/pyproject.toml``
``[tool.driftlab]``) and the env's fork server imports :mod:`.protocol` and one
adapter module.  The contract every adapter implements is the docstring of
:mod:`.protocol`.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

#: data/envs/ of this checkout: one folder per framework release (pyproject.toml + uv.lock)
ENVS = Path(__file__).resolve().parents[3] / "data" / "envs"


#: PostgreSQL connections one racer holds unless its env declares otherwise: its store's and the ledger's (a k = 16
#: race of the lab's runtimes, LangGraph or LlamaIndex peaks at 35-36 connections, driver included)
CONNECTIONS_PER_RACER = 2


@dataclass(frozen=True)
class Declared:
    """One runtime row served by a framework environment (``[tool.driftlab.runtimes."<name>"]``)."""

    name: str  # the runtime name, e.g. "langgraph@1.2.9"
    env: str  # the folder under data/envs/
    adapter: str  # "<module of this package>:<Class>"
    framework: str  # e.g. "langgraph"
    release: str  # e.g. "1.2.9"
    variant: str = ""  # e.g. "wait-for-event" (two rows of one framework that behave differently)
    backends: tuple[str, ...] = ("sqlite",)
    #: named point or operation -> the one-line reason the framework cannot express it (reported as n/a)
    not_applicable: dict[str, str] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    options: dict = field(default_factory=dict)  # passed to the adapter as ``self.options``
    #: PostgreSQL connections one racer holds (a framework's pools): how many races may share the server
    connections_per_racer: int = CONNECTIONS_PER_RACER
    #: why the runtime's fault cells mostly wait (e.g. out a server's timeout after each SIGKILL): they then run
    #: in workers of their own beside the computing cells ("" = they compute)
    fault_cells_wait: str = ""


@cache
def declared(root: Path = ENVS) -> dict[str, Declared]:
    """Every runtime declared by an environment folder, by name (aliases included)."""
    out: dict[str, Declared] = {}
    for pyproject in sorted(root.glob("*/pyproject.toml")):
        try:
            raw = tomllib.loads(pyproject.read_text()).get("tool", {}).get("driftlab", {})
        except tomllib.TOMLDecodeError:
            continue  # the builder reports it, naming the file, when the env is used
        for name, spec in raw.get("runtimes", {}).items():
            d = Declared(name, pyproject.parent.name, spec["adapter"], spec.get("framework", name.split("@")[0]),
                         spec.get("release", name.partition("@")[2]), spec.get("variant", ""),
                         tuple(spec.get("backends", ("sqlite",))),
                         dict(spec.get("not_applicable", {})), tuple(spec.get("aliases", ())),
                         dict(spec.get("options", {})), int(spec.get("connections_per_racer", CONNECTIONS_PER_RACER)),
                         str(spec.get("fault_cells_wait", "")))
            for n in (name, *d.aliases):
                out[n] = d
    return out
