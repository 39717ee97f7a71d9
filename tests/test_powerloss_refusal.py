"""Where FUSE is missing, resume_powerloss says what it needs in one line: refused when named, skipped otherwise.

Bug classes: a missing /dev/fuse that stops a whole quick profile (or, worse, reads as a clean power-loss table);
an explicit ``--only resume_powerloss`` that exits 0 with nothing measured.
"""
from __future__ import annotations

import pytest

from runners.experiment import DriftlabError, Options
from runners.resume import powerloss


@pytest.fixture
def no_fuse(monkeypatch):
    monkeypatch.setattr(powerloss.lazyfs, "requirements", lambda: "no /dev/fuse on this machine")


def test_named_it_is_refused_in_one_line(no_fuse):
    with pytest.raises(DriftlabError, match="needs a FUSE file system: no /dev/fuse"):
        powerloss.ResumePowerloss().check(Options(only="resume_powerloss"))


def test_in_a_larger_selection_it_is_skipped_with_a_note(no_fuse, capsys):
    exp = powerloss.ResumePowerloss()
    exp.check(Options(only="resume"))
    assert "resume_powerloss skipped: it needs a FUSE file system (no /dev/fuse" in capsys.readouterr().out
    assert exp.cells("quick", 1, Options()) == []
