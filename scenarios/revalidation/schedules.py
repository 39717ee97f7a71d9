"""Schedules as data: where a change lands in the workflow's lifecycle (ATR paper §4).

The seven balanced schedules live in ``schedules.toml``; the runner interprets
``lands`` as a lifecycle point and ``prelude`` as an extra first change.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from scenarios.revalidation.workload import ScenarioError

PATH = Path(__file__).with_name("schedules.toml")
LIFECYCLE = ("after_decision", "tool_wait", "approval", "after_approval", "validation_commit_gap", "parked")
PRELUDES = ("dominated",)


@dataclass(frozen=True)
class Schedule:
    id: str
    lands: str
    description: str
    prelude: str | None = None


def load_schedules(path: Path = PATH) -> tuple[Schedule, ...]:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ScenarioError(f"{path}: toml: {exc}") from None
    out = []
    for i, s in enumerate(raw.get("schedules", [])):
        where = f"{path}: schedules[{i}]"
        if s.get("lands") not in LIFECYCLE:
            raise ScenarioError(f"{where}.lands: {s.get('lands')!r} is not one of {', '.join(LIFECYCLE)}")
        if s.get("prelude") not in (None, *PRELUDES):
            raise ScenarioError(f"{where}.prelude: {s['prelude']!r} is not one of {', '.join(PRELUDES)}")
        if not isinstance(s.get("id"), str):
            raise ScenarioError(f"{where}.id: missing")
        out.append(Schedule(s["id"], s["lands"], s.get("description", ""), s.get("prelude")))
    if not out:
        raise ScenarioError(f"{path}: schedules: none declared")
    return tuple(out)
