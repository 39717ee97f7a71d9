"""``driftlab check``'s quick paths agree with the slow ones (issue 28): checkers handed only the operations they
declare they read (``reads``) give the results they give on the whole history (the chunk validated a field at a
time, :meth:`Validator.check_many`, is held to the per-line validator in ``tests/test_check_quicktest.py``).

The checkers' quick paths (``check_groups``: a group of the common simple shape judged from its lines, without
operations or a search over orders) are held to the general path (``check`` on a :class:`~vocabulary.History`) on
race histories made to hit both: indeterminate commits, policy changes (at once and inside a transaction), audits
of 0, 1 or 2 refunds, groups with one, two or three committing actors, overlapping operations, releases.

Bug classes caught: a ``reads`` declaration that leaves out an operation a checker's verdict depends on (a race pair whose audit
found two refunds judged valid), and a quick path that answers VALID where the general path does not (a policy
change, an indeterminate commit or an audit of two refunds overlooked) or counts its groups wrong.
"""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import orjson
import pytest

from analysis.checkers import checkers, schemas
from analysis.revalidation.checkers import GENERAL
from benchmarks.bench_check import write_history
from runners.check import check
from vocabulary import HistoryError, Verdict, history_from_jsonl

STATUSES = ("ok", "ok", "ok", "fail", "indeterminate")


def _value(rng: random.Random, name: str, status: str, group: int) -> dict:
    """A ``value`` the revalidation format accepts for ``name`` (vocabulary.revalidation.HISTORY)."""
    pick = rng.choice
    if name == "setup":
        return {"group": group, "state": {"amount": pick([80, 120]), "refunds": 0, "refund_limit": 100,
                                          "refunds_enabled": pick([1, 1, 0])}}
    if name == "set_policy":
        return {"group": group, "args": pick([{"refunds_enabled": 0}, {"refund_limit": 50}, {"refund_limit": 200}]),
                "result": pick(["committed", "updated"])}
    if name == "commit":
        value = {"group": group, "target_token": pick([0, 1, None]), "intent": f"refund:{group}",
                 "result": "committed" if status == "ok" else "rejected"}
        if status == "fail" and rng.random() < 0.5:
            value["refused_by"] = "target_cas"
        if status == "indeterminate" and rng.random() < 0.5:
            value["lost"] = "killed"
        return value
    if name == "audit":
        if status == "indeterminate":
            return {"group": group}
        return {"group": group, "state": {"refunds": pick([0, 1, 2])}}
    if name == "release":
        decisions = ["KEEP", "REFRESH", "REPLAN", "BLOCK"]
        return {"group": group, "oracle": pick(decisions), "outcome": pick(decisions), "released": pick([True, False]),
                "payload_stale": pick([True, False]), "mechanism": "m"}
    if name in ("read_target", "read_policy", "validate"):
        return {"group": group, "result": pick([True, "ok", {"amount": 80, "version": 0}])}
    return {"group": group}


def random_history(path: Path, seed: int, groups: int = 40) -> Path:
    """Race pairs, cross-resource executions and durable cells interleaved at random, every status."""
    rng = random.Random(seed)
    names = ["setup", "begin", "read_target", "read_policy", "validate", "set_policy", "commit_txn", "commit",
             "commit", "audit", "decide", "mutate", "release"]
    plans = {g: [rng.choice(names) for _ in range(rng.randrange(2, 9))] for g in range(groups)}
    for g, plan in plans.items():
        plan.insert(0, "setup")
        if rng.random() < 0.7:
            plan += ["commit", "commit"]
    rows, t = [], 0.0
    while plans:
        g = rng.choice(list(plans)[:4])  # a few groups open at once, so partitions interleave
        name = plans[g].pop(0)
        if not plans[g]:
            del plans[g]
        status = rng.choice(STATUSES)
        rows.append({"index": len(rows), "actor": rng.choice(["worker_a", "worker_b", "admin", "auditor"]), "op": name,
                     "status": status, "start": t, "end": None if status == "indeterminate" else t + 0.5,
                     "value": _value(rng, name, status, g)})
        t += rng.choice([0.25, 1.0])
    head = {"history": 1, "family": "revalidation", "meta": {}}
    path.write_text("".join(json.dumps(r) + "\n" for r in [head, *rows]))
    return path


def shown(result) -> tuple:
    return result.verdict.value, result.summary, sorted((w.steps, w.explanation) for w in result.witnesses)


@pytest.mark.planted("runners.check:reads", "names |= declared", "names |= declared - {'audit'}")
@pytest.mark.planted("vocabulary.schema:_values_pass", "fetched[key] = got", "fetched[key] = got[::-1]")
@pytest.mark.parametrize("seed", range(6))
def test_checkers_handed_what_they_read_give_the_whole_historys_results(seed, tmp_path):
    """Planted bugs: ``reads`` leaving out the audit, so an audit that found two refunds no longer makes its pair
    invalid; the partition keys a chunk's validation fetched (and check reuses) out of line order, so operations
    land in other groups: every checker's verdict, summary and witnesses through ``driftlab check`` (chunked, only
    the operations the checkers read built) must equal the checker's own on the whole history."""
    path = random_history(tmp_path / "h.jsonl", seed)
    history = history_from_jsonl(path.read_text())
    reference = {name: shown(c.check(history)) for name, c in checkers("revalidation").items()}
    assert {v[0] for v in reference.values()} >= {"invalid"}, "the random histories hold violations"
    for chunk_bytes, edge in ((400, 2), (3000, 4), (2**18, 16)):
        outcome = check(path, jobs=1, chunk_bytes=chunk_bytes, edge=edge)
        assert {r.checker: shown(r) for r in outcome.results} == reference, (chunk_bytes, edge)


def corruptions(row: dict) -> list[dict]:
    """Ways to break one operation line (each one refused by the per-line validator, or not: both are asked)."""
    out = []
    for field, bad in (("index", "7"), ("index", True), ("actor", 3), ("op", "nope"), ("op", ["commit"]),
                       ("status", "done"), ("status", ["ok"]), ("start", "0"), ("start", True), ("end", -1.0),
                       ("end", None), ("value", []), ("value", None)):
        out.append({**row, field: bad})
    for drop in ("index", "actor", "op", "status", "start", "end", "value"):
        out.append({k: v for k, v in row.items() if k != drop})
    value = row["value"]
    for key, bad in (("group", 1.5), ("group", True), ("group", None), ("group", [1]), ("state", None),
                     ("state", "x"), ("target_token", "0"), ("target_token", None), ("intent", 5), ("result", 1),
                     ("refused_by", False), ("args", []), ("oracle", "MAYBE"), ("outcome", None), ("released", 1)):
        out.append({**row, "value": {**value, key: bad}})
    out.append({**row, "value": {k: v for k, v in value.items() if k != "state"}})
    return out


def pairs_history(path: Path, seed: int, groups: int = 120) -> Path:
    """Race pairs and refund histories, most of the simple shape the quick paths judge, the rest not: a policy change
    (at once, or ``updated`` then the admin's ``commit_txn``), commits by one, two or three actors with any status,
    an audit of 0, 1 or 2 refunds or none, a setup that may be missing or hold a rule that is false, a release."""
    rng = random.Random(seed)
    rows, t = [], 0.0

    def add(g: int, actor: str, name: str, status: str, value: dict | None = None) -> None:
        nonlocal t
        start = t + rng.choice([0.0, 0.0, 0.2])  # sometimes overlapping the one before
        value = value if value is not None else _value(rng, name, status, g)
        rows.append({"index": len(rows), "actor": actor, "op": name, "status": status, "start": start,
                     "end": None if status == "indeterminate" else start + rng.choice([0.1, 0.5]), "value": value})
        t = start + rng.choice([0.3, 0.6])

    def status(*weights: int) -> str:
        return rng.choices(("ok", "fail", "indeterminate"), weights)[0]

    for g in range(groups):
        if rng.random() < 0.95:
            add(g, "setup", "setup", "ok", {"group": g, "state": {"amount": rng.choice([80, 80, 120]), "refunds": 0,
                                                                 "refund_limit": 100,
                                                                 "refunds_enabled": rng.choice([1, 1, 1, 0])}})
        if rng.random() < 0.1:
            add(g, "worker_a", "read_target", "indeterminate")
        policy = rng.random() < 0.25
        if policy:
            result = rng.choice(["committed", "updated"])
            add(g, "admin", "set_policy", status(6, 1, 1),
                {"group": g, "args": rng.choice([{"refunds_enabled": 0}, {"refund_limit": 50}, {"refund_limit": 200}]),
                 "result": result})
        actors = rng.choice([["worker_a", "worker_b"]] * 6 + [["worker_a"], ["worker_a", "worker_a"],
                                                              ["worker_a", "worker_b", "worker_c"]])
        landed = rng.randrange(len(actors))
        for k, actor in enumerate(actors):
            s = "ok" if k == landed and rng.random() < 0.85 else status(1, 6, 1)
            add(g, actor, "commit", s)
            if policy and result == "updated" and k == 0 and rng.random() < 0.7:
                add(g, "admin", "commit_txn", status(6, 1, 1), {"group": g})
        if rng.random() < 0.7:
            add(g, "auditor", "audit", "ok", {"group": g, "state": {"refunds": rng.choice([0, 1, 1, 1, 2])}})
        if rng.random() < 0.15:
            add(g, "worker_a", "release", status(6, 0, 1))
    head = {"history": 1, "family": "revalidation", "meta": {}}
    path.write_text("".join(json.dumps(r) + "\n" for r in [head, *rows]))
    return path


@pytest.mark.planted("analysis.revalidation.checkers:RuleHoldsAtCommit.quick",
                     "elif name == SET_POLICY or name == COMMIT_TXN:", "elif name == COMMIT_TXN:")
@pytest.mark.planted("analysis.revalidation.checkers:RuleHoldsAtCommit.quick",
                     "elif status == INDETERMINATE:", "elif False:")
@pytest.mark.planted("analysis.revalidation.checkers:OneCommitPerPair.quick", "audited >= 2", "audited >= 3")
@pytest.mark.planted("analysis.revalidation.checkers:OneCommitPerPair.quick",
                     "statuses.count(OK) != 1", "statuses.count(OK) > 1")
@pytest.mark.planted("analysis.revalidation.checkers:OracleAgreement.quick",
                     'if release["status"] != INDETERMINATE and', "if")
@pytest.mark.planted("analysis.revalidation.checkers:_check_groups", "valid += 1", "pass")
def test_each_quick_path_gives_the_general_paths_verdicts_witnesses_and_summary(tmp_path, monkeypatch):
    """Planted bugs: a quick path that overlooks a policy change, an indeterminate commit, an audit of two refunds,
    a pair whose commits were all refused or an indeterminate release (VALID where the general path says INVALID or
    UNKNOWN), or that drops its VALID groups from the count: ``check_groups`` on a history's groups must give what
    ``check`` gives on the history, on histories where each checker takes both its quick and its general path."""
    taken: dict[str, set] = {}
    for name, c in checkers("revalidation").items():
        def spy(rows, quick=type(c).quick, name=name):
            got = quick(rows)
            taken.setdefault(name, set()).add("general" if got is GENERAL else got)
            return got
        monkeypatch.setattr(c, "quick", spy)
    for seed in range(6):
        history = history_from_jsonl(pairs_history(tmp_path / f"h{seed}.jsonl", seed).read_text())
        parts = [[{"index": op.index, "actor": op.actor, "op": op.name, "status": op.status, "start": op.start,
                   "end": op.end, "value": op.value} for op in ops] for ops in history.groups().values()]
        for name, c in checkers("revalidation").items():
            assert shown(c.check_groups(parts)) == shown(c.check(history)), (seed, name)
    for name in checkers("revalidation"):
        assert {Verdict.VALID, "general"} <= taken[name], (name, taken[name])


@pytest.mark.planted("runners.check:_scan", "and not unsure:", ":")
@pytest.mark.planted("runners.check:_scan", "not any(by_name.get(n) for n in c.reads)", "True")
def test_driftlab_checks_json_is_the_same_with_the_quick_paths_as_without(tmp_path, monkeypatch):
    """Planted bugs: a checker left idle in a chunk although an operation there is indeterminate (its UNKNOWN lost),
    or every checker left idle (no group of a chunk judged): the JSON of ``driftlab check`` must be byte for byte
    the JSON of the general path (each checker's ``check`` on histories of operations), on race histories and on
    random interleaved ones, chunked three ways."""
    paths = [pairs_history(tmp_path / f"p{seed}.jsonl", seed) for seed in range(3)]
    paths += [random_history(tmp_path / f"r{seed}.jsonl", seed) for seed in range(3)]
    configs = ((400, 2), (3000, 4), (2**18, 16))
    quick = [check(p, jobs=1, chunk_bytes=c, edge=e).json() for p in paths for c, e in configs]
    with monkeypatch.context() as m:
        for c in checkers("revalidation").values():
            m.delattr(type(c), "check_groups")
        general = [check(p, jobs=1, chunk_bytes=c, edge=e).json() for p in paths for c, e in configs]
    assert quick == general
    assert all(re.search(r"[1-9]\d* invalid", j) and re.search(r"[1-9]\d* unknown", j) for j in general)
