"""The migrated template database every Prefect server of the adapter starts on a copy of
(``mechanisms/resume/frameworks/prefect.py``: ``template_db``, ``server_database``; issue 28).

A fresh SQLite database costs each ``prefect server start`` about 5 s of Prefect's migrations; the adapter migrates
one template per env with Prefect's own ``prefect server database upgrade -y`` and copies it for each server.  These
tests run the adapter's functions in the env's own Python (the adapter imports Prefect, which lives there only),
with the adapter's plants applied as in an env server (``tests/plant_site``: the frameworks' ``protocol.py`` is on
that Python's command line).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from runners.resume.envs import ensure

FRAMEWORKS = Path(__file__).resolve().parents[1] / "mechanisms" / "resume" / "frameworks"
#: loads the adapters' folder as ``driftlab_frameworks`` (as protocol.load_package does) and the Prefect adapter
PRELUDE = f"""
import importlib.util, json, sys
from pathlib import Path
F = {str(FRAMEWORKS)!r}
if "driftlab_frameworks" not in sys.modules:
    spec = importlib.util.spec_from_file_location("driftlab_frameworks", F + "/__init__.py",
                                                  submodule_search_locations=[F])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules["driftlab_frameworks"] = pkg
    spec.loader.exec_module(pkg)
from driftlab_frameworks import prefect as P
"""
#: the head revision of Prefect's SQLite migrations in this env (what a migrated database is stamped with)
HEAD = """
import pathlib, prefect.server.database as d
from alembic.script import ScriptDirectory
from prefect.server.database.alembic_commands import alembic_config
cfg = alembic_config()
cfg.set_main_option("version_locations", str(pathlib.Path(d.__file__).parent / "_migrations" / "versions" / "sqlite"))
"""


def _env(script: str, cwd: Path, **popen):
    """``script`` in the Prefect env's Python (the frameworks' protocol.py on its command line: an adapter's plant
    applies there, as in an env server)."""
    python = str(ensure("prefect-3.9").python)
    return [python, "-c", PRELUDE + script, str(FRAMEWORKS / "protocol.py")], dict(cwd=cwd, **popen)


def _run(script: str, cwd: Path) -> dict:
    cmd, kw = _env(script, cwd)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _revisions(db: Path) -> list:
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(f"file:{db}?immutable=1", uri=True)) as c:
        if not c.execute("SELECT 1 FROM sqlite_master WHERE name = 'alembic_version'").fetchone():
            return []
        return [r[0] for r in c.execute("SELECT version_num FROM alembic_version")]


@pytest.mark.planted("driftlab_frameworks.prefect:template_db", "_sqlite_url(tmp)", "_sqlite_url(path)")
@pytest.mark.planted("driftlab_frameworks.prefect:template_db", '"upgrade", "-y"', '"upgrade", "-y", "--dry-run"')
def test_template_migrated_and_never_half_made(tmp_path):
    """A build SIGKILLed halfway (its whole process group, the upgrade command with it) leaves no template; the next
    build makes it, stamped with the head revision of Prefect's SQLite migrations in this env, and leaves no
    temporary file.  Planted bugs this catches: a build that writes the template in place (a killed build leaves a
    half-migrated template that the next server would start on); a template the upgrade never migrated."""
    template = tmp_path / "t" / "template.db"
    cmd, kw = _env(f"P.template_db(Path({str(template)!r}))", tmp_path, start_new_session=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    build = subprocess.Popen(cmd, **kw)
    deadline = time.monotonic() + 90
    try:
        while not [p for p in template.parent.glob("template.db*") if not p.name.endswith(".lock")]:
            assert build.poll() is None and time.monotonic() < deadline, "the build never began its database"
            time.sleep(0.05)
        time.sleep(0.3)  # inside Prefect's migrations (about 5 s of them)
    finally:
        os.killpg(build.pid, signal.SIGKILL)
        build.wait()
    assert not template.exists(), "a killed build left a template"

    got = _run(HEAD + f"print(json.dumps([str(P.template_db(Path({str(template)!r}))), "
                      "ScriptDirectory.from_config(cfg).get_heads()]))", tmp_path)
    made, heads = got
    assert Path(made) == template and template.is_file()
    assert len(heads) == 1 and _revisions(template) == heads, (_revisions(template), heads)
    assert sorted(p.name for p in template.parent.iterdir()) == ["template.db", "template.db.lock"]


@pytest.mark.planted("driftlab_frameworks.prefect:server_database", "return db", "return template_db()")
def test_each_server_starts_on_its_own_copy(tmp_path):
    """Two servers' databases are two copies of the env's template: each migrated, neither the template itself, and
    what one server writes is in neither the other's database nor the template.  Planted bug this catches: servers
    started on the template itself (every server of every lab process sharing one database, the template filling
    with their flow runs)."""
    folder = tmp_path / "server"
    folder.mkdir()
    a, b, template = _run(f"f = Path({str(folder)!r})\n"
                          "print(json.dumps([str(P.server_database(f, 4001)), str(P.server_database(f, 4002)), "
                          "str(P.template_db())]))", tmp_path)
    a, b, template = Path(a), Path(b), Path(template)
    assert len({a, b, template}) == 3 and a.parent == b.parent == folder
    assert _revisions(a) and _revisions(a) == _revisions(b) == _revisions(template)
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(a)) as c:
        c.execute("CREATE TABLE driftlab_mark (x)")
        c.commit()

    def marked(db: Path) -> bool:
        with closing(sqlite3.connect(f"file:{db}?immutable=1", uri=True)) as c:
            return bool(c.execute("SELECT 1 FROM sqlite_master WHERE name = 'driftlab_mark'").fetchone())

    assert marked(a) and not marked(b) and not marked(template)
