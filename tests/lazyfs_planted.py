"""Planted lazy file systems the power-loss tests must fail on (served by ``runners.resume.lazyfs serve ... OPS``)."""
from __future__ import annotations

import os

from runners.resume.lazyfs import LazyFS


class NoopFsync(LazyFS):
    """Planted: an fsync that syncs nothing (the shadow stays in memory, so a power loss drops synced data)."""

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        return 0


class RenameDropsShadow(LazyFS):
    """Planted: a rename that drops the file's unsynced shadow instead of moving it with the file."""

    def rename(self, old: str, new: str) -> int:
        with self.lock:
            os.rename(self._full(old), self._full(new))
            self.shadows.pop(old, None)
            self.shadows.pop(new, None)
        return 0


class WritesThrough(LazyFS):
    """Planted: every write reaches the backing file and is synced at once (nothing unsynced to lose)."""

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        n = super().write(path, data, offset, fh)
        with self.lock:
            self._sync(path)
        return n


class KeepsShadow(LazyFS):
    """Planted: a power loss that keeps the unsynced data (and later writes it out)."""

    def power_loss(self) -> None:
        self.flush()


class TornKeepsAll(LazyFS):
    """Planted: a torn write that keeps the whole write instead of its prefix to a 4 KiB boundary."""

    def torn(self) -> None:
        self.flush()


class TruncateNeverShrinks(LazyFS):
    """Planted: a truncate (the kernel's setattr of the size) that never makes a file shorter."""

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        with self.lock:
            return super().truncate(path, max(length, self._shadow(path).size), fh)
