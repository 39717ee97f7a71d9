"""``driftlab check``: validate a history file, then judge it partition by partition, streaming.

A history may be anyone's (the lab's public interface), and large: a
million operations.  So the file is read twice, as a stream, and never held
whole:

1. **validate** — the file must be a regular file (a FIFO, a device or a
   folder is refused before anything is read) under ``max_bytes``; every
   line is parsed and checked against the family's declared format
   (:mod:`vocabulary.schema`): a malformed history is one line naming the
   line number and the field, exit 2, and no checker ever runs.  The pass
   also ties each operation to its **partition** (Porcupine's
   ``Partition``: the operations that share a value of the family's
   partition keys, e.g. one race pair's ``value.group``; for resume the
   runs of one group), keeping only a small integer per operation and the
   last operation of each partition.
2. **judge** — the file is read again; a partition is handed to the checkers
   as soon as its last operation has been read, so memory grows with the
   partitions open at once (for the lab's histories, whose partitions are
   contiguous, the largest one) and the batches in flight, not with the file.
   Partitions are judged in batches, in this process or in ``jobs`` worker
   processes; for a family whose checkers split by group themselves
   (``HistorySchema.separable``) a batch is one history of several
   partitions, otherwise each partition is a history of its own.

Each checker's results over the batches are merged: the worst verdict,
every witness, the summaries' counts added.  A history whose partitions
are judged apart gets the verdicts the whole file gets
(``tests/test_check.py`` holds it to that on the lab's own histories).
"""
from __future__ import annotations

import gc
import json
import os
import re
import stat
from array import array
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import orjson

from runners.experiment import DriftlabError
from vocabulary import CheckResult, History, HistoryError, Operation, Verdict, worst
from vocabulary.schema import HistorySchema, Validator, header, operation

MAX_BYTES = 4 * 2**30  # a history file larger than this is refused (--max-bytes)
BATCH = 20_000  # operations per batch handed to the checkers
NONE = -1  # the partition of the operations that carry no partition key


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
    """What the validating pass learned: the header, the partition of every operation, each partition's last."""

    family: str
    meta: dict
    body: int  # byte offset of the first line after the header
    header_line: int
    seen: tuple  # the file's identity (device, inode, size, mtime): the second pass reads that file or refuses
    operations: int = 0
    part: array = field(default_factory=lambda: array("q"))  # operation ordinal -> its partition
    last: dict[int, int] = field(default_factory=dict)  # partition -> ordinal of its last operation
    unknown: dict[str, int] = field(default_factory=dict)


@dataclass
class Chunk:
    """What one worker found in a byte range of the file (pass 1): local partitions, first and last index."""

    lines: int = 0  # every line of the range, blank ones too
    first: tuple[int, int] | None = None  # (local line, index) of the range's first operation
    last_index: int | None = None
    part: array = field(default_factory=lambda: array("q"))  # per operation: a local partition id (NONE: no key)
    keys: dict[int, list] = field(default_factory=dict)  # local partition id -> the key values that make it
    unknown: dict[str, int] = field(default_factory=dict)
    error: tuple[int, str] | None = None  # (local line, message without the line)


class Groups:
    """Union-find over partition keys: operations that share a key (transitively) are one partition."""

    def __init__(self) -> None:
        self.ids: dict[tuple, int] = {}
        self.parent: list[int] = []

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


def scan(path: Path, start: int, stop: int, family: str, allow_unknown: bool, max_bytes: int) -> Chunk:
    """Validate the lines of ``path`` in the byte range [start, stop) (both at line starts)."""
    from analysis.checkers import schemas

    others = schemas()
    schema = others[family]
    out = Chunk()
    validator = Validator(schema, others, allow_unknown)
    check, partition_keys, keyed = validator.check, validator.partition_keys, bool(schema.partition)
    single = schema.partition[0] if len(schema.partition) == 1 else None
    part, groups = out.part, Groups()
    n = 0
    with open_regular(path, max_bytes) as f, paused_gc():
        f.seek(start)
        pos = start
        try:
            for raw in f:
                n += 1
                pos += len(raw)
                if raw.isspace():
                    if pos >= stop:
                        break
                    continue
                obj, exact = loads(raw, n)
                value = check(obj, n) if exact else validator.strict(obj, n)
                if out.first is None:
                    out.first = (n, validator.previous)
                if single is not None:  # the common case, one partition key
                    v = value.get(single)
                    keys = () if v is None else ((single, v),) if type(v) is str or type(v) is int else \
                        partition_keys(value, n)
                else:
                    keys = partition_keys(value, n) if keyed else ()
                if not keys:
                    part.append(NONE)
                else:
                    part.append(groups.join(keys))
                if pos >= stop:
                    break
        except HistoryError as exc:
            local, _, message = str(exc).partition(": ")
            out.error = (int(local.split()[1]), message)
            return out
    out.lines, out.last_index, out.unknown = n, (validator.previous if out.first else None), validator.unknown
    roots = groups.roots()
    for key, i in groups.ids.items():
        out.keys.setdefault(roots[i], []).append(key)
    for k, p in enumerate(part):
        if p != NONE:
            part[k] = roots[p]
    return out


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


def ranges(path: Path, start: int, size: int, parts: int) -> list[tuple[int, int]]:
    """[start, size) cut into about ``parts`` byte ranges, each beginning at a line start."""
    cuts = [start]
    with open_regular(path, 2**63) as f:
        for i in range(1, parts):
            f.seek(max(cuts[-1], start + (size - start) * i // parts))
            f.readline()
            if f.tell() < size and f.tell() > cuts[-1]:
                cuts.append(f.tell())
    return list(zip(cuts, cuts[1:] + [size]))


def validate(path: Path, schemas: dict[str, HistorySchema], allow_unknown: bool, max_bytes: int,
             jobs: int = 1, pool=None) -> Plan:
    """Pass 1: every line checked against the family's declaration, every operation tied to its partition."""
    family, meta, header_line, body, seen = read_header(path, max_bytes)
    size = seen[2]
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
    plan = Plan(family, meta, body, header_line, seen)
    args = (family, allow_unknown, max_bytes)
    spans = ranges(path, body, size, max(1, jobs) * 4 if pool else 1) if size > body else []
    chunks = (pool.map(scan, *zip(*[(path, a, b, *args) for a, b in spans])) if pool and spans
              else (scan(path, a, b, *args) for a, b in spans))
    groups = Groups()
    line, previous = header_line, None
    locals_: list[tuple[Chunk, dict[int, int]]] = []
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
        to_global = {}
        for local, keys in chunk.keys.items():
            to_global[local] = groups.join(keys)
        for name, count in chunk.unknown.items():
            plan.unknown[name] = plan.unknown.get(name, 0) + count
        locals_.append((chunk, to_global))
    roots = groups.roots()
    part, last = plan.part, plan.last
    for chunk, to_global in locals_:
        offset = len(part)
        part.extend(chunk.part)
        for k in range(offset, len(part)):
            p = part[k]
            if p != NONE:
                p = part[k] = roots[to_global[p]]
            last[p] = k
        chunk.part = array("q")
    plan.operations = len(part)
    return plan


# ------------------------------------------------------------------ judging (in this process or a worker)
_JOB: dict[str, Any] = {}


def _setup(family: str, meta: dict, names: list[str], separable: bool) -> None:
    from analysis.checkers import checkers

    known = checkers(family)
    _JOB.update(family=family, meta=meta, checkers=[known[n] for n in names], separable=separable)


def _judge(partitions: list[list[bytes]]) -> tuple[list[list[CheckResult]], dict[int, dict]]:
    """Judge a batch of whole partitions: per checker its results, and the operations its witnesses name."""
    with paused_gc():
        return _judge_batch(partitions)


def _judge_batch(partitions: list[list[bytes]]) -> tuple[list[list[CheckResult]], dict[int, dict]]:
    family, meta, chosen = _JOB["family"], _JOB["meta"], _JOB["checkers"]
    parsed = [[operation(loads(raw, 0)[0]) for raw in p] for p in partitions]
    if _JOB["separable"] or not parsed:  # one history of every partition (an empty history has none)
        histories = [History(family, tuple(op for p in parsed for op in p), meta)]
    else:
        histories = [History(family, tuple(p), meta) for p in parsed]
    results = [[_run(c, h) for h in histories] for c in chosen]
    named = {i for per in results for r in per for w in r.witnesses for i in w.steps}
    ops = {op.index: _op_json(op) for p in parsed for op in p if op.index in named}
    return results, ops


def _run(checker, history: History) -> CheckResult:
    try:
        return checker.check(history)
    except Exception as exc:  # a checker's own bug is one line, never a traceback, never a verdict
        raise DriftlabError(f"checker {checker.name} failed on a history it accepted: "
                            f"{type(exc).__name__}: {exc}") from None


def _op_json(op: Operation) -> dict:
    return {"index": op.index, "actor": op.actor, "op": op.name, "status": op.status, "start": op.start,
            "end": op.end, "value": op.value}


def batches(path: Path, plan: Plan, batch: int) -> Iterator[list[list[bytes]]]:
    """Pass 2: whole partitions, in the order they complete, grouped into batches of about ``batch`` operations."""
    part, last = plan.part, plan.last
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
    """One checker's results over partitions: the worst verdict, every witness, the summaries' counts added
    (summaries of one shape, such as "N race pairs: A valid, B invalid, C unknown", are summed number by number)."""
    if len(results) == 1:  # named as the registry names it (the agent family's "resume/EO")
        return CheckResult(name, results[0].verdict, results[0].witnesses, results[0].summary)
    verdict = worst(r.verdict for r in results)
    witnesses = tuple(w for r in results for w in r.witnesses)
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
            "partitions": self.partitions, "verdict": self.verdict.value,
            "checkers": [{"checker": r.checker, "verdict": r.verdict.value, "summary": r.summary,
                          "witnesses": [{"steps": list(w.steps), "explanation": w.explanation,
                                         "operations": [self.named[i] for i in w.steps if i in self.named]}
                                        for w in r.witnesses]} for r in self.results],
        }, indent=2, default=str)


def check(path: Path, names: list[str] | None = None, jobs: int = 1, allow_unknown: bool = False,
          max_bytes: int = MAX_BYTES, batch: int = BATCH) -> Outcome:
    """Validate ``path``, then judge it partition by partition with ``names`` (default: every checker of its family)."""
    from analysis.checkers import checkers, schemas

    declared = schemas()
    if jobs > 1:
        with _pool(jobs) as pool:
            plan = validate(path, declared, allow_unknown, max_bytes, jobs, pool)
    else:
        plan = validate(path, declared, allow_unknown, max_bytes)
    known = checkers(plan.family)
    if not known:
        raise DriftlabError(f"{path}: no checkers for family {plan.family!r}")
    unknown = [c for c in names or () if c not in known]
    if unknown:
        raise DriftlabError(f"--checker {unknown[0]!r}: not a {plan.family} checker ({', '.join(known)})")
    chosen = list(names or known)
    args = (plan.family, plan.meta, chosen, declared[plan.family].separable)
    per_checker: list[list[CheckResult]] = [[] for _ in chosen]
    named: dict[int, dict] = {}

    def collect(done: tuple[list[list[CheckResult]], dict[int, dict]]) -> None:
        results, ops = done
        for mine, got in zip(per_checker, results):
            mine.extend(got)
        named.update(ops)

    work = batches(path, plan, batch) if plan.operations else iter([[]])
    if jobs <= 1:
        _setup(*args)
        for b in work:
            collect(_judge(b))
    else:
        with _pool(jobs, _setup, args) as pool:
            pending: deque = deque()
            for b in work:
                pending.append(pool.submit(_judge, b))
                if len(pending) >= 2 * jobs:
                    collect(pending.popleft().result())
            while pending:
                collect(pending.popleft().result())
    results = [merge(name, rs) for name, rs in zip(chosen, per_checker)]
    return Outcome(path, plan, worst(r.verdict for r in results), results, named, len(plan.last))


def _pool(jobs: int, initializer=None, initargs=()):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork"), initializer=initializer,
                               initargs=initargs)


if __name__ == "__main__":  # `python -m runners.check --readme`: regenerate the README's per-family history tables
    import sys

    from analysis.checkers import schemas
    from vocabulary.schema import with_tables

    if sys.argv[1:] != ["--readme"]:
        sys.exit("usage: python -m runners.check --readme")
    readme = Path(__file__).resolve().parent.parent / "README.md"
    readme.write_text(with_tables(readme.read_text(encoding="utf-8"), schemas()), encoding="utf-8")
