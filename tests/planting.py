"""Planted variants checked on every run (issue 24 §9): a test that says it catches a bug catches it.

A test whose docstring names a bug class carries the bug as a marker beside it::

    @pytest.mark.planted("analysis.resume.checkers:check_co", "len(values) > 1", "len(values) > 2")
    def test_a_second_value_is_a_violation(): ...

After the test passes, the hook in ``tests/conftest.py`` runs it once more as it is (the control: a test that fails a
second run proves nothing with its plants, and the hook says so), then swaps the named function's code for the same
source with ``old`` replaced by ``new`` (exactly one occurrence: the planted bug), runs the test again, and fails it
if the test still passes: the claim in its docstring is then false.  The code object is swapped in place, so every
reference to the function (``from x import f``, a registry of checkers) runs the planted variant; the original is
restored afterwards.  Module-level functions and methods (zero-argument ``super()`` too) can be planted, closures
cannot.
While the test runs the second time, the plant is also in every Python it starts with this process's environment
(a ``driftlab`` CLI run, a forked worker, a framework's environment server: ``runners/resume/envs.py`` passes the
plant on to it): ``tests/plant_site/sitecustomize.py`` applies it at start-up.  A test that runs a copy of the tree
with ``python -m runners.cli`` in the copy gets the plant in the copy's code (the site module plants the tree in the
working folder the child is about to run); a child that runs a copy otherwise would run the installed tree's code
under a plant, so such a test carries none.
A plant in a framework's adapter (target ``driftlab_frameworks.<module>:...``, a module of
``mechanisms/resume/frameworks``) is applied in the env servers the rerun starts only (the lab never imports an
adapter); a server started under a plant serves that rerun alone (``runners/resume/envs.py`` keys its servers on it).
The test is run whole a second time: a test whose history comes from a real race (its outcome decided by which
process the scheduler runs first) cannot carry a plant, since its second run is another race; such tests stay in
``tests/data/unplanted.txt`` with their timing-free assertions.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def _target(target: str):
    module, _, qualname = target.partition(":")
    owner = importlib.import_module(module)
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    func = inspect.getattr_static(owner, name)
    func = func.fget if isinstance(func, property) else getattr(func, "__func__", func)  # property, static, class
    if not inspect.isfunction(func):
        raise ValueError(f"planted {target}: not a function ({type(func).__name__})")
    return inspect.unwrap(func)


FRAMEWORKS = "driftlab_frameworks."  # an adapter's module: imported only inside its env server (plant_site)


def check_adapter_plant(target: str, old: str) -> None:
    """An adapter's plant, checked from its source file (the lab cannot import an adapter: its framework lives in
    the env only): the named function exists and holds ``old`` exactly once, as :func:`planted` will require."""
    module, _, qualname = target.partition(":")
    folder = Path(__file__).resolve().parents[1] / "mechanisms" / "resume" / "frameworks"
    path = folder / f"{module[len(FRAMEWORKS):]}.py"
    source = path.read_text(encoding="utf-8")
    node: ast.AST = ast.parse(source)
    for part in qualname.split("."):
        node = next((n for n in ast.iter_child_nodes(node) if getattr(n, "name", None) == part), None)
        if node is None:
            raise ValueError(f"planted {target}: no {part} in {path.name}")
    count = (ast.get_source_segment(source, node) or "").count(old)
    if count != 1:
        raise ValueError(f"planted {target}: {old!r} occurs {count} times in its source, not once")


@contextmanager
def planted(target: str, old: str, new: str) -> Iterator[None]:
    """The function ``module:qualname`` with ``old`` replaced by ``new`` in its source, for the block's duration."""
    func = _target(target)
    source = textwrap.dedent(inspect.getsource(func))
    if source.count(old) != 1:
        raise ValueError(f"planted {target}: {old!r} occurs {source.count(old)} times in its source, not once")
    lines = source.splitlines(keepends=True)
    body = [i for i, ln in enumerate(lines) if ln.lstrip().startswith(("def ", "async def "))][0]
    mutated = "".join(lines[body:]).replace(old, new)  # decorators dropped: the code object alone is swapped
    # a method with zero-argument super() refers to its class through the free variable __class__: compiled inside a
    # class body, the planted code has that free variable too, and runs with the original function's cell
    wrap = func.__code__.co_freevars == ("__class__",)
    if wrap:
        mutated = "class _Planted:\n" + textwrap.indent(mutated, "    ")
    scope: dict = {}
    exec(compile("\n" * (func.__code__.co_firstlineno - 1 + body - wrap) + mutated, inspect.getsourcefile(func),
                 "exec"), func.__globals__, scope)
    defined = vars(scope["_Planted"]) if wrap else scope
    code = next(v for v in defined.values() if inspect.isfunction(v)).__code__
    if code.co_freevars != func.__code__.co_freevars:
        raise ValueError(f"planted {target}: a closure cannot be planted")
    original, func.__code__ = func.__code__, code
    try:
        yield
    finally:
        func.__code__ = original
