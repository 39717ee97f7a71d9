"""When a mechanism's own code fails, or the lab's own store does: never a result.

Models no domain.  A mechanism (a revalidation validator, an isolation
profile, a durable runtime) is code the lab calls; any family may get one
from a user as ``package.module:Class``.  Its outcomes are what the papers
measure, so a mechanism whose code *raises*, *returns the wrong type*,
*exits its process* or *hangs* must never be recorded as an outcome: the
cell fails with :class:`PluginFailed` naming the mechanism, the call and
what happened, and the run stops (finished cells are kept).

The one exception is a refusal the mechanism's contract allows: a class
declares ``refusals = (SomeError, ...)`` and only those exceptions count as
a refusal (for example the LangGraph guard's ``ResumeRefused``).  Anything
else it raises is an error.

:class:`StoreFault` is the same rule for the lab's own databases: a
dropped PostgreSQL connection inside a cell is a fault of the lab, not a
result of the experiment (only faults the experiment injects are results).
The cell is retried once (:func:`retry_on_store_fault`), then fails.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

__all__ = ["PluginFailed", "StoreFault", "refusals_of", "call_plugin", "expect", "is_store_fault",
           "retry_on_store_fault", "describe"]

T = TypeVar("T")


class PluginFailed(Exception):
    """A mechanism's own code raised, returned the wrong type, exited its process or hung (one line)."""

    def __init__(self, mechanism: str | None, what: str):
        """``mechanism`` None: the cell's mechanism, named by whoever reports the cell."""
        super().__init__(f"mechanism {mechanism}: {what}" if mechanism else what)
        self.mechanism, self.what = mechanism, what


class StoreFault(Exception):
    """The lab's own store failed mid-cell (its connection dropped): the cell is retried once, then fails."""


def describe(exc: BaseException) -> str:
    """``Type: first line`` of an exception."""
    text = str(exc).strip()
    return type(exc).__name__ + (f": {text.splitlines()[0]}" if text else "")


def refusals_of(cls_or_obj: Any) -> tuple[type[BaseException], ...]:
    """The exception types a mechanism declares as refusals its contract allows (``refusals``; default none)."""
    declared = getattr(cls_or_obj, "refusals", ())
    return tuple(t for t in declared if isinstance(t, type) and issubclass(t, BaseException))


def is_store_fault(exc: BaseException) -> bool:
    """True if ``exc`` is a lost connection to PostgreSQL (SQLSTATE class 08 or 57, or no SQLSTATE at all)."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return False
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = getattr(exc, "sqlstate", None)
    return state is None or state[:2] in ("08", "57")


def expect(mechanism: str | None, method: str, value: T, kind: type | tuple[type, ...]) -> T:
    """``value`` if it is a ``kind``; else :class:`PluginFailed` saying what the method returned instead."""
    if isinstance(value, kind):
        return value
    names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
    raise PluginFailed(mechanism, f"{method}() returned {type(value).__name__} {value!r:.60}, not {names}")


def call_plugin(mechanism: str, method: str, fn: Callable[..., T], *args: Any,
                returns: type | tuple[type, ...] | None = None, **kwargs: Any) -> T:
    """Call a mechanism's method: its exception or a wrong return type becomes :class:`PluginFailed`.

    A lost connection of the lab's store is :class:`StoreFault` instead (not the mechanism's fault), and
    ``sys.exit`` inside it is reported as such rather than ending the lab."""
    try:
        value = fn(*args, **kwargs)
    except (PluginFailed, StoreFault):
        raise
    except SystemExit as exc:
        raise PluginFailed(mechanism, f"{method}() called sys.exit({exc.code!r})") from None
    except Exception as exc:  # noqa: BLE001 - any failure of a plug-in's code is reported, never recorded
        if is_store_fault(exc):
            raise StoreFault(f"the lab's PostgreSQL connection dropped in {method}(): {describe(exc)}") from None
        raise PluginFailed(mechanism, f"{method}() raised {describe(exc)}") from None
    return value if returns is None else expect(mechanism, method, value, returns)


def _store_fault(exc: Exception) -> bool:
    return isinstance(exc, StoreFault) or is_store_fault(exc)


def retry_on_store_fault(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args)``; after a :class:`StoreFault` (or a lost connection raised as is), once more from
    scratch; a second one is a :class:`StoreFault` saying so.  Anything else propagates unchanged."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - only store faults are retried
        if not _store_fault(exc):
            raise
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001
        if not _store_fault(exc):
            raise
        text = str(exc) if isinstance(exc, StoreFault) else f"the lab's PostgreSQL connection dropped: {describe(exc)}"
        raise StoreFault(f"{text} (twice: the cell was retried once)") from None
