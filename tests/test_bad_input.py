"""The bad-input contract, everywhere: one line on stderr naming the problem, exit code 2, nothing
written, nothing already recorded lost (issue "Trust", §6; issue 16, §3-§5 and §8).

Every row is one bad input.  A row's ``setup`` builds what the input needs inside ``tmp_path``; the test
then snapshots every file under ``tmp_path`` and asserts the command changed none of them.  The planted
bug each row catches is the one it names: a traceback, a partial table, a silently merged schema, a
second run trampling the first.  The bug classes of issue 16 have their own sections:

- *a plug-in that fails is never a result* (§3): a mechanism of each protocol (revalidation ``validate``,
  isolation ``resolve``, resume ``resume``) that raises, returns the wrong type, exits its process or
  hangs: one line naming the mechanism and the cell, exit 2, no record of the failing cell (the run
  folder may hold the cells finished before it, nothing else changes);
- *nothing written before the last check* (§4): resume references to a graph, a node or a runtime that
  does not exist, a runtime that supports no backend of the run, an unreachable Dask scheduler, existing
  records that cannot be read: refused before the run folder, ``run.json`` or ``.lock`` exist;
- *flags that do not apply, impossible sizes* (§5): refused when ignoring would mislead, else one note
  (exit 0); sizes from ``--rounds``, a graph's ``work_ms`` and ``--jobs`` refused with the estimate;
- *odd run folders* (§5): a dangling or looping ``--out`` link, ``run.json`` not an object, a truncated
  ``provenance.json``, a file where ``records/<experiment>`` or ``tables`` should be, a folder where
  ``report.md`` should be, a Parquet column of the wrong type.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from runners.cli import main

REPO = Path(__file__).resolve().parent.parent
REFUND = (REPO / "scenarios" / "revalidation" / "workloads" / "refund.toml").read_text()
AGENT = (REPO / "scenarios" / "agent" / "refund_agent.toml").read_text().replace('name = "refund_agent"',
                                                                                  'name = "agent_bad"')


RESUME_CELL = ('family = "resume"\nkind = "cell"\nname = "bad_cell"\noperation = "replay"\ncrash_point = "-"\n'
               '[[steps]]\ncall = "start"\nrun = "a"\n')


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def scenario(tmp: Path, text: str | bytes) -> list[str]:
    folder = tmp / "scenarios"
    folder.mkdir(exist_ok=True)
    path = folder / "bad.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return ["--scenario-dir", str(folder)]


def refund_with(old: str, new: str, name: str = "refund_bad") -> str:
    text = REFUND.replace('name = "refund"', f'name = "{name}"')
    assert old in text, old
    return text.replace(old, new)


_RUN_CACHE: list[Path] = []
RUN_ARGS = ["reproduce", "--only", "revalidation_outcomes", "--repetitions", "1", "--jobs", "1", "--workloads", "refund"]


def a_run(tmp: Path) -> Path:
    """A finished tiny run folder (revalidation_outcomes, 1 repetition per cell), built once per session and
    copied (its identity does not depend on where it lives)."""
    if not _RUN_CACHE:
        cache = Path(tempfile.mkdtemp(prefix="driftlab-bad-input-")) / "run"
        assert main([*RUN_ARGS, "--out", str(cache), "--quiet"]) == 0
        _RUN_CACHE.append(cache)
    run = tmp / "run"
    shutil.copytree(_RUN_CACHE[0], run, ignore=shutil.ignore_patterns(".lock"))
    return run


def records_dir(run: Path) -> Path:
    return run / "records" / "revalidation_outcomes"


def plant(run: Path, name: str, content: bytes) -> None:
    (records_dir(run) / name).write_bytes(content)


def other_schema(run: Path) -> None:
    first = sorted(records_dir(run).glob("*.parquet"))[0]
    frame = pd.read_parquet(first).rename(columns={"outcome": "verdict"})
    frame.to_parquet(records_dir(run) / "zz_other.parquet", index=False)


def truncated(run: Path) -> None:
    first = sorted(records_dir(run).glob("*.parquet"))[0]
    plant(run, "zz_truncated.parquet", first.read_bytes()[:40])


def read_only(path: Path) -> None:
    path.chmod(0o555)


def plugin(tmp: Path, source: str, module: str) -> None:
    (tmp / f"{module}.py").write_text(source)


# --- issue 16 §3: plug-ins of each protocol that fail in each way (a subclass of a lab mechanism, one method broken)
PROTOCOLS = {  # family -> (base module, base class, the method's signature, the run it fails in)
    "revalidation": ("mechanisms.revalidation.atr", "ATR", "validate(self, txn, store)",
                     ["reproduce", "--only", "revalidation_outcomes", "--repetitions", "1", "--jobs", "1", "--workloads", "refund"]),
    "isolation": ("mechanisms.isolation.ssi", "SSI", "resolve(self, manifest, identity, registry)",
                  ["reproduce", "--only", "isolation_levels", "--jobs", "1"]),
    "resume": ("mechanisms.resume.sequencer", "Sequencer", "resume(self, run_id, value, checkpoint_id=None)",
               ["reproduce", "--only", "resume_faults", "--repetitions", "1", "--jobs", "1"]),
}
FAILURES = {  # how the method fails -> (its body, what the one line says)
    "raises": ("raise ValueError('boom in the plug-in')", "ValueError: boom in the plug-in"),
    "wrong-return": ("return 'KEEP'", "returned str 'KEEP'"),
    "exits": ("os._exit(3)", "code 3"),
    "hangs": ("time.sleep(3600)", "time limit of 2 s"),
}


def failing_plugin(family: str, failure: str):
    module, base, signature, _ = PROTOCOLS[family]
    name = f"{family}_{failure.replace('-', '_')}"
    source = (f"import os, time\nfrom {module} import {base}\n\nclass Bad({base}):\n"
              f"    def {signature}:\n        {FAILURES[failure][0]}\n")
    return lambda t: plugin(t, source, name)


SCALING = ["reproduce", "--only", "revalidation_scaling", "--jobs", "1"]  # a revalidation plug-in timed in a child


def plugin_rows() -> list[tuple]:
    rows = []
    for label, (family, argv) in [*((f, (f, p[3])) for f, p in PROTOCOLS.items()),
                                  ("revalidation-scaling", ("revalidation", SCALING))]:
        for failure, (_, says) in FAILURES.items():
            name = f"{family}_{failure.replace('-', '_')}"
            rows.append((f"plugin-{label}-{failure}", failing_plugin(family, failure),
                         [*argv, "--mechanisms", f"{name}:Bad", "--out", "{run}",
                          *(["--cell-timeout", "2"] if failure == "hangs" else [])],
                         (f"mechanism {name}:Bad", says), {"writes": "run"}))
    return rows


# --- issue 16 §4: resume scenario references, checked when the files load (the line names the file)
def resume_file(tmp: Path, name: str, text: str) -> list[str]:
    folder = tmp / "scenarios"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.toml").write_text('family = "resume"\n' + text)
    return ["--scenario-dir", str(folder)]


CELL = '''kind = "cell"
name = "my_cell"
graph = "{graph}"
operation = "resume"
crash_point = "after_effect"
{extra}
[[steps]]
call = "start"
run = "a"

[[steps]]
call = "resume"
run = "a"
value = "yes"
crash = "after_effect"
node = "{node}"
'''


def cell(graph: str = "approval", node: str = "act", extra: str = ""):
    return lambda t: resume_file(t, "my_cell", CELL.format(graph=graph, node=node, extra=extra))


HUGE_GRAPH = '''kind = "graph"
name = "huge"
[[nodes]]
name = "prepare"
work_ms = 1e9
[[nodes]]
name = "approve"
interrupt = true
[[nodes]]
name = "act"
'''


def postgres_only_runtime(t: Path) -> None:
    plugin(t, "from mechanisms.resume.naive import Naive\n\nclass PgOnly(Naive):\n    backends = ('postgres',)\n", "pg_only")


# --- issue 16 §5: odd run folders
def replace_with_file(path: Path) -> None:
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    path.write_text("not a folder\n")


def wrong_column_type(run: Path) -> None:
    last = sorted(records_dir(run).glob("*.parquet"))[-1]
    frame = pd.read_parquet(last)
    frame["repetition"] = frame["repetition"].astype(str)
    frame.to_parquet(last, index=False)


RERUN = [*RUN_ARGS, "--out", "{run}"]


# --- histories for `driftlab check` (issue 16 §1): one small valid history per family, and one field broken per row
def op(index: int, name: str, value: dict, status: str = "ok", actor: str = "a", start=0.0, end=0.0) -> dict:
    return {"index": index, "actor": actor, "op": name, "status": status, "start": start, "end": end, "value": value}


GRAPH = {"name": "approval", "nodes": [{"name": "prepare", "effects": ["reserve"]}, {"name": "approve", "interrupt": True},
                                       {"name": "act", "effects": ["charge"]}]}
BASE = {
    "revalidation": ({}, [op(0, "setup", {"group": 1, "state": {"amount": 80, "refunds": 0, "refund_limit": 100,
                                                                 "refunds_enabled": 1}}),
                          op(1, "commit", {"group": 1, "target_token": 0}, actor="w1", start=1.0, end=2.0),
                          op(2, "commit", {"group": 1, "target_token": 0}, "fail", actor="w2", start=1.0, end=2.0),
                          op(3, "audit", {"group": 1, "state": {"refunds": 1}}, start=3.0, end=3.0)]),
    "isolation": ({"contracts": ["index:docs@1 requires model:embed@1"], "versions": {"model:embed": [1, 2]}},
                  [op(1, "start", {"workflow": "T1"}), op(2, "resolve", {"workflow": "T1", "identity": "model:embed",
                                                                         "version": 1}),
                   op(3, "spawn", {"workflow": "T1", "child": "T1.c", "relation": "child"}),
                   op(4, "resolve", {"workflow": "T1.c", "identity": "model:embed", "version": 1})]),
    "resume": ({"graph": GRAPH},
               [op(0, "start", {"run": "r", "op": "r/start#1", "group": "g", "state": "parked"}, start=1.0, end=2.0),
                op(1, "checkpoint", {"run": "r", "step": 1, "values": {}, "created": 1.5, "parked": True}),
                op(2, "trace", {"run": "r", "step": 0, "kind": "node", "node": "prepare", "op": "r/start#1"})]),
}
DELETE = object()


def history(family: str, line: int | None = None, field: str = "", new=DELETE, *, head: dict | None = None,
            raw: str | None = None, name: str = "h.jsonl"):
    """A setup writing ``family``'s base history with ``field`` (``value.x`` or a top-level key) of line ``line``
    set to ``new`` (DELETE: removed), the header replaced by ``head``, or line ``line`` replaced by ``raw``."""
    def setup(tmp: Path) -> None:
        meta, ops = BASE[family]
        rows = [head if head is not None else {"history": 1, "family": family, "meta": meta}] + copy.deepcopy(ops)
        texts = [json.dumps(r) for r in rows]
        if line is not None and field:
            target = rows[line - 1]
            *path, key = field.split(".")
            for part in path:
                target = target[part]
            if new is DELETE:
                del target[key]
            else:
                target[key] = new
            texts[line - 1] = json.dumps(rows[line - 1])
        if raw is not None:
            texts[line - 1] = raw
        (tmp / name).write_text("\n".join(texts) + "\n")
    return setup


def check_row(name: str, setup, message: str, *extra: str) -> tuple:
    return (name, setup, ["check", "{tmp}/h.jsonl", *extra], message)


# (id, setup(tmp) -> extra args or None, argv (with {tmp}, {run}), text(s) the one line must contain
#  [, {"code": expected exit code (2), "writes": the only folder under tmp the command may add files to}])
ROWS = [
    # --- scenario files
    ("not-utf8", lambda t: scenario(t, b"name = \"x\xff\"\n"), ["reproduce"], "not UTF-8"),
    ("oracle-maybe", lambda t: scenario(t, refund_with('oracle = "BLOCK"', 'oracle = "MAYBE"')), ["reproduce"], "MAYBE"),
    ("validator-version-text", lambda t: scenario(t, refund_with('severity = "REPLAN"', 'severity = "REPLAN"\nvalidator_version = "abc"')),
     ["reproduce"], "validator_version"),
    ("premises-not-tables", lambda t: scenario(t, 'family = "revalidation"\nname = "x"\nreads = []\npremises = [1, 2]\n[objects.a]\nb = 1\n'),
     ["reproduce"], "premises"),
    ("blocking-is-5", lambda t: scenario(t, refund_with("[mutations.blocking]\n", "[mutations.blocking_old]\n").replace(
        "[mutations.irrelevant]", "[mutations]\nblocking = 5\n\n[mutations.irrelevant]")), ["reproduce"], "blocking"),
    ("list-in-reads", lambda t: scenario(t, refund_with('"order.id", "order.amount"', '["order.id"], "order.amount"')),
     ["reproduce"], "reads"),
    ("number-vs-string", lambda t: scenario(t, refund_with('rule = "order.amount <= policy.refund_limit"',
                                                            'rule = "order.amount <= policy.currency"')), ["reproduce"], "amount"),
    ("no-family", lambda t: scenario(t, REFUND.replace('family = "revalidation"\n', "").replace('name = "refund"', 'name = "x"')),
     ["reproduce"], "family"),
    ("resume-replay-not-addressed", lambda t: scenario(t, RESUME_CELL + '[[steps]]\ncall = "replay"\nrun = "a"\n'),
     ["reproduce", "--only", "resume_faults"], "a replay needs at"),
    ("resume-update-without-key", lambda t: scenario(t, RESUME_CELL + '[[steps]]\ncall = "update"\nrun = "a"\nvalue = "x"\n'),
     ["reproduce", "--only", "resume_faults"], "an update needs a key"),
    # --- output folder
    ("agent-oracle-typed-in", lambda t: scenario(t, AGENT.replace('value = 50\nexpect = "BLOCK"', 'value = 50\nexpect = "KEEP"')),
     ["reproduce", "--only", "agent"], "changes.blocking.expect: declared KEEP but the declared premises give BLOCK"),
    ("out-is-a-file", lambda t: (t / "afile").write_text("x"), ["reproduce", "--out", "{tmp}/afile"], "is a file"),
    ("out-under-a-file", lambda t: (t / "afile").write_text("x"), ["reproduce", "--out", "{tmp}/afile/run"], "is a file"),
    ("out-read-only", lambda t: ((t / "ro").mkdir(), read_only(t / "ro")), ["reproduce", "--out", "{tmp}/ro"], "read-only"),
    ("out-under-read-only", lambda t: ((t / "ro").mkdir(), read_only(t / "ro")), ["reproduce", "--out", "{tmp}/ro/run"], "read-only"),
    ("out-empty", None, ["reproduce", "--out", ""], "--out is empty"),
    ("out-name-too-long", None, ["reproduce", "--out", "{tmp}/" + "x" * 300], "is 300 bytes (at most 255"),
    ("cell-timeout-huge", None, ["reproduce", "--only", "resume_faults", "--out", "{tmp}/run", "--cell-timeout", "1e308"],
     "--cell-timeout: must be at most 2592000 seconds"),
    ("agent-amount-a-string", lambda t: scenario(t, AGENT.replace("amount = 80", 'amount = "80"')),
     ["reproduce", "--only", "agent"], "premises[0]: order.amount <= policy.refund_limit compares str '80' with int 100"),
    ("agent-change-value-a-string", lambda t: scenario(t, AGENT.replace("value = 50\n", 'value = "50"\n', 1)),
     ["reproduce", "--only", "agent"], ("value: '50' (str) cannot be compared",)),
    ("out-not-a-run", lambda t: ((t / "full").mkdir(), (t / "full" / "x").write_text("x")), ["reproduce", "--out", "{tmp}/full"],
     "holds no driftlab run"),
    # --- analyzing records
    ("analyze-garbage", lambda t: plant(a_run(t), "zz_garbage.parquet", b"this is not parquet"), ["analyze", "{run}"], "zz_garbage"),
    ("analyze-truncated", lambda t: truncated(a_run(t)), ["analyze", "{run}"], "zz_truncated"),
    ("analyze-empty-file", lambda t: plant(a_run(t), "zz_empty.parquet", b""), ["analyze", "{run}"], "empty file"),
    ("analyze-other-schema", lambda t: other_schema(a_run(t)), ["analyze", "{run}"], "zz_other"),
    ("analyze-read-only", lambda t: read_only(a_run(t)), ["analyze", "{run}"], "not writable"),
    ("analyze-empty-experiment", lambda t: (records_dir(a_run(t)).parent / "revalidation_races").mkdir(), ["analyze", "{run}"],
     "holds no records"),
    ("analyze-unknown-experiment", lambda t: (records_dir(a_run(t)).parent / "made_up").mkdir(), ["analyze", "{run}"], "made_up"),
    ("analyze-not-a-run", None, ["analyze", "{tmp}"], "not a run folder"),
    # --- plug-in mechanisms
    ("plugin-syntax-error", lambda t: plugin(t, "class Bad(:\n", "bad_syntax"), ["reproduce", "--mechanisms", "bad_syntax:Bad"], "syntax error"),
    ("plugin-raises-on-import", lambda t: plugin(t, "raise RuntimeError('boom at import')\n", "bad_import"),
     ["reproduce", "--mechanisms", "bad_import:Bad"], "boom at import"),
    ("plugin-no-protocol", lambda t: plugin(t, "class Bad:\n    pass\n", "bad_protocol"), ["reproduce", "--mechanisms", "bad_protocol:Bad"],
     "implements no family's protocol"),
    ("plugin-unknown-name", None, ["reproduce", "--mechanisms", "ATR,Oracle"], "unknown mechanism 'Oracle'"),
    # --- issue 16 §3: a plug-in that fails is never a result (revalidation, isolation, resume x raises, wrong
    # return, exits, hangs); the cells finished before the failing one are kept in the run folder
    *plugin_rows(),
    ("plugin-sys-exit", lambda t: plugin(t, "import sys\nfrom mechanisms.revalidation.atr import ATR\n\nclass Bad(ATR):\n"
                                            "    def validate(self, txn, store):\n        sys.exit(4)\n", "exits_politely"),
     [*PROTOCOLS["revalidation"][3], "--mechanisms", "exits_politely:Bad", "--out", "{run}"],
     ("mechanism exits_politely:Bad", "sys.exit(4)"), {"writes": "run"}),
    # --- issue 16 §4: nothing written before the last check
    ("resume-cell-no-graph", cell(graph="nograph"), ["reproduce", "--only", "resume_faults", "--out", "{run}"],
     ("my_cell.toml: graph", "'nograph'")),
    ("resume-cell-no-crash-node", cell(node="nonode"), ["reproduce", "--only", "resume_faults", "--out", "{run}"],
     ("my_cell.toml: steps[1].node", "'nonode'")),
    ("resume-cell-no-invalid-node", cell(extra='invalid_node = "zz"'), ["reproduce", "--only", "resume_faults", "--out", "{run}"],
     ("my_cell.toml: invalid_node", "'zz'")),
    ("resume-switch-no-runtime", lambda t: resume_file(t, "my_switch", 'kind = "switch"\nname = "my_switch"\nruntime = "nosuch"\n'),
     ["reproduce", "--only", "resume_independence", "--out", "{run}"], ("my_switch.toml: runtime", "'nosuch'")),
    ("resume-concurrency-no-graph", lambda t: resume_file(t, "my_grid", (REPO / "scenarios" / "resume" / "concurrency.toml").read_text()
                                                          .replace('family = "resume"\n', "").replace('name = "', 'name = "my_').replace(
                                                              'graph = "approval_slow"', 'graph = "nograph"')),
     ["reproduce", "--only", "resume_faults", "--out", "{run}"], ("my_grid.toml: graph", "'nograph'")),
    ("runtime-supports-no-backend-of-the-run", postgres_only_runtime,
     ["reproduce", "--only", "resume_faults", "--mechanisms", "pg_only:PgOnly", "--out", "{run}"], "supports only postgres"),
    ("dask-scheduler-unreachable", None, ["reproduce", "--only", "isolation_levels", "--executor", "dask",
                                          "--scheduler", "tcp://127.0.0.1:9", "--out", "{run}"], "--scheduler tcp://127.0.0.1:9"),
    ("rerun-records-unreadable", lambda t: plant(a_run(t), "zz_garbage.parquet", b"not parquet"), RERUN, "zz_garbage"),
    # --- issue 16 §5: flags that do not apply (refused where ignoring would mislead, else said), sizes
    ("mechanisms-of-no-selected-family", None, ["reproduce", "--only", "isolation_levels", "--mechanisms", "ATR"],
     "would mislead"),
    ("workloads-without-revalidation", None, ["reproduce", "--only", "isolation_levels", "--workloads", "refund", "--out", "{run}"],
     "--workloads names revalidation workloads", {"code": 0, "writes": "run"}),
    ("backend-for-no-backend-experiment", None, ["reproduce", "--only", "isolation_levels", "--backend", "postgres", "--out", "{run}"],
     "--backend postgres: none of the selected experiments", {"code": 0, "writes": "run"}),
    ("scheduler-without-dask", None, ["reproduce", "--only", "isolation_levels", "--scheduler", "tcp://127.0.0.1:9", "--out", "{run}"],
     "applies only with --executor dask; ignored", {"code": 0, "writes": "run"}),
    ("rounds-huge", None, ["sweep", "reads", "--reads", "13,4093", "--rounds", "100000000"], "hours"),
    ("work-ms-huge", lambda t: (resume_file(t, "huge", HUGE_GRAPH), cell(graph="huge", node="prepare")(t))[1],
     ["reproduce", "--only", "resume_faults"], "hours"),
    ("jobs-huge", None, ["reproduce", "--jobs", "1000000"], "worker processes need about"),
    # --- issue 16 §5: odd run folders
    ("out-dangling-symlink", lambda t: os.symlink(t / "nowhere", t / "link"), ["reproduce", "--out", "{tmp}/link"], "does not exist"),
    ("out-looping-symlink", lambda t: os.symlink("loop", t / "loop"), ["reproduce", "--out", "{tmp}/loop"], "loops"),
    ("run-json-not-an-object", lambda t: (a_run(t) / "run.json").write_text("[1, 2]\n"), RERUN, "run.json holds a list"),
    ("provenance-truncated", lambda t: (a_run(t) / "provenance.json").write_text('{"command": "drif'), RERUN,
     "provenance.json: unreadable"),
    ("analyze-provenance-truncated", lambda t: (a_run(t) / "provenance.json").write_text('{"command": "drif'), ["analyze", "{run}"],
     "provenance.json: unreadable"),
    ("records-experiment-is-a-file", lambda t: replace_with_file(records_dir(a_run(t))), RERUN, "a file where the folder"),
    ("analyze-records-experiment-is-a-file", lambda t: replace_with_file(records_dir(a_run(t))), ["analyze", "{run}"],
     "a file where the folder"),
    ("tables-is-a-file", lambda t: replace_with_file(a_run(t) / "tables"), ["analyze", "{run}"], "tables: should be a folder"),
    ("report-md-is-a-folder", lambda t: ((a_run(t) / "report.md").unlink(), (t / "run" / "report.md").mkdir()),
     ["analyze", "{run}"], "a folder where the report file should be"),
    ("parquet-column-of-the-wrong-type", lambda t: wrong_column_type(a_run(t)), ["analyze", "{run}"], "column 'repetition'"),
    # --- impossible work and other names
    ("repetitions-huge", None, ["reproduce", "--repetitions", "1000000000000"], "hours"),
    ("reads-huge", None, ["sweep", "reads", "--reads", "1000000000"], "65536"),
    ("only-unknown", None, ["reproduce", "--only", "nothing"], "--only 'nothing'"),
    ("workload-unknown", None, ["reproduce", "--workloads", "refund,nope"], "nope"),
    ("jobs-zero", None, ["reproduce", "--jobs", "0"], "--jobs: must be at least 1"),
    ("rates-out-of-range", None, ["sweep", "omission", "--rates", "0,1.5"], "between 0 and 1"),
    ("check-missing-file", None, ["check", "{tmp}/none.jsonl"], "cannot read"),
    ("check-not-a-history", lambda t: (t / "h.jsonl").write_text("{not json\n"), ["check", "{tmp}/h.jsonl"], "line 1"),
    # --- history files (issue 16 §1): a malformed history is one line naming the line and the field, never a verdict
    # the file itself: not a regular file (a FIFO would hang the reader), empty, over the size limit
    ("check-fifo", lambda t: os.mkfifo(t / "h.jsonl"), ["check", "{tmp}/h.jsonl"], "is a FIFO"),
    ("check-device", None, ["check", "/dev/zero"], "is a device"),
    ("check-folder", lambda t: (t / "h.jsonl").mkdir(), ["check", "{tmp}/h.jsonl"], "is a folder"),
    ("check-empty-file", lambda t: (t / "h.jsonl").write_text("\n\n"), ["check", "{tmp}/h.jsonl"], "empty file"),
    check_row("check-over-size-limit", history("revalidation"), "over the limit of 100", "--max-bytes", "100"),
    check_row("check-not-utf8", lambda t: (history("revalidation")(t), (t / "h.jsonl").open("ab").write(b'{"actor": "\xff"}\n')),
              "line 6: not JSON"),
    # the header: not a history header, a family nobody declares, meta keys of the wrong shape
    check_row("check-header-no-format", history("revalidation", head={"family": "revalidation"}), "line 1: the header must be"),
    check_row("check-header-unknown-family", history("revalidation", head={"history": 1, "family": "nope"}),
              "line 1: family 'nope' is not one of"),
    check_row("check-meta-not-object", history("revalidation", head={"history": 1, "family": "revalidation", "meta": [1]}),
              "line 1: meta: must be an object"),
    check_row("check-meta-contract-malformed", history("isolation", head={"history": 1, "family": "isolation", "meta": {
        "contracts": ["index:docs@1 needs model:embed@1"]}}), "line 1: meta.contracts: item 0"),
    check_row("check-meta-contracts-not-list", history("isolation", head={"history": 1, "family": "isolation", "meta": {
        "contracts": "index:docs@1 requires model:embed@1"}}), "line 1: meta.contracts: must be a list"),
    check_row("check-meta-groups-shape", history("isolation", head={"history": 1, "family": "isolation", "meta": {
        "groups": {"g": {"contracts": [3]}}}}), "line 1: meta.groups: g: contracts"),
    check_row("check-meta-graph-shape", history("resume", head={"history": 1, "family": "resume", "meta": {
        "graph": {"name": "x"}}}), "line 1: meta.graph"),
    check_row("check-meta-stores-read-not-bool", history("resume", head={"history": 1, "family": "resume", "meta": {
        "stores_read": "yes"}}), "line 1: meta.stores_read: must be true or false"),
    # the common fields of an operation
    check_row("check-line-not-json", history("revalidation", 3, raw="{index: 1}"), "line 3: not JSON"),
    check_row("check-line-not-object", history("revalidation", 2, raw="[1, 2]"), "line 2: expected a JSON object"),
    check_row("check-index-missing", history("revalidation", 2, "index"), "line 2: index: must be an integer"),
    check_row("check-index-text", history("revalidation", 3, "index", "1"), "line 3: index: must be an integer"),
    check_row("check-index-boolean", history("revalidation", 2, "index", True), "line 2: index: must be an integer"),
    check_row("check-index-repeated", history("revalidation", 3, "index", 0), "line 3: index: 0 does not increase"),
    check_row("check-index-decreasing", history("revalidation", 5, "index", 1), "line 5: index: 1 does not increase"),
    check_row("check-actor-missing", history("revalidation", 2, "actor"), "line 2: actor: must be a string"),
    check_row("check-op-not-string", history("revalidation", 2, "op", 7), "line 2: op: must be a string"),
    check_row("check-status-unknown", history("revalidation", 3, "status", "done"), "line 3: status: must be one of ok, fail, indeterminate (got 'done')"),
    check_row("check-start-text", history("revalidation", 3, "start", "soon"), "line 3: start: must be a finite number"),
    check_row("check-start-nan", history("revalidation", 3, raw=json.dumps(op(1, "commit", {"group": 1}, start=float("nan")))),
              "line 3: start: must be a finite number"),
    check_row("check-end-infinite", history("revalidation", 3, "end", 1e999), "line 3: end: must be a finite number"),
    check_row("check-end-before-start", history("revalidation", 3, "end", 0.5), "line 3: end: 0.5 is before start 1.0"),
    check_row("check-value-not-object", history("revalidation", 2, "value", [1]), "line 2: value: must be an object"),
    check_row("check-value-missing", history("isolation", 3, "value"), "line 3: value: must be an object"),
    # operation names: undeclared (a misspelt spawn must not hide a context escape), another family's
    check_row("check-op-misspelt", history("isolation", 4, "op", "spwan"), "line 4: op: 'spwan' is not an operation of the isolation family"),
    check_row("check-op-of-another-family", history("revalidation", 3, "op", "checkpoint"),
              "line 3: op: 'checkpoint' is an operation of the resume and agent families, but the header says family 'revalidation'"),
    check_row("check-op-other-family-allowed-still-refused", history("isolation", 2, "op", "commit"),
              "'commit' is an operation of the revalidation family", "--allow-unknown-ops"),
    # the family's value keys and their types
    check_row("check-resolve-version-text", history("isolation", 3, "value.version", "2"), "line 3: value.version: must be an integer"),
    check_row("check-resolve-version-missing", history("isolation", 3, "value.version"), "line 3: value.version: missing (status ok)"),
    check_row("check-resolve-identity-missing", history("isolation", 3, "value.identity"), "line 3: value.identity: missing"),
    check_row("check-spawn-child-missing", history("isolation", 4, "value.child"), "line 4: value.child: missing (status ok)"),
    check_row("check-spawn-relation-unknown", history("isolation", 4, "value.relation", "sibling"), "line 4: value.relation"),
    check_row("check-merge-branches-text", history("isolation", 4, raw=json.dumps(op(3, "merge", {"workflow": "T1", "branches": "T1.a"}))),
              "line 4: value.branches: must be a list"),
    check_row("check-merge-branch-not-string", history("isolation", 4, raw=json.dumps(op(3, "merge", {"workflow": "T1", "branches": [["T1.a"]]}))),
              "line 4: value.branches: item 0 must be a string"),
    check_row("check-group-object", history("revalidation", 2, "value.group", {"pair": 1}), "line 2: value.group: must be a string or an integer"),
    check_row("check-commit-token-text", history("revalidation", 3, "value.target_token", "v0"), "line 3: value.target_token"),
    check_row("check-setup-state-missing", history("revalidation", 2, "value.state"), "line 2: value.state: missing"),
    check_row("check-checkpoint-step-text", history("resume", 3, "value.step", "1"), "line 3: value.step: must be an integer"),
    check_row("check-checkpoint-created-missing", history("resume", 3, "value.created"), "line 3: value.created: missing"),
    check_row("check-trace-kind-unknown", history("resume", 4, "value.kind", "ran"), "line 4: value.kind"),
    check_row("check-call-run-missing", history("resume", 2, "value.run"), "line 2: value.run: missing"),
    check_row("check-call-state-missing", history("resume", 2, "value.state"), "line 2: value.state: missing (status ok)"),
    # the options of check
    check_row("check-checker-unknown", history("revalidation"), "--checker 'nope'", "--checker", "nope"),
    check_row("check-jobs-zero", history("revalidation"), "--jobs: must be at least 1", "--jobs", "0"),
    check_row("check-jobs-unbounded", history("revalidation"), "--jobs 10000: at most", "--jobs", "10000"),
    check_row("check-bad-line-found-by-a-worker", history("isolation", 5, "value.version", "two"), "line 5: value.version", "--jobs", "2"),
]


def _params(row: tuple) -> tuple:
    setup, argv, message, *expect = row[1:]
    return setup, argv, message if isinstance(message, tuple) else (message,), expect[0] if expect else {}


@pytest.mark.parametrize("setup, argv, message, expect", [_params(r) for r in ROWS], ids=[r[0] for r in ROWS])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, monkeypatch, capsys, setup, argv, message, expect):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # a plug-in's folder is appended to sys.path: undo it
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # a plug-in's __pycache__ is not the command's writing
    extra = setup(tmp_path) if setup else None
    capsys.readouterr()
    argv = [a.format(tmp=tmp_path, run=tmp_path / "run") for a in argv]
    if isinstance(extra, list):
        argv += extra
    before = snapshot(tmp_path)
    code = main(argv + (["--quiet"] if argv[0] in ("reproduce", "sweep") else []))
    out, err = capsys.readouterr()
    assert "verdict" not in out, out  # a refused history never gets a verdict
    assert code == expect.get("code", 2), err
    lines = [line for line in err.splitlines() if not line.startswith("driftlab: report ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert all(m in lines[0] for m in message), err
    after = snapshot(tmp_path)
    if "writes" in expect:  # a run that started: only its own folder gains files; nothing that was there changes
        assert {k: v for k, v in after.items() if k in before} == before, "nothing that existed may change"
        assert all(k == expect["writes"] or k.startswith(expect["writes"] + "/") for k in set(after) - set(before)), \
            sorted(set(after) - set(before))
    else:
        assert after == before, "a refused command must write nothing and lose nothing"


def test_argparse_errors_are_one_line_too(capsys):
    code = main(["reproduce", "--profile", "huge"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "huge" in err


def test_a_mechanism_failing_mid_run_is_one_line_naming_it_and_keeps_finished_cells(tmp_path, monkeypatch, capsys):
    """A plug-in whose validate raises on one workload only stops the run in one line naming it, and the cells of the
    other workloads survive."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    plugin(tmp_path, "from mechanisms.revalidation.atr import ATR\n"
                     "class Flaky(ATR):\n"
                     "    def validate(self, txn, store):\n"
                     "        if txn.intent.action == 'issue_refund':\n"
                     "            raise ValueError('flaky on refunds')\n"
                     "        return super().validate(txn, store)\n", "flaky_plugin")
    code = main(["reproduce", "--only", "revalidation_outcomes", "--mechanisms", "flaky_plugin:Flaky", "--repetitions", "1",
                 "--jobs", "1", "--out", str(tmp_path / "run"), "--quiet", "--workloads", "cloud_remediation,refund"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "flaky_plugin:Flaky" in err and "refund/" in err and "flaky on refunds" in err
    kept = list((tmp_path / "run" / "records" / "revalidation_outcomes").glob("cloud_remediation*.parquet"))
    assert kept, "cells finished before the failing one are kept"


def test_a_wrong_return_type_is_reported_not_a_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    plugin(tmp_path, "class Wrong:\n    def validate(self, txn, store):\n        return 'KEEP'\n", "wrong_plugin")
    code = main(["reproduce", "--only", "revalidation_outcomes", "--mechanisms", "wrong_plugin:Wrong", "--repetitions", "1",
                 "--jobs", "1", "--out", str(tmp_path / "run"), "--quiet", "--workloads", "refund"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "wrong_plugin:Wrong" in err and "Traceback" not in err, err


def test_a_repeated_mechanism_runs_once_and_is_said(tmp_path, capsys):
    code = main(["reproduce", "--only", "revalidation_outcomes", "--mechanisms", "ATR,ATR", "--repetitions", "1",
                 "--jobs", "1", "--out", str(tmp_path / "run"), "--quiet", "--workloads", "refund"])
    assert code == 0
    assert "named more than once" in capsys.readouterr().err
    mechanisms = pd.read_csv(tmp_path / "run" / "tables" / "revalidation_outcomes.csv")["mechanism"].unique()
    assert list(mechanisms) == ["ATR"]


@pytest.mark.planted("runners.cli:main", "args = parser().parse_args(argv)",
                     "sys.path.insert(0, os.getcwd()); args = parser().parse_args(argv)")
def test_a_stray_module_in_the_working_folder_is_never_imported(tmp_path):
    """Planted bug: the CLI putting the working folder first on sys.path executes a stray multiprocess.py."""
    (tmp_path / "multiprocess.py").write_text("raise SystemExit('the stray module ran')\n")
    (tmp_path / "tqdm.py").write_text("raise SystemExit('the stray module ran')\n")
    exe = Path(sys.executable).with_name("driftlab")
    result = subprocess.run([str(exe), "reproduce", "--only", "revalidation_outcomes", "--repetitions", "1", "--jobs", "2",
                             "--workloads", "refund", "--out", str(tmp_path / "run"), "--quiet"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "the stray module ran" not in result.stderr, result.stderr


def test_a_second_run_into_a_held_folder_is_refused_and_a_killed_run_does_not_block_its_rerun(tmp_path):
    out = tmp_path / "run"
    args = [sys.executable, "-m", "runners.cli", "reproduce", "--only", "revalidation_outcomes", "--repetitions", "200",
            "--jobs", "1", "--workloads", "refund", "--out", str(out), "--quiet"]
    first = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out / "run.json").exists():
        time.sleep(0.02)
    assert (out / "run.json").exists(), "the first run started"
    os.killpg(first.pid, signal.SIGSTOP)  # it holds the folder (and its lock) however fast its cells would run
    second = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr
    assert "another driftlab run" in second.stderr and str(first.pid) in second.stderr
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert "Traceback" not in first.stderr.read()
    rerun = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    records = pd.concat(pd.read_parquet(p) for p in (out / "records" / "revalidation_outcomes").glob("*.parquet"))
    assert not records.duplicated(["cell", "repetition"]).any() and len(records) == 5 * 7 * 4 * 200


# ---------------------------------------------------------------------------------------------- environments (issue 24)
ENV = "langgraph-1.2.24"
ENV_ROW = '[tool.driftlab.runtimes."langgraph@1.2.24"]\n'


def scratch_envs(tmp: Path, edit=None, extra: dict[str, str] | None = None) -> Path:
    """A scratch copy of data/envs/ holding the langgraph-1.2.24 env (its lock: the built env is reused), its
    pyproject.toml passed through ``edit``, plus ``extra`` env folders (name -> pyproject text, same lock)."""
    root = tmp / "envs"
    src = REPO / "data" / "envs" / ENV
    for name, text in {ENV: (edit or (lambda s: s))((src / "pyproject.toml").read_text()), **(extra or {})}.items():
        (root / name).mkdir(parents=True)
        (root / name / "pyproject.toml").write_text(text)
        (root / name / "uv.lock").write_bytes((src / "uv.lock").read_bytes())
    return root


def _sub(old: str, new: str):
    def edit(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)
    return edit


def _damaged_mark(tmp: Path) -> None:
    from runners.resume import envs

    path = envs.folder_of(ENV, (REPO / "data" / "envs" / ENV / "uv.lock").read_bytes())
    path.mkdir(parents=True)
    (path / envs.MARK).write_text("{")


OTHER = (REPO / "data" / "envs" / ENV / "pyproject.toml").read_text().split("[tool.driftlab")[0]
ENV_ROWS = [
    # (id, edit of the pyproject, extra env folders, cache setup(tmp) -> cache folder or None, what the line says)
    ("env-malformed-toml", lambda s: s + "\n[[[\n", None, None, ("pyproject.toml", "malformed TOML")),
    ("env-unknown-field", _sub(ENV_ROW, ENV_ROW + 'adpater = "x"\n'), None, None, ("pyproject.toml", ".adpater: unknown field")),
    ("env-mistyped-field", _sub('backends = ["sqlite", "postgres"]', 'backends = "sqlite"'), None, None,
     ("pyproject.toml", ".backends: a list, not str")),
    ("env-duplicate-runtime", None, {"langgraph-copy": OTHER + ENV_ROW + 'adapter = "langgraph:LangGraphAdapter"\n'},
     None, ("langgraph-copy/pyproject.toml", "'langgraph@1.2.24' is declared already")),
    ("env-colliding-alias", None, {"other": OTHER + '[tool.driftlab.runtimes."other@1.2.24"]\nadapter = "langgraph:LangGraphAdapter"\n'
                                            'framework = "langgraph"\naliases = ["langgraph@today"]\n'},
     None, ("other/pyproject.toml", ".aliases: 'langgraph@today' is declared already")),
    ("env-pin-not-in-lock", _sub('  "langgraph==1.2.24",\n', '  "langgraph==1.2.24",\n  "anyio==0.0.1",\n'), None, None,
     ("pyproject.toml", "anyio==0.0.1 is not what uv.lock holds")),
    ("env-release-not-the-pin", _sub('release = "1.2.24"', 'release = "1.2.24.post1"'), None, None,
     ("pyproject.toml", ".release: '1.2.24.post1', but project.dependencies pins langgraph==1.2.24")),
    ("env-release-not-installed", lambda s: _sub('release = "1.2.24"', 'release = "1.2.24.post1"')(
        _sub('"langgraph==1.2.24"', '"langgraph>=1.2"')(s)), None, None,
     ("environment langgraph-1.2.24: release failed", "declares release 1.2.24.post1", "holds langgraph 1.2.24")),
    ("env-missing-lock", None, None, "nolock", ("langgraph-1.2.24/uv.lock", "No such file")),
    ("env-damaged-mark", None, None, "damaged", ("damaged build mark", "driftlab-env.json")),
    ("env-cache-is-a-file", None, None, "file", ("environment langgraph-1.2.24: cache failed", "afile")),
]


planted_env_rows = {  # the row's bug, planted where the row catches it
    "env-malformed-toml": pytest.mark.planted(  # its rows vanish: the run would say 'unknown mechanism'
        "mechanisms.resume.frameworks:_load", 'return {}, [f"{pyproject}: malformed TOML ({exc})"]', "return {}, []"),
    "env-cache-is-a-file": pytest.mark.planted(  # a traceback from the cache
        "runners.resume.envs:ensure", "except OSError as exc:", "except ImportError as exc:"),
}


@pytest.mark.parametrize("edit, extra, cache, message",
                         [pytest.param(*r[1:], id=r[0], marks=planted_env_rows.get(r[0], ())) for r in ENV_ROWS])
def test_environment_bad_input_is_one_line_exit_2_and_publishes_nothing(tmp_path, monkeypatch, capsys, edit, extra,
                                                                          cache, message):
    """Issue 24 §4-§5, on a scratch copy of data/envs/: a malformed or inconsistent env declaration, a release the
    env does not hold, a missing lock, a damaged build mark or an unusable cache is one line naming the file (and the
    field), exit 2, no traceback, no run folder (bug classes: rows vanishing as 'unknown mechanism' and tracebacks
    from the cache, planted on the malformed-TOML and cache rows; a row published under a release it does not run,
    not planted: its planted run would run the whole experiment)."""
    from runners.resume import envs

    root = scratch_envs(tmp_path, edit, extra)
    monkeypatch.setenv("DRIFTLAB_ENVS", str(root))
    monkeypatch.setattr(envs, "_BUILT", {})
    if cache == "nolock":
        (root / ENV / "uv.lock").unlink()
    elif cache == "damaged":
        monkeypatch.setenv("DRIFTLAB_ENV_CACHE", str(tmp_path / "cache"))
        _damaged_mark(tmp_path)
    elif cache == "file":
        (tmp_path / "afile").write_text("x")
        monkeypatch.setenv("DRIFTLAB_ENV_CACHE", str(tmp_path / "afile"))
    capsys.readouterr()
    before = snapshot(tmp_path)
    code = main(["reproduce", "--only", "resume_frameworks", "--mechanisms", "langgraph@1.2.24", "--out",
                 str(tmp_path / "run"), "--quiet"])
    _, err = capsys.readouterr()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert all(m in err for m in message), err
    assert snapshot(tmp_path) == before and not (tmp_path / "run").exists()


@pytest.mark.planted("runners.engine:check_identity", "if previous.get(key) != value:",  # a changed lock accepted
                     'if previous.get(key) != value and key != "env_locks":')
def test_a_changed_environment_lock_is_a_changed_run(tmp_path, monkeypatch):
    """Issue 24 §5: the lock hash of every env a run uses is in run.json; a rerun into the folder after the lock
    changed is refused like any other changed input (planted bug: provenance naming the new lock for cells run under
    the old one)."""
    from runners.engine import Request, check_identity, identity
    from runners.experiment import DriftlabError, Options

    root = scratch_envs(tmp_path)
    monkeypatch.setenv("DRIFTLAB_ENVS", str(root))
    request = Request(experiments=("resume_frameworks",), profile="quick", seed=1,
                      options=Options(mechanisms=("langgraph@1.2.24",)))
    first = identity(request)
    assert set(first["env_locks"]) == {ENV}
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps(first))
    assert check_identity(run, identity(request))
    with (root / ENV / "uv.lock").open("a") as lock:
        lock.write("\n# changed\n")
    with pytest.raises(DriftlabError, match=f"environment locks changed since \\({ENV}\\)"):
        check_identity(run, identity(request))
