"""``driftlab check``'s main process keeps the cyclic garbage collector paused while it gathers the chunks (issue 28):
it holds every chunk's partitions until the end, none of them in a cycle, and the collector walked them all again
at each collection (a quarter to a third of the main process's CPU on the benchmark's million operations).

Held to: no collection starts in the main process while the chunks are settled, the chunks are freed before the
collector is on again (made while it was paused, they would all be in its youngest generation, walked by its first
collection), and the collector is on again once ``check`` returns or refuses a history (a paused collector is
never left behind).
"""
from __future__ import annotations

import gc

import pytest

import runners.check as check_module
from benchmarks.bench_check import write_history
from runners.check import check
from runners.experiment import DriftlabError


def collections_while_settling(monkeypatch, path, **kwargs) -> int:
    """How many collections started in this process while ``settle`` gathered the chunks of ``check(path)``."""
    settling, started = [False], [0]
    settle = check_module.settle

    def spy(*args):
        settling[0] = True
        try:
            return settle(*args)
        finally:
            settling[0] = False

    def count(phase, info):
        if phase == "start" and settling[0]:
            started[0] += 1

    monkeypatch.setattr(check_module, "settle", spy)
    gc.callbacks.append(count)
    try:
        check(path, **kwargs)
    finally:
        gc.callbacks.remove(count)
    return started[0]


@pytest.mark.planted("runners.check:check", "with paused_gc():", "with nullcontext():")
@pytest.mark.parametrize("jobs", [1, 2])
def test_no_collection_runs_while_the_chunks_are_gathered(jobs, tmp_path, monkeypatch):
    """Planted bug: the main process's collector left on while it gathers hundreds of chunks (it then walks every
    chunk kept so far at each collection): no collection may start while they are settled, in this process or
    with worker processes, and the collector is on again afterwards."""
    assert gc.isenabled()
    path = write_history(tmp_path / "race.jsonl", 20_000)
    assert collections_while_settling(monkeypatch, path, jobs=jobs, chunk_bytes=8192) == 0
    assert gc.isenabled(), "the collector is on again once check returns"


def test_the_collector_is_on_again_after_a_refused_history(tmp_path):
    """A history refused (its 3,000th line is not JSON) leaves the collector as it found it: on."""
    path = write_history(tmp_path / "race.jsonl", 6_000)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3000] = b"{not json\n"
    path.write_bytes(b"".join(lines))
    assert gc.isenabled()
    with pytest.raises(DriftlabError, match="line 3001: not JSON"):
        check(path, jobs=2, chunk_bytes=8192)
    assert gc.isenabled()


@pytest.mark.planted("runners.check:check", "del chunks, groups, rest, work, scanned", "pass")
@pytest.mark.parametrize("jobs", [1, 2])
def test_the_chunks_are_freed_before_the_collector_is_on_again(jobs, tmp_path, monkeypatch):
    """Planted bug: the chunks kept until ``check`` returns, so the collector's first collection once it is on
    again walks every one of them (they were made while it was paused, so all are in its youngest generation):
    no chunk may be alive when a collection starts after the results are merged."""
    path = write_history(tmp_path / "race.jsonl", 20_000)
    merged, alive = [False], []
    merge = check_module.merge

    def spy(*args):
        merged[0] = True
        return merge(*args)

    def count(phase, info):
        if phase == "start" and merged[0]:
            alive.append(sum(isinstance(o, check_module.Chunk) for o in gc.get_objects()))

    monkeypatch.setattr(check_module, "merge", spy)
    gc.callbacks.append(count)
    try:
        check(path, jobs=jobs, chunk_bytes=8192)
        gc.collect()  # at least one collection after the merge, whatever the allocation counts
    finally:
        gc.callbacks.remove(count)
    assert alive and max(alive) == 0, alive
