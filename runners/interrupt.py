"""Ctrl-C that cannot be lost: the run stops at the next cell boundary even if Python swallowed it.

Models no domain.  Python turns SIGINT into ``KeyboardInterrupt`` at the next
bytecode, wherever that is; when that is inside a finalizer (``__del__``, a
weakref callback run by the garbage collector) the exception is printed as
"Exception ignored" and dropped, and the run would go on to the end as if
no one had pressed Ctrl-C.  :func:`sticky` installs a handler that also
remembers the signal, and :func:`raise_if_interrupted` (called by the engine
after each cell it writes) raises it again, so an interrupted run always
stops with the cells finished so far kept and exit code 130.
"""
from __future__ import annotations

import contextlib
import signal
from typing import Iterator

__all__ = ["raise_if_interrupted", "sticky"]

_pressed = False


def _handler(signum, frame) -> None:
    global _pressed
    _pressed = True
    signal.default_int_handler(signum, frame)


@contextlib.contextmanager
def sticky() -> Iterator[None]:
    """Within the block, SIGINT raises ``KeyboardInterrupt`` and is remembered for :func:`raise_if_interrupted`."""
    global _pressed
    _pressed = False
    previous = signal.signal(signal.SIGINT, _handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _pressed = False


def raise_if_interrupted() -> None:
    """Raise ``KeyboardInterrupt`` if SIGINT arrived inside :func:`sticky`, even if its first raise was swallowed."""
    if _pressed:
        raise KeyboardInterrupt
