"""Databases a cell owns: a SQLite file in the run's scratch folder, or a PostgreSQL schema of its own.

Models no domain: a family's store (e.g. :mod:`runners.revalidation.race_store`) creates
its own tables inside what this module hands out.

**PostgreSQL.**  The server is the one at ``DRIFTLAB_POSTGRES_DSN`` (default
:data:`DEFAULT_DSN`).  A cell's schema is named
``<prefix><host>_<pid>_<random>`` by :func:`schema_name`: ``<host>`` is this
machine's identity (:func:`host_id`), ``<pid>`` the creating process.
:func:`create_schema` and :func:`drop_schema` compose the name with
``psycopg.sql.Identifier``; no identifier is ever pasted into SQL text.

**Orphans.**  A run killed before it dropped its schema leaves it behind.
:func:`drop_orphans` (called by :func:`create_schema`) drops a schema only
when its name parses as ``<prefix><host>_<pid>_<random>`` with ``<host>``
equal to this machine's identity and no local process with that pid.  A
schema of another host sharing the server, of a live run, or of any other
name is left alone.

**SQLite.**  :func:`sqlite_folder` is a temporary folder under the run
folder's ``scratch/`` (wiped when a killed run is started again).
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import secrets
import socket
import tempfile
from pathlib import Path
from typing import Any

import psutil

DEFAULT_DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres connect_timeout=3"


def postgres_dsn() -> str:
    """The DSN of the PostgreSQL server cells use (``DRIFTLAB_POSTGRES_DSN``, else :data:`DEFAULT_DSN`)."""
    return os.environ.get("DRIFTLAB_POSTGRES_DSN", DEFAULT_DSN)


@functools.cache
def host_id() -> str:
    """This machine's identity in schema names: 8 hex digits of its host name and the kernel's boot id.

    Two containers on one kernel have different host names; two machines
    differ in both.  A pid means something only on the host that owns it.
    """
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return hashlib.blake2b(f"{socket.gethostname()}|{boot}".encode(), digest_size=4).hexdigest()


def _check_prefix(prefix: str) -> None:
    if not re.fullmatch(r"[a-z][a-z0-9_]*_", prefix):
        raise ValueError(f"bad schema prefix {prefix!r} (lower case letters, digits and _, ending in _)")


def schema_pattern(prefix: str) -> re.Pattern:
    """The names :func:`schema_name` makes for ``prefix``: groups host, pid, random."""
    _check_prefix(prefix)
    return re.compile(rf"^{re.escape(prefix)}([0-9a-f]{{8}})_([0-9]{{1,10}})_([0-9a-f]{{8}})$")


def schema_name(prefix: str, pid: int | None = None) -> str:
    """A new schema name: ``<prefix><host>_<pid>_<random>`` (at most 63 characters, PostgreSQL's limit)."""
    _check_prefix(prefix)
    name = f"{prefix}{host_id()}_{os.getpid() if pid is None else pid}_{secrets.token_hex(4)}"
    if len(name) > 63:
        raise ValueError(f"schema prefix {prefix!r} is too long")
    return name


def orphaned(prefix: str, name: str) -> bool:
    """True if ``name`` is a schema of ``prefix`` made on this host by a process that is gone."""
    m = schema_pattern(prefix).match(name)
    return bool(m) and m.group(1) == host_id() and not psutil.pid_exists(int(m.group(2)))


def drop_orphans(conn: Any, prefix: str) -> list[str]:
    """Drop the schemas :func:`orphaned` says are safe to drop; their names."""
    from psycopg import sql

    names = [n for (n,) in conn.execute("SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (prefix,))]
    dropped = []
    for name in names:
        if orphaned(prefix, name):
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
            dropped.append(name)
    return dropped


def create_schema(dsn: str, prefix: str) -> str:
    """Drop this host's orphans of ``prefix``, then create a new schema; its name."""
    import psycopg
    from psycopg import sql

    name = schema_name(prefix)
    with psycopg.connect(dsn, autocommit=True) as conn:
        drop_orphans(conn, prefix)
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    return name


def drop_schema(dsn: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def check_postgres(dsn: str | None = None) -> str:
    """'' if the server at ``dsn`` answers, else the first line of why not."""
    try:
        import psycopg

        with psycopg.connect(dsn or postgres_dsn()) as conn:
            conn.execute("select 1")
    except Exception as exc:  # noqa: BLE001 - any failure means the backend cannot be used
        text = str(exc).strip()
        return text.splitlines()[0] if text else type(exc).__name__
    return ""


def sqlite_folder(scratch: Path | None, prefix: str) -> tempfile.TemporaryDirectory:
    """A temporary folder for a cell's SQLite files, under ``scratch`` (the run's ``scratch/``)."""
    return tempfile.TemporaryDirectory(prefix=prefix, dir=scratch)
