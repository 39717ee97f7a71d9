"""Framework adapters of the resume family: each runs inside its own locked environment (issue 14).

Nothing in this package imports the lab or a framework at import time: the
lab reads the declarations (:func:`declared`, from ``data/envs/*/pyproject.toml``
``[tool.driftlab]``) and the env's fork server imports :mod:`.protocol` and one
adapter module.  The contract every adapter implements is the docstring of
:mod:`.protocol`.
"""
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache
from pathlib import Path

#: data/envs/ of this checkout: one folder per framework release (pyproject.toml + uv.lock)
ENVS = Path(__file__).resolve().parents[3] / "data" / "envs"


def envs_root() -> Path:
    """Where the environments are declared: ``$DRIFTLAB_ENVS`` (a scratch copy in the tests, a user's own folder of
    the same form) or :data:`ENVS`."""
    return Path(os.environ.get("DRIFTLAB_ENVS") or ENVS)


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
    #: the distribution whose installed version must equal ``release`` (default: :func:`distribution_of`)
    distribution: str = ""


#: the fields of ``[tool.driftlab.runtimes."<name>"]`` and the types each must have
FIELDS = {"adapter": str, "framework": str, "release": str, "variant": str, "backends": list, "aliases": list,
          "options": dict, "connections_per_racer": int, "fault_cells_wait": str, "not_applicable": dict,
          "distribution": str}
BACKENDS = ("sqlite", "postgres")
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9_.-]*)(\[[^\]]*\])?\s*==\s*([^\s;,]+)\s*(;.*)?$")


def norm(distribution: str) -> str:
    """A distribution's normalized name (PEP 503)."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def pins(project: dict) -> dict[str, str]:
    """``[project] dependencies`` pinned with ``==``: normalized name -> version."""
    out = {}
    for dep in project.get("dependencies", []) if isinstance(project.get("dependencies"), list) else []:
        m = _PIN.match(dep) if isinstance(dep, str) else None
        if m:
            out[norm(m.group(1))] = m.group(3)
    return out


def distribution_of(d: "Declared", pinned: dict[str, str]) -> str:
    """The distribution whose installed version is the row's ``release``: declared (``distribution``), else the pin
    named as the framework (``langgraph+remit`` -> ``langgraph``), else the first pin of the project."""
    if d.distribution:
        return norm(d.distribution)
    base = norm(d.framework.split("+")[0])
    return base if base in pinned else next(iter(pinned), base)


def _load(pyproject: Path) -> tuple[dict, list[str]]:
    """The file's TOML and the problems of its driftlab declarations (``<file>: <field>: <problem>``)."""
    try:
        doc = tomllib.loads(pyproject.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        return {}, [f"{pyproject}: unreadable ({getattr(exc, 'strerror', None) or exc})"]
    except tomllib.TOMLDecodeError as exc:
        return {}, [f"{pyproject}: malformed TOML ({exc})"]
    out = []
    runtimes = doc.get("tool", {}).get("driftlab", {}).get("runtimes", {})
    if not isinstance(runtimes, dict):
        return doc, [f"{pyproject}: tool.driftlab.runtimes: a table of runtimes, not {type(runtimes).__name__}"]
    pinned = pins(doc.get("project", {}))
    for name, spec in runtimes.items():
        where = f"{pyproject}: tool.driftlab.runtimes.\"{name}\""
        if not isinstance(spec, dict):
            out.append(f"{where}: a table, not {type(spec).__name__}")
            continue
        if "@" not in name or not name.partition("@")[2]:
            out.append(f"{where}: a runtime is named <framework>@<release>")
        for key, value in spec.items():
            if key not in FIELDS:
                out.append(f"{where}.{key}: unknown field (known: {', '.join(FIELDS)})")
            elif not isinstance(value, FIELDS[key]) or (FIELDS[key] is int and isinstance(value, bool)):
                out.append(f"{where}.{key}: a {FIELDS[key].__name__}, not {type(value).__name__} {value!r:.40}")
        if "adapter" not in spec:
            out.append(f"{where}.adapter: missing (\"<module>:<Class>\")")
        elif isinstance(spec["adapter"], str) and ":" not in spec["adapter"]:
            out.append(f"{where}.adapter: {spec['adapter']!r} is not \"<module>:<Class>\"")
        for key in ("backends", "aliases"):
            if isinstance(spec.get(key), list) and not all(isinstance(x, str) for x in spec[key]):
                out.append(f"{where}.{key}: a list of strings")
        if isinstance(spec.get("backends"), list):
            out += [f"{where}.backends: unknown backend {b!r} (known: {', '.join(BACKENDS)})"
                    for b in spec["backends"] if isinstance(b, str) and b not in BACKENDS]
        if isinstance(spec.get("not_applicable"), dict):
            out += [f"{where}.not_applicable.{k}: a one-line reason (a string)"
                    for k, v in spec["not_applicable"].items() if not isinstance(v, str)]
        if isinstance(spec.get("connections_per_racer"), int) and spec["connections_per_racer"] < 1:
            out.append(f"{where}.connections_per_racer: at least 1")
        release = spec.get("release", name.partition("@")[2])
        if isinstance(release, str) and "@" in name:
            short = name.partition("@")[2]
            if release != short and not release.startswith(short + "."):
                out.append(f"{where}.release: {release!r} is not the release the row's name says ({short})")
            framework = spec.get("framework", name.split("@")[0])
            dist = spec.get("distribution") if isinstance(spec.get("distribution"), str) else ""
            if isinstance(framework, str):
                dist = norm(dist) if dist else (norm(framework.split("+")[0]) if norm(framework.split("+")[0]) in pinned
                                                 else next(iter(pinned), ""))
                if dist in pinned and pinned[dist] != release:
                    out.append(f"{where}.release: {release!r}, but project.dependencies pins {dist}=={pinned[dist]}")
    return doc, out


def problems(root: Path | None = None) -> list[str]:
    """Every problem of every environment declaration under ``root`` (``<file>: <field>: <problem>``): malformed
    TOML, unknown or mistyped fields, a release its row's name contradicts, duplicate runtime names or aliases, and a
    pin that the lock does not hold.  The runners refuse a run on the first (one line, exit 2)."""
    out, seen = [], {}
    for pyproject in sorted((root or envs_root()).glob("*/pyproject.toml")):
        doc, found = _load(pyproject)
        out += found
        if found:
            continue
        for name, spec in doc.get("tool", {}).get("driftlab", {}).get("runtimes", {}).items():
            for n, field_ in ((name, "name"), *((a, "aliases") for a in spec.get("aliases", ()))):
                if n in seen:
                    out.append(f"{pyproject}: tool.driftlab.runtimes.\"{name}\".{field_}: {n!r} is declared "
                               f"already by {seen[n]}")
                seen.setdefault(n, f"{pyproject}")
        out += lock_problems(pyproject, doc)
    return out


def lock_problems(pyproject: Path, doc: dict) -> list[str]:
    """A pin of ``[project] dependencies`` that ``uv.lock`` beside it does not hold at that version."""
    lock = pyproject.parent / "uv.lock"
    try:
        locked = _locked(lock.read_text())
    except OSError:
        return []  # the builder names a missing lock, with its path
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return [f"{lock}: malformed TOML ({exc})"]
    out = []
    for dist, version in pins(doc.get("project", {})).items():
        if locked.get(dist) != version:
            out.append(f"{pyproject}: project.dependencies: {dist}=={version} is not what {lock.name} holds "
                       f"({dist} {locked.get(dist) or 'absent'}): run `uv lock` in {pyproject.parent}")
    return out


@lru_cache(maxsize=64)
def _locked(text: str) -> dict[str, str | None]:
    """A lock's version of each distribution, by normalised name: parsed once per process and content (a lab run
    checks every env's declarations before it plans and again before the frameworks run; the locks are about 1 MB of
    TOML, about 0.35 s to parse each time)."""
    packages = tomllib.loads(text).get("package", [])
    return {norm(p.get("name", "")): p.get("version") for p in packages if isinstance(p, dict)}


def declared(root: Path | None = None) -> dict[str, Declared]:
    """Every runtime declared by an environment folder (default :func:`envs_root`), by name (aliases included); a
    file with problems (:func:`problems`) declares none (the runners name the file and the field before any run)."""
    return _declared(root or envs_root())


declared.cache_clear = lambda: _declared.cache_clear()  # type: ignore[attr-defined] - after an env is added


@cache
def _declared(root: Path) -> dict[str, Declared]:
    out: dict[str, Declared] = {}
    for pyproject in sorted(root.glob("*/pyproject.toml")):
        doc, found = _load(pyproject)
        if found:
            continue
        pinned = pins(doc.get("project", {}))
        for name, spec in doc.get("tool", {}).get("driftlab", {}).get("runtimes", {}).items():
            d = Declared(name, pyproject.parent.name, spec["adapter"], spec.get("framework", name.split("@")[0]),
                         spec.get("release", name.partition("@")[2]), spec.get("variant", ""),
                         tuple(spec.get("backends", ("sqlite",))),
                         dict(spec.get("not_applicable", {})), tuple(spec.get("aliases", ())),
                         dict(spec.get("options", {})), int(spec.get("connections_per_racer", CONNECTIONS_PER_RACER)),
                         str(spec.get("fault_cells_wait", "")), spec.get("distribution", ""))
            d = replace(d, distribution=distribution_of(d, pinned))
            for n in (name, *d.aliases):
                out.setdefault(n, d)
    return out
