"""``driftlab env add FRAMEWORK==RELEASE`` and ``driftlab env list``: judge a framework release of your own.

Serves issue 27 §5.  The lab judges a framework release in an environment
declared as data (``data/envs/<framework>-<release>/``: a uv project whose
``[tool.driftlab.runtimes]`` names the adapter and the rows it serves, and its
lock).  Adding a release by hand meant copying a sibling folder and guessing
which fields matter; ``env add`` does it the one way:

1. the **template** is the environment of the same framework at the newest
   release the lab ships (its adapter, backends, n/a reasons and options are the
   adapter's, not the release's);
2. the pin of the framework's distribution (the dependency pinned at the
   template's declared ``release``), the rows' names, their ``release`` and the
   project's name are rewritten for the new release; aliases (``@today``) are
   dropped: they name one row;
3. the folder is **locked** with the uv the lab itself depends on (never the
   caller's PATH, never the lab's own project), the locked version of the
   distribution is checked against the release asked for, and the environment
   is **built** as every run builds it (``runners.resume.envs.ensure``).

Anything that fails removes the folder it wrote: nothing half-made is left to
be picked up by a later run.  The one command that judges the release is
printed at the end.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from packaging.version import InvalidVersion, Version

from mechanisms.resume.frameworks import ENVS, Declared, declared
from runners.experiment import DriftlabError
from runners.resume import envs

_REQUEST = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9_.+-]*)\s*==\s*([0-9][0-9A-Za-z.+!-]*)\s*$")


@dataclass(frozen=True)
class Template:
    """The environment a new release of ``framework`` is written from, and the distribution its rows pin."""

    framework: str
    env: str
    release: str  # the template's declared release (the pin of ``distribution``)
    distribution: str
    rows: tuple[Declared, ...]


def parse(request: str) -> tuple[str, str]:
    """``"langgraph==1.2.15"`` -> ``("langgraph", "1.2.15")``; DriftlabError naming what is wrong."""
    m = _REQUEST.match(request)
    if not m:
        raise DriftlabError(f"env add {request!r}: write FRAMEWORK==RELEASE, e.g. langgraph==1.2.15")
    try:
        Version(m.group(2))
    except InvalidVersion:
        raise DriftlabError(f"env add {request!r}: {m.group(2)!r} is not a release number") from None
    return m.group(1), m.group(2)


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def template(framework: str, root: Path = ENVS) -> Template:
    """The shipped environment of ``framework`` at its newest release (DriftlabError if the lab has no adapter)."""
    rows = [d for d in {d.name: d for d in declared(root).values()}.values() if d.framework == framework]
    if not rows:
        known = sorted({d.framework for d in declared(root).values()})
        raise DriftlabError(f"env add: no adapter for framework {framework!r} (the lab has: {', '.join(known)})")
    newest = max(rows, key=lambda d: _version(d.release))
    same = tuple(d for d in rows if d.env == newest.env)
    deps = tomllib.loads((root / newest.env / "pyproject.toml").read_text())["project"]["dependencies"]
    pinned = [d.split("==")[0].strip() for d in deps if d.replace(" ", "").endswith(f"=={newest.release}")]
    if len(pinned) != 1:
        raise DriftlabError(f"{root / newest.env / 'pyproject.toml'}: project.dependencies: no single dependency "
                            f"pinned at the declared release {newest.release} (found {len(pinned)})")
    return Template(framework, newest.env, newest.release, pinned[0], same)


def rewrite(text: str, t: Template, release: str) -> str:
    """The template's pyproject.toml for ``release`` (module docstring, step 2)."""
    body = [ln for ln in text.splitlines() if not re.match(r"^\s*aliases\s*=", ln)]
    while body and body[0].startswith("#"):
        body.pop(0)
    out = "\n".join(body)
    out = re.sub(rf'"{re.escape(t.distribution)}\s*==\s*{re.escape(t.release)}"', f'"{t.distribution}=={release}"',
                 out)
    for row in t.rows:
        new = row.name.rsplit("@", 1)[0] + "@" + release
        out = out.replace(f'runtimes."{row.name}"', f'runtimes."{new}"')
    out = re.sub(rf'^release\s*=\s*"{re.escape(t.release)}"', f'release = "{release}"', out, flags=re.M)
    out = re.sub(r'^name\s*=\s*"driftlab-env-[^"]*"', f'name = "driftlab-env-{t.framework}-{release}"'
                 .replace(".", "-"), out, count=1, flags=re.M)
    head = (f"# {t.framework} {release}, written by `driftlab env add {t.framework}=={release}` on "
            f"{date.today().isoformat()} from the {t.env} environment (its adapter, backends and n/a reasons).\n"
            f"# Lock: `driftlab env add` locked it; to relock, remove this folder and run it again.\n")
    return head + out.lstrip("\n") + ("\n" if not out.endswith("\n") else "")


def locked_version(lock: Path, distribution: str) -> str | None:
    want = re.sub(r"[-_.]+", "-", distribution).lower()
    for pkg in tomllib.loads(lock.read_text()).get("package", []):
        if re.sub(r"[-_.]+", "-", pkg.get("name", "")).lower() == want:
            return pkg.get("version")
    return None


def add(request: str, root: Path = ENVS) -> tuple[str, list[str]]:
    """Write, lock, check and build the environment; (its folder name, the rows it serves)."""
    framework, release = parse(request)
    t = template(framework, root)
    name = f"{framework}-{release}"
    folder = root / name
    if folder.exists():
        raise DriftlabError(f"{folder}: already exists (remove it to write it again)")
    rows = [r.name.rsplit("@", 1)[0] + "@" + release for r in t.rows]
    clash = [r for r in rows if r in declared(root)]
    if clash:
        raise DriftlabError(f"env add: the row {clash[0]} is already declared by {declared(root)[clash[0]].env}")
    folder.mkdir(parents=True)
    try:
        (folder / "pyproject.toml").write_text(rewrite((root / t.env / "pyproject.toml").read_text(), t, release))
        try:
            env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
            done = subprocess.run([*envs._uv(), "lock", "--quiet", "--project", str(folder)], capture_output=True,
                                  text=True, timeout=600, env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise DriftlabError(f"environment {name}: lock failed: {exc}") from None
        if done.returncode != 0:
            lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
            raise DriftlabError(f"environment {name}: lock failed: {' '.join((lines or ['?'])[-1].split())[:300]}")
        got = locked_version(folder / "uv.lock", t.distribution)
        if got is None or Version(got) != Version(release):
            raise DriftlabError(f"environment {name}: the lock resolves {t.distribution} {got}, not the release "
                                f"{release} asked for")
        declared.cache_clear()
        envs.ensure(name, root)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        declared.cache_clear()
        raise
    return name, rows


def listing(root: Path = ENVS) -> list[dict]:
    """Every environment: its framework, release, rows, whether it is built from its current lock, its lock hash."""
    built = envs.built(root)
    out = []
    for env in sorted({d.env for d in declared(root).values()}):
        rows = sorted({d.name for d in declared(root).values() if d.env == env})
        first = declared(root)[rows[0]]
        lock = root / env / "uv.lock"
        out.append({"env": env, "framework": first.framework, "release": first.release, "runtimes": ", ".join(rows),
                    "built": "yes" if env in built else "no",
                    "lock": built[env]["lock_sha256_12"] if env in built else
                    (hashlib.sha256(lock.read_bytes()).hexdigest()[:12] if lock.is_file() else "missing")})
    return out
