"""The suite's own scheduling: a module marked ``xdist_group`` runs on one xdist worker.

Its module-scoped fixtures (test_nemesis_dbos's DBOS cells, about a minute) are then made once, and tests that
share one server-wide resource (``race_lock``) never run beside each other.  pytest-xdist 3.8 under pytest 9 loses
the group (tests/conftest.py's ``pytest_collection_modifyitems`` puts it back); this test fails if it is lost again.
"""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("suite_groups")  # grouped itself, so the check has a test to look at


def test_every_grouped_test_is_sent_out_by_its_group(request):
    if not request.config.getoption("loadgroup", False):  # set by xdist in its workers for --dist loadgroup
        pytest.skip("not run under xdist's --dist loadgroup")
    grouped = [(item, item.get_closest_marker("xdist_group")) for item in request.session.items]
    grouped = [(item, mark.args[0] if mark.args else mark.kwargs["name"]) for item, mark in grouped if mark]
    assert grouped, "this module is marked xdist_group"
    lost = [item.nodeid for item, group in grouped if not item.nodeid.endswith(f"@{group}")]
    assert not lost, f"{len(lost)} grouped tests would be spread over the workers, e.g. {lost[0]}"
