"""Planted variants in the lab's child processes (tests/planting.py): a ``driftlab`` CLI started by a test whose
planted variant is being checked runs with the same plant, and so does a framework's environment server.

The hook in ``tests/conftest.py`` puts this folder on ``PYTHONPATH`` and the plant in ``DRIFTLAB_PLANT`` (JSON:
``[target, old, new]``) while it runs a test the second time; Python imports ``sitecustomize`` at start-up, so
every interpreter the test starts with that environment swaps the function's code before it runs anything.
Without ``DRIFTLAB_PLANT`` this module does nothing.  A ``python -m ...`` run in a working folder that holds a lab tree
(a test's copy of the tree) is planted in that tree's code, which it is about to run, not the installed tree's.

An env server (``runners/resume/envs.py``: the env's own Python running ``mechanisms/resume/frameworks/protocol.py``)
gets the plant too; a plant in an adapter (target ``driftlab_frameworks.<module>:...``) is applied there only: the
package is loaded from this tree the way ``protocol.load_package`` loads it, so the server, and every call's child
it forks, runs the planted adapter.
"""
import json
import os
import sys

_PLANT = os.environ.get("DRIFTLAB_PLANT")
_TREE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_FRAMEWORKS = os.path.join(_TREE, "mechanisms", "resume", "frameworks")


def _env_server() -> bool:
    return any(a.endswith(os.path.join("frameworks", "protocol.py")) for a in getattr(sys, "orig_argv", ()))


def _module_run_in_a_tree() -> str | None:
    """The working folder, when this Python runs ``python -m ...`` there (without -P or -I) and it holds a lab tree:
    Python puts it first on sys.path once start-up is over, so the plant must go into that tree's code (a test that
    runs a copy of the tree), not the installed one's."""
    argv = getattr(sys, "orig_argv", ())
    cwd = os.getcwd()
    if "-m" in argv and not {"-P", "-I"} & set(argv) and os.path.isfile(os.path.join(cwd, "runners", "cli.py")):
        return cwd
    return None


def _load_frameworks() -> None:
    """``driftlab_frameworks`` as protocol.load_package makes it (this tree's adapters folder, never on sys.path)."""
    import importlib.util

    if "driftlab_frameworks" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location("driftlab_frameworks", os.path.join(_FRAMEWORKS, "__init__.py"),
                                                  submodule_search_locations=[_FRAMEWORKS])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules["driftlab_frameworks"] = pkg
    spec.loader.exec_module(pkg)


if _PLANT:
    _ADAPTER = json.loads(_PLANT)[0].startswith("driftlab_frameworks.")
    if not _ADAPTER or _env_server():  # an adapter's plant in env servers only; the lab's in every Python of the lab
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/, for planting
        _HERE = _module_run_in_a_tree()
        if _HERE:
            sys.path.insert(1, _HERE)  # stays: Python would put it first anyway (tests/ is taken off below)
        try:
            from planting import planted

            if _ADAPTER:
                _load_frameworks()
            _KEPT = planted(*json.loads(_PLANT))  # held for the life of this process (its exit would restore the code)
            _KEPT.__enter__()
            _ARGV = list(getattr(sys, "orig_argv", ()))
            _RUN = _ARGV[_ARGV.index("-m") + 1] if "-m" in _ARGV[:-1] else None
            _OWN = _RUN and _RUN.split(".")[0] == json.loads(_PLANT)[0].split(".")[0]  # X of the planted package
            if _OWN and _RUN in sys.modules:  # `python -m X` and the plant's imports imported X: runpy is to run X as
                del sys.modules[_RUN]  # __main__ and would warn on stderr (a line the test did not expect); as without
                #                        a plant, a later `import X` gets a copy of its own
        except ImportError:  # a Python without the lab (a tool's own interpreter): nothing of the lab to plant in
            pass
        finally:
            sys.path.pop(0)
