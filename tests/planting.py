"""Planted variants checked on every run (issue 24 §9): a test that says it catches a bug catches it.

A test whose docstring names a bug class carries the bug as a marker beside it::

    @pytest.mark.planted("analysis.resume.checkers:check_co", "len(values) > 1", "len(values) > 2")
    def test_a_second_value_is_a_violation(): ...

After the test passes, the hook in ``tests/conftest.py`` runs it once more as it is (the control: a test that fails a
second run proves nothing with its plants, and the hook says so), then swaps the named function's code for the same
source with ``old`` replaced by ``new`` (exactly one occurrence: the planted bug), runs the test again, and fails it
if the test still passes: the claim in its docstring is then false.  The code object is swapped in place, so every
reference to the function (``from x import f``, a registry of checkers) runs the planted variant; the original is
restored afterwards.  Only module-level functions and methods without zero-argument ``super()`` can be planted.
While the test runs the second time, the plant is also in every Python it starts with this process's environment
(a ``driftlab`` CLI run, a forked worker): ``tests/plant_site/sitecustomize.py`` applies it at start-up.  A
framework's environment server is the exception (it runs another Python, with a clean environment), and so is a
test that runs a copy of the tree: the plant imports the lab from where it is installed, so such a test carries no
plant (its child would run the installed tree's code, not the copy's).
The test is run whole a second time: a test whose history comes from a real race (its outcome decided by which
process the scheduler runs first) cannot carry a plant, since its second run is another race; such tests stay in
``tests/data/unplanted.txt`` with their timing-free assertions.
"""
from __future__ import annotations

import importlib
import inspect
import textwrap
from contextlib import contextmanager
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
    scope: dict = {}
    exec(compile("\n" * (func.__code__.co_firstlineno - 1 + body) + mutated, inspect.getsourcefile(func), "exec"),
         func.__globals__, scope)
    code = next(v for v in scope.values() if inspect.isfunction(v)).__code__
    if code.co_freevars != func.__code__.co_freevars:
        raise ValueError(f"planted {target}: a closure or zero-argument super() cannot be planted")
    original, func.__code__ = func.__code__, code
    try:
        yield
    finally:
        func.__code__ = original
