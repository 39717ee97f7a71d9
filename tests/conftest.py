"""Shared fixtures: a real PostgreSQL connection, or a skip that says why.

Tests marked ``postgres`` talk to the server at ``DRIFTLAB_POSTGRES_DSN``
(default ``host=127.0.0.1 port=5432 dbname=test user=postgres``).  Where none
is reachable they are skipped with the reason, so the README's test command
passes on a fresh machine; with ``DRIFTLAB_REQUIRE_POSTGRES=1`` (set by
``.ci/run``) the skip becomes a failure.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys

import pytest

from planting import FRAMEWORKS, check_adapter_plant, planted

from runners.backends import postgres_dsn

PLANT_SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plant_site")


@contextlib.contextmanager
def _in_children(target: str, old: str, new: str):
    """The plant also in every Python the test starts with this process's environment (tests/plant_site), in every
    framework env server started meanwhile (runners/resume/envs.py passes it on; those servers, keyed on the plant,
    are stopped afterwards so none outlives the planted run), and in a resume fork server of its own (the warm one
    is put aside meanwhile and back afterwards); the scenarios this process parsed are forgotten before and after."""
    saved = {k: os.environ.get(k) for k in ("DRIFTLAB_PLANT", "DRIFTLAB_PLANT_SITE", "PYTHONPATH")}
    os.environ["DRIFTLAB_PLANT"] = plant = json.dumps([target, old, new])
    os.environ["DRIFTLAB_PLANT_SITE"] = PLANT_SITE
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (PLANT_SITE, saved["PYTHONPATH"]) if p)
    sys.path.append(PLANT_SITE)  # runners.processes.child_env builds a child's PYTHONPATH from sys.path
    # the resume family's warm fork server (one per process, started before the plant): the planted run starts its own
    zygote = sys.modules.get("runners.resume.zygote")
    warm = zygote._ZYGOTE if zygote else None
    if zygote:
        zygote._ZYGOTE = None
    import scenarios  # scenarios parsed once per process: parsed again under the plant, and never kept from it

    scenarios._PARSED.clear()
    try:
        yield
    finally:
        scenarios._PARSED.clear()
        sys.path.remove(PLANT_SITE)
        zygote = sys.modules.get("runners.resume.zygote")
        if zygote is not None:
            if zygote._ZYGOTE is not None and zygote._ZYGOTE is not warm:
                zygote._ZYGOTE.close()
            zygote._ZYGOTE = warm
        servers = getattr(sys.modules.get("runners.resume.envs"), "_SERVERS", {})  # warm servers by key
        for key in [k for k in servers if k.endswith("/" + plant)]:
            servers.pop(key).close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """A DSN of a reachable PostgreSQL; skip (or fail, if required) otherwise."""
    try:
        import psycopg

        with psycopg.connect(postgres_dsn()) as conn:
            conn.execute("select 1")
    except Exception as exc:  # noqa: BLE001 - any failure to connect means "not reachable"
        reason = f"PostgreSQL not reachable at {postgres_dsn()!r}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        if os.environ.get("DRIFTLAB_REQUIRE_POSTGRES") == "1":
            pytest.fail(reason + " (DRIFTLAB_REQUIRE_POSTGRES=1)")
        pytest.skip(reason)
    return postgres_dsn()


@pytest.hookimpl(trylast=True)  # after pytest-xdist's own hook, which names each item's group in item._nodeid
def pytest_collection_modifyitems(config, items):
    """``--dist loadgroup`` sends a module marked ``xdist_group`` to one worker by the ``@group`` suffix of its tests'
    node ids.  pytest-xdist 3.8 writes the suffix to ``item._nodeid``, which pytest 9 no longer reads (a node's id is
    ``item._id``): without this, every grouped module's tests are spread over the workers one by one and each worker
    that gets one sets the module's fixtures up again (test_nemesis_dbos's cells twice, 58 s each).

    With ``--plants``, only the tests that carry a planted bug run: checking the claims is a job of its own
    (``.ci/run`` runs it after the suite), so the suite a change is tested with runs each test once."""
    from _pytest.nodeid import NodeId

    if config.getoption("plants"):
        config.hook.pytest_deselected(items=[item for item in items if not item.get_closest_marker("planted")])
        items[:] = [item for item in items if item.get_closest_marker("planted")]

    for item in items:
        wanted = vars(item).get("_nodeid")
        if wanted and item.nodeid != wanted:
            item._id = NodeId.parse(wanted)


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject's addopts): two test processes per core the suite may use, not one.  The suite mostly
    waits, on framework servers and their timeouts (Prefect's heartbeat thread, Temporal's activity retry) and on
    recoveries after a SIGKILL.  On a 2-core machine of the CI kind (2026-12-05, busy cores from /proc/stat): one
    process per core, 295, 284 and 293 s with 1.45-1.48 cores busy; two per core, 237 and 244 s with 1.85-1.90 busy.
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` (xdist's own setting) still wins; ``-n N`` never asks."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own hook reads it
    return 2 * (os.cpu_count() or 1)  # cores as the lab counts them (`--jobs`' default)


def pytest_addoption(parser):
    parser.addoption("--plants", action="store_true",
                     help="run only the tests that carry @pytest.mark.planted, each then rerun without its plant (the "
                          "control) and once per plant, which must make it fail (tests/planting.py; .ci/run)")


def pytest_configure(config):
    config.addinivalue_line("markers", "planted(target, old, new): the bug this test catches, planted and checked "
                                       "after it passes by `pytest --plants` (tests/planting.py)")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        atexit.register(_worker_exit)  # runs after every exit handler a test registered (atexit is last in, first out)


def _worker_exit() -> None:
    """A test process ends without tearing its interpreter down.  Its results are reported, its fixtures torn down
    and the exit handlers the tests registered have run (this one was registered before them); what is left is
    freeing every module and object one by one, which the main process waited for: 2 s for a module of pure
    tests, 10-12 s at the end of the whole suite (2026-12-05).  Skipped here: the handlers registered before this one,
    logging's flush (done here) and the worker-side cleanups of execnet and certifi, which hold nothing in a worker."""
    import logging

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _rerun(item, n: int) -> None:
    """Run the test again, with a fresh ``tmp_path`` (a folder of its own inside the first) if it takes one."""
    if "tmp_path" in item.funcargs:
        if n == 0:
            item.first_tmp_path = item.funcargs["tmp_path"]
        fresh = item.first_tmp_path / f"rerun-{n}"
        fresh.mkdir()
        item.funcargs["tmp_path"] = fresh
    item.runtest()


@pytest.hookimpl(wrapper=True, trylast=True)  # inside the capture plugin's wrapper: capsys still captures
def pytest_runtest_call(item):
    """With ``--plants``: after a test passes, each of its planted variants must make it fail (tests/planting.py)."""
    result = yield
    marks = list(item.iter_markers("planted")) if item.config.getoption("plants") else []
    if marks:  # the control: a second run without any plant must pass, or a plant's failure would prove nothing
        try:
            _rerun(item, 0)
        except (Exception, pytest.fail.Exception) as exc:  # noqa: BLE001 - whatever made the second run fail
            pytest.fail(f"this test fails when run a second time without its plant ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0] if str(exc) else ''}): its planted variants prove nothing; make "
                        "it rerunnable (fresh folders, schemas and captured output per run)", pytrace=False)
    for n, mark in enumerate(marks, 1):
        target, old, new = mark.args
        if target.startswith(FRAMEWORKS):  # an adapter: planted in the env servers the rerun starts (plant_site)
            check_adapter_plant(target, old)
        here = contextlib.nullcontext() if target.startswith(FRAMEWORKS) else planted(target, old, new)
        with here, _in_children(target, old, new):
            try:
                _rerun(item, n)
            except (Exception, pytest.fail.Exception):  # noqa: BLE001 - any failure of the test: the bug caught
                continue
        pytest.fail(f"the planted variant of {target} ({old!r} -> {new!r}) passes this test: its docstring's "
                    "claim is not checked", pytrace=False)
    return result
