"""``driftlab check`` on stored histories: prose witnesses and the exit code follows the verdict; histories
validated against their family's declared format, judged partition by partition with the whole file's verdicts,
and printed as JSON on request (issue 16 §1-§2; malformed histories are rows of test_bad_input.py).

A race cell's history is stored in the run folder by a real run; the test then plants a double commit
(one pair's refused commit rewritten as committed) and an indeterminate commit into copies of it.
Planted bugs caught: a checker that ignores refused-vs-committed status (the double commit passes), and
a checker or CLI that counts an indeterminate operation as valid (exit 0 instead of 2).
"""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from analysis.checkers import checkers, schemas
from runners.check import check
from runners.cli import main
from vocabulary import history_from_jsonl, history_to_jsonl
from vocabulary.schema import readme_block

pytestmark = pytest.mark.xdist_group("test_check")  # one worker: its module-scoped fixture runs once


@pytest.fixture(scope="module")
def race_history(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("check") / "run"
    assert main(["reproduce", "--only", "revalidation_races", "--repetitions", "4", "--jobs", "1",
                 "--out", str(out), "--quiet"]) == 0
    histories = sorted((out / "histories" / "revalidation_races").glob("*pairs*target_cas*.jsonl"))
    assert histories, "race cells store their histories"
    return histories[0]


def cli(*args: str) -> tuple[int, str, str]:
    """``driftlab ARGS`` in this process: (exit code, stdout, stderr).  Captured here rather than with capsys: a
    planted variant (tests/planting.py) runs the test again after pytest's capture of the test has ended."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def first_refused_commit(rows: list[dict]) -> dict:
    return next(r for r in rows[1:] if r["op"] == "commit" and r["status"] == "fail")


def test_a_clean_stored_history_is_valid(race_history, capsys):
    assert main(["check", str(race_history)]) == 0
    out = capsys.readouterr().out
    assert "one_commit_per_pair: valid" in out and "verdict: valid" in out


def test_a_planted_double_commit_is_invalid_with_a_prose_witness(race_history, tmp_path, capsys):
    rows = lines(race_history)
    refused = first_refused_commit(rows)
    refused["status"] = "ok"  # the pair's loser now "committed" too
    code = main(["check", str(write(tmp_path / "double.jsonl", rows)), "--checker", "one_commit_per_pair"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "one_commit_per_pair: invalid" in out and "witness:" in out
    assert f"#{refused['index']} " in out, "the witness names the planted operation"


def test_an_indeterminate_commit_is_unknown_not_valid(race_history, tmp_path, capsys):
    rows = lines(race_history)
    refused = first_refused_commit(rows)
    refused["status"], refused["end"] = "indeterminate", None  # its process died: it may or may not have committed
    code = main(["check", str(write(tmp_path / "unknown.jsonl", rows))])
    captured = capsys.readouterr()
    assert code == 2 and "verdict: unknown" in captured.out and "verdict: valid" not in captured.out


# ------------------------------------------------------------------ issue 16 §1-§2: validated, partitioned, JSON
def whole_file_verdicts(path: Path) -> dict[str, str]:
    """Every checker of the family on the whole history at once (the reference the partitions must agree with)."""
    history = history_from_jsonl(path.read_text())
    return {name: c.check(history).verdict.value for name, c in checkers(history.family).items()}


@pytest.fixture(scope="module")
def isolation_histories(tmp_path_factory) -> list[Path]:
    out = tmp_path_factory.mktemp("iso") / "run"
    assert main(["reproduce", "--only", "isolation_levels", "--jobs", "1", "--out", str(out), "--quiet"]) == 0
    return sorted((out / "histories" / "isolation_levels").glob("*.jsonl"))


@pytest.fixture(scope="module")
def resume_history(tmp_path_factory) -> Path:
    """Every fault-matrix cell on the naive runtime (it breaks EO, CO, CV, PC) in one history, one group per cell."""
    import scenarios
    from runners.resume.cells import Recorder, finish, play, setup_backend
    from runners.resume.procs import InProcessExecutor
    from scenarios.resume.loader import by_kind, cell_graph
    from vocabulary.resume import Backend

    scen = scenarios.load_scenarios(family="resume")["resume"]
    graphs, cells = by_kind(scen, "graph"), sorted(by_kind(scen, "cell").values(), key=lambda c: c.order)
    tmp = tmp_path_factory.mktemp("resume")
    rec = Recorder(cell_graph(cells[0], graphs), {"cell": "every cell"})
    history = None
    for i, cell in enumerate(cells):
        graph = cell_graph(cell, graphs)
        backend = Backend("sqlite", str(tmp / f"cell{i}"), "t")
        setup_backend("naive", backend, graph)
        executor = InProcessExecutor("naive", backend, graph)
        for r in range(cell.replicas):
            play(cell, executor, rec, f"{cell.name}-{r}", cell.name)
        history = finish(rec, "naive", backend, graph)
    path = tmp / "naive.jsonl"
    path.write_text(history_to_jsonl(history))
    return path


def interleaved(rows: list[dict]) -> list[dict]:
    """The same operations with every partition cut in two far apart: each group's first half in the file's first
    half, its second half after all of them (indices renumbered in the new order)."""
    head, body = rows[0], rows[1:]
    by_group: dict = {}
    for r in body:
        by_group.setdefault(r["value"].get("group"), []).append(r)
    firsts = [r for ops in by_group.values() for r in ops[:len(ops) // 2]]
    seconds = [r for ops in by_group.values() for r in ops[len(ops) // 2:]]
    return [head, *({**r, "index": i} for i, r in enumerate(firsts + seconds))]


def test_partitions_judged_apart_give_the_whole_files_verdicts(race_history, isolation_histories, resume_history,
                                                                tmp_path):
    """Planted bugs: a partition key that splits what a checker must see together (a race pair, a workflow and the
    children it spawned, a run and its ledger rows), a partition dropped or judged twice, a chunk that judges a
    partition which goes on in another chunk (the interleaved history), a merge of per-partition results that folds
    unknown or invalid into valid.  Judged in chunks of a few operations, with and without edges, in one process
    and in two; the interleaved history must take the second pass (unless the chunk holds it whole), the lab's own the
    single one unless chunks have no edges."""
    rows = lines(race_history)
    first_refused_commit(rows)["status"] = "ok"  # one invalid pair among valid ones
    planted = write(tmp_path / "double.jsonl", rows)
    mixed = write(tmp_path / "interleaved.jsonl", interleaved(rows))
    histories = [race_history, planted, mixed, *isolation_histories, resume_history]
    seen, passes = set(), {}
    for path in histories:
        whole = whole_file_verdicts(path)
        for jobs, chunk_bytes, edge in ((1, 600, 1), (2, 600, 1), (1, 8000, 2), (2, 3000, 0), (1, 10**9, 64)):
            outcome = check(path, jobs=jobs, chunk_bytes=chunk_bytes, edge=edge)
            assert {r.checker: r.verdict.value for r in outcome.results} == whole, (path.name, jobs, chunk_bytes, edge)
            passes.setdefault((path.name, edge > 0), set()).add(outcome.plan.passes)
            assert outcome.partitions > 1, f"{path.name} was not partitioned"
        seen |= set(whole.values())
    assert {"valid", "invalid"} <= seen, "the histories cover both verdicts"
    assert passes["interleaved.jsonl", True] == {1, 2}, "a partition going on in a far chunk takes a second pass"
    assert passes[race_history.name, True] == passes["double.jsonl", True] == {1}, "contiguous pairs: one pass"
    assert passes[race_history.name, False] == {2}, "without edges, a pair cut by a chunk's end takes a second pass"


@pytest.mark.planted("vocabulary.schema:Validator.__init__",  # every optional key marked required
                     "self.keys = {op.name: op.keys + schema.common for op in schema.operations}",
                     "self.keys = {op.name: tuple(__import__('dataclasses').replace(k, required='always') "
                     "if k.required == 'optional' else k for k in op.keys + schema.common) for op in schema.operations}")
def test_the_labs_own_histories_pass_the_validator(race_history, isolation_histories, resume_history):
    """Planted bug: a declaration stricter than the lab's own writers (a key the runtime leaves out marked required,
    a type it writes refused), so `driftlab check` refuses the lab's own histories."""
    for path in [race_history, *isolation_histories, resume_history]:
        check(path)  # raises DriftlabError (exit 2) on any line the declaration refuses


@pytest.mark.planted("runners.check:Outcome.json", "for w in r.witnesses]}", "for w in r.witnesses][:0]}")
@pytest.mark.planted("runners.check:Outcome.json", '"operations": [self.named[i] for i in w.steps if i in self.named]',
                     '"operations": []')
@pytest.mark.planted("runners.check:Outcome.json", '"verdict": self.verdict.value', '"verdict": "valid"')
def test_json_format_carries_the_verdicts_and_the_witnessed_operations(race_history, tmp_path):
    """Planted bugs: JSON output that drops witnesses or the operations they name, or whose verdict disagrees with
    the prose and the exit code."""
    rows = lines(race_history)
    refused = first_refused_commit(rows)
    refused["status"] = "ok"
    path = write(tmp_path / "double.jsonl", rows)
    code, out, _ = cli("check", str(path), "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["verdict"] == "invalid" and doc["family"] == "revalidation"
    assert doc["operations"] == len(rows) - 1 and doc["partitions"] > 1
    pair = next(c for c in doc["checkers"] if c["checker"] == "one_commit_per_pair")
    assert pair["verdict"] == "invalid" and pair["witnesses"]
    witness = pair["witnesses"][0]
    assert refused["index"] in witness["steps"] and "two commits" in witness["explanation"]
    assert [o["index"] for o in witness["operations"]] == witness["steps"]
    assert any(o == {k: refused[k] for k in ("index", "actor", "op", "status", "start", "end", "value")}
               for o in witness["operations"])
    code, out, _ = cli("check", str(path))
    assert code == 1 and "verdict: invalid" in out


@pytest.mark.planted("vocabulary.schema:Validator._undeclared", "if not self.allow_unknown:", "if True:")
@pytest.mark.planted("runners.cli:cmd_check", "if outcome.plan.unknown:", "if False:")
def test_allow_unknown_ops_accepts_extra_operations_and_says_so(tmp_path):
    """Planted bugs: --allow-unknown-ops ignored (the history refused), or undeclared operations accepted silently."""
    head = {"history": 1, "family": "isolation", "meta": {"contracts": []}}
    ops = [{"index": 1, "actor": "T1", "op": "start", "status": "ok", "start": 1, "end": 1, "value": {"workflow": "T1"}},
           {"index": 2, "actor": "T1", "op": "note", "status": "ok", "start": 2, "end": 2, "value": {"text": "hi"}}]
    path = write(tmp_path / "h.jsonl", [head, *ops])
    code, _, err = cli("check", str(path))
    assert code == 2 and "'note' is not an operation" in err
    code, out, err = cli("check", str(path), "--allow-unknown-ops")
    assert code == 0 and "verdict: valid" in out and "note (1)" in err


@pytest.mark.planted("vocabulary.schema:HistorySchema.markdown", "if self.partition:", "if False:")
def test_the_readme_tables_are_the_declared_formats():
    """Planted bug: the docs' per-family operation table drifting from the declaration the validator uses."""
    readme = (Path(__file__).resolve().parent.parent / "docs" / "histories.md").read_text()
    for family, schema in schemas().items():
        assert readme_block(readme, family) == schema.markdown(), (
            f"docs/histories.md's {family} history table differs from vocabulary.{family}.HISTORY: "
            f"run `./dev python -m runners.check --readme` to regenerate it")


planted_undeclared = pytest.mark.planted("vocabulary.schema:Validator.__init__",  # replay and update undeclared
                                         "for op in schema.operations}",
                                         "for op in schema.operations if op.name not in ('replay', 'update')}")


@pytest.mark.parametrize("cell", [pytest.param("replay_past_checkpoint", marks=planted_undeclared),
                                  pytest.param("update_undeclared_key", marks=planted_undeclared),
                                  "pydantic_invalid_next", "second_resume_by_id", "parallel_sibling_done",
                                  "crash_resume_after_effect_act"])
def test_the_frameworks_histories_pass_the_validator(cell, tmp_path):
    """Issue 24 §7: every operation the lab writes is declared; a real framework's history of each framework-only
    cell (LangGraph's replay and update included) is validated and judged, never refused (planted bug: `replay` and
    `update` undeclared, so `driftlab check` refused the lab's own stored replay_past_checkpoint history)."""
    from runners.experiment import Options
    from runners.resume import common as rc

    _, hist = rc.run_fault_cell("resume_frameworks", "langgraph@1.2.24", cell, 1, 7, Options(), "sqlite")
    path = tmp_path / f"{cell}.jsonl"
    path.write_text(history_to_jsonl(hist))
    outcome = check(path)  # raises DriftlabError (exit 2) on any line the declaration refuses
    assert outcome.results and outcome.verdict.value in ("valid", "invalid")


@pytest.mark.planted("runners.check:settle", "first_index <= previous", "first_index < previous")
@pytest.mark.parametrize("chunk", [64, 200, 700])
def test_a_repeated_index_is_refused_wherever_the_chunks_cut(chunk, resume_history, tmp_path):
    """Issue 24 §7: an operation whose index repeats the one before it is refused at every chunk size, a chunk
    boundary between the two included (planted bug: the repeat judged when it opens a chunk)."""
    from runners.experiment import DriftlabError

    rows = lines(resume_history)
    for at in sorted({2, len(rows) - 1, *range(2, len(rows), max(1, len(rows) // 12))}):
        twin = dict(rows[at], index=rows[at - 1]["index"])
        path = write(tmp_path / f"rep{at}.jsonl", [*rows[:at], twin, *rows[at + 1:]])
        with pytest.raises(DriftlabError, match="does not increase|index"):
            check(path, chunk_bytes=chunk)


@pytest.mark.planted("runners.check:line_start", "return pos + newline + 1", "return pos + newline")
@pytest.mark.planted("runners.check:read_range", "os.pread(fd, stop - start, start)",
                     "os.pread(fd, stop - start, start + 1)")
def test_chunks_cut_at_line_starts_and_read_whole(tmp_path):
    """Planted bugs: a cut one byte before a line start (a chunk that begins with a newline's remainder), a range
    read from one byte late.  The cuts are those of a buffered reader's seek and readline (the way they were found
    before), and the ranges read back are the file's body, byte for byte, with long lines and a cut on a newline."""
    from runners.check import open_regular, ranges, read_range

    lines = [b"x" * (n * 37 % 300) for n in range(400)] + [b"y" * 70_000, b"", b"z"]
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"header\n" + b"\n".join(lines) + b"\n")
    size, body = path.stat().st_size, len(b"header\n")
    for parts in (1, 2, 3, 7, 50, 401, 5000):
        expected = [body]
        with path.open("rb") as f:
            for i in range(1, parts):
                f.seek(max(expected[-1], body + (size - body) * i // parts))
                f.readline()
                if expected[-1] < f.tell() < size:
                    expected.append(f.tell())
        spans = ranges(path, body, size, parts)
        assert spans == list(zip(expected, expected[1:] + [size])), parts
        with open_regular(path, size) as f:
            assert b"".join(read_range(f.fileno(), a, b) for a, b in spans) == path.read_bytes()[body:], parts
