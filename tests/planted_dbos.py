"""A planted DBOS adapter, run in the real dbos-3.4 environment (issue 24 §2; loaded like ``planted_adapters.py``).

``ErrorReadAsDone`` reads a workflow in ``ERROR`` (a step raised) as a success: an errored run would then count as
done, liveness and all.  ``tests/test_adapter_conformance.py::test_an_errored_workflow_is_failed_never_done`` must
fail on it.
"""
from __future__ import annotations

from . import dbos


class ErrorReadAsDone(dbos.DBOSAdapter):
    """Planted: ``ERROR`` among DBOS's successful terminal statuses."""

    def state(self, run_id):
        saved = dbos.TERMINAL_OK, dbos.TERMINAL_FAIL
        dbos.TERMINAL_OK, dbos.TERMINAL_FAIL = ("SUCCESS", "ERROR"), ("CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
        try:
            return super().state(run_id)
        finally:
            dbos.TERMINAL_OK, dbos.TERMINAL_FAIL = saved
