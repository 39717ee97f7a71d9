"""The experiment registry (runners/experiments.py): each name imports the class that runs it, in its family."""
from __future__ import annotations

import subprocess
import sys

import pytest

from runners.experiments import EXPERIMENTS, FAMILIES, SWEEPING, WHERE, family_of


@pytest.mark.planted("runners.experiments:family_of", 'name.partition("_")[0]', 'name.rpartition("_")[0]')
def test_each_name_builds_its_experiment_in_its_family():
    """Bug class: a registry line naming another experiment's class, a family read from the wrong part of the name
    (isolation_contract_omission is isolation's), a sweep the parser would not offer or offer twice."""
    for name in WHERE:
        e = EXPERIMENTS[name]
        assert e.name == name and e.family == family_of(name) and e.family in FAMILIES, (name, e.family)
    assert set(SWEEPING) == {n for n in WHERE if EXPERIMENTS[n].sweeps} and len(SWEEPING) == len(set(SWEEPING))
    assert {f: EXPERIMENTS.of_family(f) for f in FAMILIES} == {
        f: [n for n in WHERE if EXPERIMENTS[n].family == f] for f in FAMILIES}


def test_an_argument_error_imports_no_experiment_driving_a_framework():
    """The parser imports the sweeping experiments only: an argument error, or --only of one family, never loads
    LangGraph or the resume family's modules (they cost every command ~1.7 s)."""
    probe = ("import sys; from runners import cli; cli.parser(); from runners.engine import select; "
             "select('revalidation'); "
             "print(sorted(m for m in sys.modules if m.startswith(('langgraph', 'runners.resume', 'runners.agent'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
