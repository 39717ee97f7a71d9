"""``driftlab check``: validate a history file and judge it partition by partition, streaming.

A history may be anyone's (the lab's public interface), and large: a
million operations.  So the file is read as a stream of **chunks** (byte
ranges of about ``chunk_bytes``), in this process or in ``jobs`` worker
processes, and never held whole.  Each chunk is parsed once:

1. **validated** — the file must be a regular file (a FIFO, a device or a
   folder is refused before anything is read) under ``max_bytes``; every
   line is checked against the family's declared format
   (:mod:`vocabulary.schema`), a field at a time over the whole chunk
   (:meth:`Validator.check_many`, with the validator's compiled keys; it also lists
   each operation name's lines); a chunk that fails that quick test is
   validated again line by line, which names the first bad line.  A
   malformed history is one line naming the first bad line and its field,
   exit 2, and never a verdict: whatever the checkers found in other chunks
   is dropped.
2. **partitioned** — each operation belongs to a **partition** (Porcupine's
   ``Partition``: the operations that share a value of the family's
   partition keys, e.g. one race pair's ``value.group``; for resume the
   runs of one group; those that carry no key are one partition).
3. **judged** — the partitions that lie inside the chunk (none of their
   operations among its first or last ``EDGE``) are judged there and then;
   the others travel to the main process as raw lines.  For a family whose
   checkers split by group themselves (``HistorySchema.separable``) the
   inner partitions are one history, otherwise each is a history of its own;
   only the operations the checkers declare they read (:func:`reads`) are
   handed on (a race pair's 4 of 13).  A checker that judges groups given as
   parsed lines (``check_groups``: its quick paths, e.g. a race pair with one
   commit landed) gets the partitions as they are when they are its groups
   (the one partition key ``value.group``), no
   :class:`~vocabulary.Operation` built; a checker that reads none of a
   chunk's operations judges none of its groups there.

The main process ties the chunks' partitions together by their keys.  The
partitions that reached an edge are judged whole once every chunk is in.
If an inner partition turns out to go on in another chunk (a history whose
partitions interleave far apart), the chunks' verdicts are dropped and the
file is read a second time, a partition handed to the checkers as soon as
its last operation is read; memory then grows with the partitions open at
once.  Either way memory grows with the largest partition and the chunks
in flight, not with the file.

Each checker's results are merged: the worst verdict, every witness in the
order of the operations it names, the summaries' counts added.  A history
judged in partitions gets the verdicts the whole file gets
(``tests/test_check.py`` holds it to that on the lab's own histories and
on interleaved ones).
"""
from __future__ import annotations

import gc
import json
import os
import re
import stat
from array import array
from collections import Counter, deque
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import orjson
from orjson import loads as orjson_loads

from runners.experiment import DriftlabError
from vocabulary import INDETERMINATE, CheckResult, History, HistoryError, Operation, Verdict, worst
from vocabulary.schema import HistorySchema, Validator, header, operation

MAX_BYTES = 4 * 2**30  # a history file larger than this is refused (--max-bytes)
CHUNK_BYTES = 2**19  # a chunk: parsed, validated and its inner partitions judged at once (~2,200 race operations;
# small enough to stay in the processor's cache: 4 MiB chunks made a million-operation check 1.3 times slower; since
# a chunk is validated a field at a time, 512 KiB beat 128 KiB, 256 KiB, 1 and 2 MiB, 2026-12-04)
EDGE = 16  # operations at each end of a chunk whose partitions may go on in a neighbour: judged once all are in
POOL_BYTES = 8 * 2**20  # a larger file is read by a worker per core (unless --jobs says otherwise)
BATCH = 20_000  # operations per batch handed to the checkers when the file is read a second time
MAP_BATCH = 8  # chunks sent to a worker at once: a round trip per 8 (the main process's CPU for a million-operation
# check 0.56 -> 0.39 s, measured 2026-12-04; it shares the 2 cores with the workers)
_KEY_TYPES = frozenset({str, int, type(None)})  # what a partition key's value may be (None: the key is absent)
NO_KEY = (("", None),)  # the partition key of the operations that carry none (no declared key is "" or None)


def open_regular(path: Path, max_bytes: int) -> BinaryIO:
    """The file, opened for reading, if it is a regular file within ``max_bytes`` (never blocks on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise DriftlabError(f"{path}: cannot read ({exc.strerror})") from None
    mode, size = os.fstat(fd).st_mode, os.fstat(fd).st_size
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket")
        raise DriftlabError(f"{path}: is {kind}, not a history file (a regular JSON Lines file)")
    if size > max_bytes:
        os.close(fd)
        raise DriftlabError(f"{path}: {size:,} bytes, over the limit of {max_bytes:,} (--max-bytes)")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb", buffering=1 << 20)


@contextmanager
def paused_gc():
    """The cyclic garbage collector paused for a pass over many small objects.

    Parsed lines and operations hold no reference cycles and are freed by
    reference counting; left on, the collector walks every live operation of a
    batch again and again, which doubled the time of a million-operation check.
    Whatever cycles a checker makes are collected once the pass ends.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def loads(raw: bytes, n: int) -> tuple[Any, bool]:
    """The parsed line, and whether it is strict JSON (False: it holds NaN, Infinity or 1e999, which only
    Python's own reader takes, so that the validator can name the field that holds one)."""
    try:
        return orjson.loads(raw), True
    except orjson.JSONDecodeError as exc:
        try:
            return json.loads(raw), False
        except (ValueError, RecursionError):
            raise HistoryError(f"line {n}: not JSON ({str(exc).split(':', 1)[0]})") from None


@dataclass
class Plan:
    """What the pass learned: the header, how many operations, each chunk's partitions tied to the whole file's."""

    family: str
    meta: dict
    body: int  # byte offset of the first line after the header
    header_line: int
    seen: tuple  # the file's identity (device, inode, size, mtime): a second pass reads that file or refuses
    operations: int = 0
    partitions: int = 0
    passes: int = 1  # 2: an inner partition went on in another chunk, so the file was read again to judge
    unknown: dict[str, int] = field(default_factory=dict)


@dataclass
class Chunk:
    """What one chunk of the file gave (a byte range, read in this process or a worker): its validation, its local
    partitions, the verdicts on the partitions that lie inside it, and the raw lines of those at its edges."""

    lines: int = 0  # every line of the range, blank ones too
    first: tuple[int, int] | None = None  # (local line, index) of the range's first operation
    last_index: int | None = None
    part: array = field(default_factory=lambda: array("q"))  # per operation: its local partition
    keys: dict[int, list] = field(default_factory=dict)  # local partition -> the key values that make it
    unknown: dict[str, int] = field(default_factory=dict)
    error: tuple[int, str] | None = None  # (local line, message without the line)
    failure: str | None = None  # a checker's own failure on an inner partition (said only if the file validates)
    edges: dict[int, list[bytes]] = field(default_factory=dict)  # local partition at an edge -> its raw lines
    results: list[list[CheckResult]] = field(default_factory=list)  # per checker, over the inner partitions
    named: dict[int, dict] = field(default_factory=dict)  # the operations the inner witnesses name
    to_global: dict[int, int] = field(default_factory=dict)  # local partition -> key id in the file's Groups


class Groups:
    """Union-find over partition keys: operations that share a key (transitively) are one partition."""

    def __init__(self) -> None:
        self.ids: dict[tuple, int] = {}
        self.parent: list[int] = []
        self.deferred: list[tuple] = []  # the one key of each chunk's inner partitions, not joined (see settle)

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def roots(self) -> list[int]:
        """Each key id's partition root."""
        return [self.find(i) for i in range(len(self.parent))]

    def join(self, keys) -> int:
        """Put every key in one partition (new keys get their own first); returns its root."""
        root = -1
        for key in keys:
            i = self.ids.get(key)
            if i is None:
                i = self.ids[key] = len(self.parent)
                self.parent.append(i)
            r = self.find(i)
            if root < 0:
                root = r
            elif r != root:
                self.parent[r] = root
        return root


# ------------------------------------------------------------------ one chunk (in this process or a worker)
_JOB: dict[str, Any] = {}


def _setup(family: str, meta: dict, names: list[str], allow_unknown: bool, max_bytes: int, edge: int) -> None:
    from analysis.checkers import checkers, schemas

    others = schemas()
    known = checkers(family)
    chosen = [known[n] for n in names]
    separable, partition = others[family].separable, others[family].partition
    _JOB.update(family=family, meta=meta, checkers=chosen, separable=separable,
                validator=Validator(others[family], others, allow_unknown).fresh, max_bytes=max_bytes, edge=edge,
                keep=reads(chosen) if separable else None, partition=partition,
                by_group=[separable and tuple(partition) == ("group",) and hasattr(c, "check_groups") for c in chosen])


def reads(chosen: list) -> frozenset[str] | None:
    """The operation names the chosen checkers read (None: every operation, if one of them does not say which).

    A checker of a separable family may declare ``reads``: the operation names its verdict on a group depends
    on; every indeterminate operation counts as read too.  Its result on a history is then the same as on that
    history without the other operations, and ``check`` builds and hands it only these (a race pair's 4 of 13).
    ``tests/test_check_fastpath.py`` holds each declaration to that.
    """
    names: set[str] = set()
    for c in chosen:
        declared = getattr(c, "reads", None)
        if declared is None:
            return None
        names |= declared
    return frozenset(names)


def is_read(obj: dict, keep: frozenset[str]) -> bool:
    """Whether the checkers read this parsed operation line (:func:`reads`): its name is read, or it is indeterminate."""
    return obj["op"] in keep or obj["status"] == INDETERMINATE


def scan(path: Path, start: int, stop: int) -> Chunk:
    """Validate the lines of ``path`` in the byte range [start, stop) (both at line starts), tie each operation to
    a local partition, and judge the partitions that do not reach the chunk's first or last ``edge`` operations."""
    with open_regular(path, _JOB["max_bytes"]) as f:
        lines = read_range(f.fileno(), start, stop).split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    with paused_gc():
        # in a function of its own: the chunk's parsed lines are freed when it returns, before the collector is on
        # again (else its first pass walks them all: 0.7 s of CPU in a million-operation check, under cProfile)
        return _scan(lines)


def _scan(lines: list[bytes]) -> Chunk:
    """The work of :func:`scan` on the range's lines."""
    out = Chunk()
    validator = _JOB["validator"]()
    got = _scan_chunk(lines, validator, out)
    if got is None:  # some line failed the chunk's quick test: line by line, for the exact first error
        validator, out = _JOB["validator"](), Chunk()
        got = _scan_lines(lines, validator, out)
        if got is None:
            return out
    objs, raws, part, out.keys, by_name, kinds = got
    out.lines, out.last_index, out.unknown = len(lines), (validator.previous if out.first else None), validator.unknown
    out.part = part
    count, e = len(part), _JOB["edge"]
    edge = {part[k] for k in (*range(min(e, count)), *range(max(e, count - e), count))}
    out.edges = {p: [] for p in edge}
    for k in compress(range(count), map(edge.__contains__, part)):
        out.edges[part[k]].append(raws[k])
    # the inner partitions' operations, partition by partition in the order they first appear, each in file order
    # (only those the checkers read: _JOB["keep"])
    keep = _JOB["keep"]
    # validated line by line, or an operation is indeterminate (read whatever its name): each line asked
    unsure = by_name is None or INDETERMINATE in kinds
    if keep is None:
        picked = None
    elif unsure:
        picked = [k for k, obj in enumerate(objs) if is_read(obj, keep)]
    else:  # the lines of the names read, merged into file order (each name's lines are in file order already)
        picked = sorted(chain.from_iterable(by_name[n] for n in keep if n in by_name))
    if by_name is not None and len(_JOB["partition"]) == 1:
        # one key: the local partitions are numbered 0, 1, ... in the order they first appear, and never joined
        order, partitions, outer = part, len(out.keys), edge
    else:
        rank = {p: r for r, p in enumerate(dict.fromkeys(part))}
        order, partitions, outer = array("q", map(rank.__getitem__, part)), len(rank), {rank[p] for p in edge}
    inner = inner_partitions(objs, order, partitions, picked, outer)
    out.results = [[] for _ in _JOB["checkers"]]
    idle = None  # per checker: it reads no operation of the chunk (and none is indeterminate), so it judges no group
    if keep is not None and not unsure:
        idle = [not any(by_name.get(n) for n in c.reads) for c in _JOB["checkers"]]
    if count > sum(map(len, out.edges.values())):  # some partition lies inside (its operations may all be unread)
        try:
            out.results, out.named = _judge_parsed(inner, idle)
        except DriftlabError as exc:
            out.failure = str(exc)
    return out


def inner_partitions(objs: list, order: array, partitions: int, picked: list[int] | None,
                     outer: set[int]) -> list[list]:
    """The operations ``picked`` names (their positions, increasing; None: every one) grouped by
    partition: one list per partition, in file order, the partitions by their ``order`` number (0 to
    ``partitions`` - 1: the order they first appear), leaving out those ``outer`` names (they reach an edge) and
    those with none picked.

    Each operation is appended to its partition's list in one C-level pass (``map`` of ``list.append``) instead of
    a sort by partition and a ``groupby``: 136 instead of 186 ns an operation on the benchmark's race chunks
    (2026-12-04)."""
    parts: list[list] = [[] for _ in range(partitions)]
    which, ops = (order, objs) if picked is None else (map(order.__getitem__, picked), map(objs.__getitem__, picked))
    deque(map(list.append, map(parts.__getitem__, which), ops), 0)
    return [ops for p, ops in enumerate(parts) if ops and p not in outer]


def _scan_chunk(lines: list[bytes], validator: Validator, out: Chunk) -> tuple | None:
    """A chunk validated and partitioned a field at a time (:meth:`Validator.check_many`): (the parsed lines, the raw lines,
    each operation's local partition, each local partition's keys, each operation name's line positions, the set of
    statuses), or None if any line is blank, is not strict JSON or fails the quick test (the caller then goes line
    by line)."""
    try:
        objs = list(map(orjson_loads, lines))
    except orjson.JSONDecodeError:  # a blank line, or one only Python's reader takes (NaN), or not JSON at all
        return None
    fetched: dict[str, list] = {}  # the common value keys' values, as check_many fetched them (a partition key)
    checked = validator.check_many(objs, fetched)
    if checked is None:
        return None
    values = checked[0]
    groups, partition = Groups(), validator.partition
    if len(partition) == 1:  # the common case, one partition key: its values, each a partition of its own
        key = partition[0]
        keys = fetched.get(key)
        if keys is None:
            keys = list(map(dict.get, values, repeat(key)))
        if not (key in fetched and key_typed(validator, key)) and not set(map(type, keys)) <= _KEY_TYPES:
            return None  # refused: a partition key is a string or an integer (the per-line pass says where)
        # numbered 0, 1, ... in the order they first appear, as Groups.join would number them (never joined: no
        # union-find), in one pass: a key seen first gets the number of keys seen before it (map asks len(local)
        # before it calls setdefault on the same key)
        local: dict = {}
        part = array("q", map(local.setdefault, keys, map(len, repeat(local))))
        keyed = {i: [NO_KEY[0] if v is None else (key, v)] for v, i in local.items()}
    else:
        part, partition_keys = array("q"), validator.partition_keys
        try:
            for n, value in enumerate(values, 1):
                part.append(groups.join((partition_keys(value, n) if partition else ()) or NO_KEY))
        except HistoryError:
            return None
        part, keyed = _rooted(groups, part)
    if objs:
        out.first = (1, objs[0]["index"])
    return objs, lines, part, keyed, checked[1], checked[2]


def key_typed(validator: Validator, key: str) -> bool:
    """Whether the values of ``key`` that pass the validator's quick test of the keys every operation may carry
    (``Validator.common``, which :meth:`Validator.check_many` fetched them for) are all strings, integers or absent: a
    partition key's values need no test of their own then."""
    return any(name == key and types is not None and types <= {str, int} for name, types, *_ in validator.common)


def _rooted(groups: Groups, part: array) -> tuple[array, dict[int, list]]:
    """(each operation's local partition, each local partition's keys) once the union-find has joined them."""
    roots, keyed = groups.roots(), {}
    for key, i in groups.ids.items():
        keyed.setdefault(roots[i], []).append(key)
    return array("q", map(roots.__getitem__, part)), keyed


def _scan_lines(lines: list[bytes], validator: Validator, out: Chunk) -> tuple | None:
    """A chunk validated and partitioned line by line: as :func:`_scan_chunk` gives it (without the names' lines and
    the statuses), or None with ``out.error`` naming the first bad line."""
    check, partition_keys = validator.check, validator.partition_keys
    partition = validator.partition
    single = partition[0] if len(partition) == 1 else None
    part, groups, raws, objs = array("q"), Groups(), [], []
    # bound once: the loop below runs once per line
    add_part, add_raw, add_obj, strict = part.append, raws.append, objs.append, validator.strict
    local: dict[Any, int] = {}  # one key's value -> its local partition (the common case: no union needed)
    n = 0
    try:
        for raw in lines:
            n += 1
            if not raw or raw.isspace():
                continue
            try:
                obj, exact = orjson_loads(raw), True
            except orjson.JSONDecodeError:
                obj, exact = loads(raw, n)
            value = check(obj, n) if exact else strict(obj, n)
            if not part:  # the range's first operation (out.first is set once, not tested per line)
                out.first = (n, validator.previous)
            if single is not None:  # the common case, one partition key
                v = value.get(single)
                if v is None or type(v) is str or type(v) is int:
                    p = local.get(v)
                    if p is None:
                        p = local[v] = groups.join(NO_KEY if v is None else ((single, v),))
                else:  # refused: a partition key is a string or an integer
                    p = groups.join(partition_keys(value, n))
            else:
                p = groups.join((partition_keys(value, n) if partition else ()) or NO_KEY)
            add_part(p)
            add_raw(raw)
            add_obj(obj)
    except HistoryError as exc:
        local_line, _, message = str(exc).partition(": ")
        out.error = (int(local_line.split()[1]), message)
        return None
    return objs, raws, *_rooted(groups, part), None, None


def _judge(partitions: list[list[bytes]]) -> tuple[list[list[CheckResult]], dict[int, dict]]:
    """Judge a batch of whole partitions given as raw lines: per checker its results, the operations witnesses name."""
    with paused_gc():
        return _judge_lines(partitions)  # the parsed lines freed before the collector is on again (see scan)


def _judge_lines(partitions: list[list[bytes]]) -> tuple[list[list[CheckResult]], dict[int, dict]]:
    keep = _JOB["keep"]
    parsed = [[loads(raw, 0)[0] for raw in p] for p in partitions]
    if keep is not None:  # only the operations the checkers read (see reads)
        parsed = [[obj for obj in p if is_read(obj, keep)] for p in parsed]
    return _judge_parsed(parsed)


def _judge_parsed(parsed: list[list[dict]], idle: list[bool] | None = None) -> tuple[list[list[CheckResult]], dict[int, dict]]:
    """Judge whole partitions given as validated lines.  A checker of a separable family that judges groups given as
    lines (``check_groups``, its quick paths) gets them as they are when the partitions are its groups (the one
    partition key ``value.group``); any other gets :class:`~vocabulary.History` objects of operations.  A checker
    ``idle`` (it reads none of these operations, :func:`reads`) gets no group: its verdict on an empty history."""
    family, meta, chosen, by_group = _JOB["family"], _JOB["meta"], _JOB["checkers"], _JOB["by_group"]
    histories: list[History] = []
    if not all(by_group):
        ops = [list(map(operation, p)) for p in parsed]
        if _JOB["separable"] or not ops:  # one history of every partition (an empty history has none)
            histories = [History(family, tuple(chain.from_iterable(ops)), meta)]
        else:
            histories = [History(family, tuple(p), meta) for p in ops]
    results = [[_run(c, c.check_groups, [] if idle and idle[i] else parsed)] if grouped else
               [_run(c, c.check, h) for h in histories] for i, (c, grouped) in enumerate(zip(chosen, by_group))]
    named = {i for per in results for r in per for w in r.witnesses for i in w.steps}
    rows = {obj["index"]: _op_json(operation(obj)) for obj in chain.from_iterable(parsed)
            if obj["index"] in named} if named else {}
    return results, rows


def _run(checker, judge, what) -> CheckResult:
    try:
        return judge(what)
    except Exception as exc:  # a checker's own bug is one line, never a traceback, never a verdict
        raise DriftlabError(f"checker {checker.name} failed on a history it accepted: "
                            f"{type(exc).__name__}: {exc}") from None


def _op_json(op: Operation) -> dict:
    return {"index": op.index, "actor": op.actor, "op": op.name, "status": op.status, "start": op.start,
            "end": op.end, "value": op.value}


# ------------------------------------------------------------------ the file (this process)
def identity(f: BinaryIO) -> tuple[int, int, int, int]:
    """What tells a changed file from the one the first pass validated: device, inode, size, modification time."""
    st = os.fstat(f.fileno())
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def read_header(path: Path, max_bytes: int) -> tuple[str, dict, int, int, tuple]:
    """(family, meta, header line number, byte offset after the header, the file's identity) of a regular file."""
    with open_regular(path, max_bytes) as f:
        seen = identity(f)
        n, pos = 0, 0
        for raw in f:
            n += 1
            pos += len(raw)
            if not raw.isspace():
                break
        else:
            raise DriftlabError(f"{path}: empty file (expected a header line, then one line per operation)")
        try:
            family, meta = header(loads(raw, n)[0], f"line {n}")
        except HistoryError as exc:
            raise DriftlabError(f"{path}: {exc}") from None
        return family, meta, n, pos, seen


def read_range(fd: int, start: int, stop: int) -> bytes:
    """The bytes [start, stop) of an open file (fewer at its end), read straight into one buffer: a buffered
    reader's ``seek`` and ``read`` of a 512 KiB chunk filled its 1 MiB buffer first (about 50 us more a chunk).
    A read returns less only at the file's end or past Linux's 2 GiB a call: then it reads on."""
    parts = []
    while start < stop and (part := os.pread(fd, stop - start, start)):
        parts.append(part)
        start += len(part)
    return b"".join(parts)


def line_start(fd: int, pos: int, size: int) -> int:
    """The offset of the first line start after ``pos`` (``size`` if there is none before the end)."""
    while pos < size:
        block = os.pread(fd, 1 << 16, pos)
        if not block:
            break
        newline = block.find(b"\n")
        if newline >= 0:
            return pos + newline + 1
        pos += len(block)
    return size


def ranges(path: Path, start: int, size: int, parts: int) -> list[tuple[int, int]]:
    """[start, size) cut into about ``parts`` byte ranges, each beginning at a line start (found by reading 64 KiB
    at each cut: a buffered reader read 1 MiB at every seek, 50 ms before a million-operation check could start)."""
    cuts = [start]
    with open_regular(path, 2**63) as f:
        fd = f.fileno()
        for i in range(1, parts):
            at = line_start(fd, max(cuts[-1], start + (size - start) * i // parts), size)
            if at < size and at > cuts[-1]:
                cuts.append(at)
    return list(zip(cuts, cuts[1:] + [size]))


def plan_for(path: Path, schemas: dict[str, HistorySchema], max_bytes: int) -> Plan:
    """The header read and checked: its family declares a history format, its meta has the declared shape."""
    family, meta, header_line, body, seen = read_header(path, max_bytes)
    where = f"{path}: line {header_line}"
    if family not in schemas:
        from analysis.checkers import FAMILY_MODULES

        if family in FAMILY_MODULES:
            raise DriftlabError(f"{where}: the {family} family declares no history format (HISTORY in "
                                f"{FAMILY_MODULES[family]}), so its histories cannot be validated")
        raise DriftlabError(f"{where}: family {family!r} is not one of {', '.join(sorted(schemas))}")
    try:
        schemas[family].check_meta(meta)
    except HistoryError as exc:
        raise DriftlabError(f"{where}: {exc}") from None
    return Plan(family, meta, body, header_line, seen)


def settle(path: Path, plan: Plan, chunks: Iterator[Chunk]) -> tuple[list[Chunk], Groups]:
    """The chunks in file order: the first bad line refused (indices increase across chunks too), each chunk's
    local partitions tied to the file's partitions, the operations and undeclared names counted."""
    groups = Groups()
    line, previous, done, deferred = plan.header_line, None, [], groups.deferred.append
    for chunk in chunks:
        if chunk.first is not None:
            first_line, first_index = chunk.first
            if previous is not None and first_index <= previous:
                raise DriftlabError(f"{path}: line {line + first_line}: index: {first_index} does not increase (the "
                                    f"operation before has index {previous}; indices are unique and increasing)")
            previous = chunk.last_index
        if chunk.error:
            raise DriftlabError(f"{path}: line {line + chunk.error[0]}: {chunk.error[1]}")
        line += chunk.lines
        # a partition inside the chunk with one key (the common case) is kept aside, not joined: whether its key
        # shows up anywhere else is asked once, for all of them, by leftovers
        to_global, edges = chunk.to_global, chunk.edges
        for local, keys in chunk.keys.items():
            if local in edges or len(keys) != 1:
                to_global[local] = groups.join(keys)
            else:
                deferred(keys[0])
        for name, count in chunk.unknown.items():
            plan.unknown[name] = plan.unknown.get(name, 0) + count
        plan.operations += len(chunk.part)
        done.append(chunk)
    return done, groups


def leftovers(chunks: list[Chunk], groups: Groups) -> list[list[bytes]] | None:
    """The partitions a chunk could not judge alone, as raw lines in file order: each one that reaches a chunk's
    edge, whole.  None if an inner partition of some chunk turns out to go on in another chunk (its verdicts
    were judged on a part of it): then only a pass over the whole file judges right."""
    if groups.deferred:  # the inner partitions of one key: each key in one chunk only, and in no joined partition
        inner = set(groups.deferred)
        if len(inner) != len(groups.deferred) or not inner.isdisjoint(groups.ids):
            return None
    roots = groups.roots()
    spread = Counter(roots[g] for c in chunks for g in c.to_global.values())
    redo: dict[int, list[bytes]] = {}
    for c in chunks:
        for local, g in c.to_global.items():
            root = roots[g]
            if local in c.edges:
                redo.setdefault(root, []).extend(c.edges[local])
            elif spread[root] > 1:
                return None
    return list(redo.values())


def join_deferred(chunks: list[Chunk], groups: Groups) -> None:
    """Tie the partitions settle kept aside to the file's partitions too (for the pass over the whole file)."""
    for c in chunks:
        for local, keys in c.keys.items():
            if local not in c.to_global:
                c.to_global[local] = groups.join(keys)
    groups.deferred = []


def whole_file_batches(path: Path, plan: Plan, chunks: list[Chunk], groups: Groups,
                       batch: int) -> Iterator[list[list[bytes]]]:
    """The whole file again, as whole partitions in the order they complete, grouped into batches of about
    ``batch`` operations (the pass for histories whose partitions interleave across chunks)."""
    roots = groups.roots()
    part, last = array("q"), {}
    for c in chunks:
        offset = len(part)
        to_root = {local: roots[g] for local, g in c.to_global.items()}
        part.extend(to_root[p] for p in c.part)
        for k in range(offset, len(part)):
            last[part[k]] = k
    open_: dict[int, list[bytes]] = {}
    ready: list[list[bytes]] = []
    size, k = 0, 0
    changed = DriftlabError(f"{path}: changed while it was being checked; no verdict")
    with open_regular(path, 2**63) as f:
        if identity(f) != plan.seen:
            raise changed
        f.seek(plan.body)
        for raw in f:
            if raw.isspace():
                continue
            if k >= plan.operations:
                raise changed
            p = part[k]
            buf = open_.get(p)
            if buf is None:
                buf = open_[p] = []
            buf.append(raw)
            if last[p] == k:
                ready.append(open_.pop(p))
                size += len(buf)
                if size >= batch:
                    yield ready
                    ready, size = [], 0
            k += 1
        if open_ or k != plan.operations or identity(f) != plan.seen:
            raise changed
    if ready:
        yield ready


def merge(name: str, results: list[CheckResult]) -> CheckResult:
    """One checker's results over partitions: the worst verdict, every witness (in the order of the operations they
    name), the summaries' counts added (summaries of one shape, such as "N race pairs: A valid, B invalid, C
    unknown", are summed number by number)."""
    if len(results) == 1:  # named as the registry names it (the agent family's "resume/EO")
        return CheckResult(name, results[0].verdict, results[0].witnesses, results[0].summary)
    verdict = worst(r.verdict for r in results)
    witnesses = tuple(sorted((w for r in results for w in r.witnesses), key=lambda w: w.steps))
    shapes: dict[str, list[list[int]]] = {}
    for r in results:
        shapes.setdefault(re.sub(r"\d+", "#", r.summary), []).append([int(x) for x in re.findall(r"\d+", r.summary)])
    parts = []
    for shape, numbers in shapes.items():
        sums = iter(sum(col) for col in zip(*numbers))
        parts.append(re.sub("#", lambda _: str(next(sums)), shape))
    return CheckResult(name, verdict, witnesses, "; ".join(parts))


@dataclass
class Outcome:
    """What ``driftlab check`` found: the verdict, each checker's result, the operations the witnesses name."""

    path: Path
    plan: Plan
    verdict: Verdict
    results: list[CheckResult]
    named: dict[int, dict]
    partitions: int

    def prose(self) -> str:
        out = []
        for r in self.results:
            out.append(f"{r.checker}: {r.verdict.value}" + (f" - {r.summary}" if r.summary else ""))
            for w in r.witnesses:
                out.append(f"  witness: {w.explanation}")
                out += [f"    {operation(self.named[i]).describe()}" for i in w.steps if i in self.named]
        out.append(f"verdict: {self.verdict.value} ({self.plan.operations} operations in {self.partitions} "
                   f"partition(s), {len(self.results)} checker(s))")
        return "\n".join(out)

    def json(self) -> str:
        return json.dumps({
            "history": str(self.path), "family": self.plan.family, "operations": self.plan.operations,
            "partitions": self.partitions, "passes": self.plan.passes, "verdict": self.verdict.value,
            "checkers": [{"checker": r.checker, "verdict": r.verdict.value, "summary": r.summary,
                          "witnesses": [{"steps": list(w.steps), "explanation": w.explanation,
                                         "operations": [self.named[i] for i in w.steps if i in self.named]}
                                        for w in r.witnesses]} for r in self.results],
        }, indent=2, default=str)


def max_jobs() -> int:
    """The most worker processes ``check`` starts: 4 per core (more only wait, and thousands never start)."""
    return 4 * (os.cpu_count() or 1)


def check(path: Path, names: list[str] | None = None, jobs: int | None = None, allow_unknown: bool = False,
          max_bytes: int = MAX_BYTES, chunk_bytes: int = CHUNK_BYTES, edge: int = EDGE) -> Outcome:
    """Validate ``path`` and judge it partition by partition with ``names`` (default: every checker of its family),
    in ``jobs`` processes (default: one per core for a file over ``POOL_BYTES``, else this process alone)."""
    from analysis.checkers import checkers, schemas

    plan = plan_for(path, schemas(), max_bytes)
    known = checkers(plan.family)
    if not known:
        raise DriftlabError(f"{path}: no checkers for family {plan.family!r}")
    unknown = [c for c in names or () if c not in known]
    if unknown:
        raise DriftlabError(f"--checker {unknown[0]!r}: not a {plan.family} checker ({', '.join(known)})")
    chosen = list(names or known)
    size = plan.seen[2]
    spans = ranges(path, plan.body, size, -(-(size - plan.body) // chunk_bytes)) if size > plan.body else []
    if jobs is None:
        jobs = (os.cpu_count() or 1) if size > POOL_BYTES else 1
    if jobs > max_jobs():
        raise DriftlabError(f"--jobs {jobs}: at most {max_jobs()} worker processes on this machine "
                            f"(4 per core, {os.cpu_count() or 1} cores)")
    args = (plan.family, plan.meta, chosen, allow_unknown, max_bytes, edge)
    per_checker: list[list[CheckResult]] = [[] for _ in chosen]
    named: dict[int, dict] = {}

    def collect(results: list[list[CheckResult]], ops: dict[int, dict]) -> None:
        for mine, got in zip(per_checker, results):
            mine.extend(got)
        named.update(ops)

    with _pool(jobs, args) if jobs > 1 else nullcontext() as pool:
        if pool is None:
            _setup(*args)
            scanned: Iterator[Chunk] = (scan(path, a, b) for a, b in spans)
        else:  # the workers are forked as the tasks are handed out, here: with the collector on, as they need it
            scanned = pool.map(scan, *zip(*[(path, a, b) for a, b in spans]), chunksize=MAP_BATCH)
        # the main process paused too while it gathers the chunks: they hold no cycles, and the collector walked
        # every chunk kept so far again and again (a quarter to a third of its CPU in a million-operation check)
        with paused_gc():
            chunks, groups = settle(path, plan, scanned)
            failed = next((c.failure for c in chunks if c.failure), None)
            if failed:
                raise DriftlabError(failed)
            rest = leftovers(chunks, groups)
            plan.passes = 1 if rest is not None else 2
            if rest is None:  # partitions interleave across chunks: judge the whole file again, partition by partition
                join_deferred(chunks, groups)
                work: Iterator[list[list[bytes]]] = whole_file_batches(path, plan, chunks, groups, BATCH)
            else:
                for got, ops in [(c.results, c.named) for c in chunks]:  # (no loop name left holding a chunk)
                    collect(got, ops)
                work = (rest[i:i + 64] for i in range(0, len(rest), 64))
            if not chunks:
                work = iter([[]])  # a history without operations: the checkers' verdict on an empty one
            if pool is None:
                for b in work:
                    collect(*_judge(b))
            else:
                pending: deque = deque()
                for b in work:
                    pending.append(pool.submit(_judge, b))
                    if len(pending) >= 2 * jobs:
                        collect(*pending.popleft().result())
                while pending:
                    collect(*pending.popleft().result())
            plan.partitions = len(set(groups.roots()) if chunks else ()) + len(groups.deferred)
            results = [merge(name, rs) for name, rs in zip(chosen, per_checker)]
            # freed while the collector is still paused: else its first collection walks them all once more
            del chunks, groups, rest, work, scanned
    return Outcome(path, plan, worst(r.verdict for r in results), results, named, plan.partitions)


def _pool(jobs: int, args: tuple):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork"), initializer=_setup,
                               initargs=args)


if __name__ == "__main__":  # `python -m runners.check --readme`: regenerate the docs' per-family history tables
    import sys

    from analysis.checkers import schemas
    from vocabulary.schema import with_tables

    if sys.argv[1:] != ["--readme"]:
        sys.exit("usage: python -m runners.check --readme")
    readme = Path(__file__).resolve().parent.parent / "docs" / "histories.md"
    readme.write_text(with_tables(readme.read_text(encoding="utf-8"), schemas()), encoding="utf-8")
