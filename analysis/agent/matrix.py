"""``agent_matrix``: stack x failure, each cell a count over the executions with its witness, per backend.

Serves issue 15's claims, each computed from this run's records: stock
LangGraph shows every failure; each single layer of the guard removes exactly
the failures it owns (``vocabulary.agent.OWNER``) and leaves the others; all
three together show none; and the premise-revalidation layer agrees with the
scenario's oracle on every premise change (0 false allows, 0 false blocks).
No paper publishes these numbers: the report's paper column says so.

A failure is counted in an execution when its checker (``JUDGED_BY``) said
*invalid*; *unknown* verdicts (a history that cannot decide, e.g. no release
because the run never reached ``act``) are counted apart and never as valid.
"""
from __future__ import annotations

import pandas as pd

from analysis.report import Matrix, Section, row
from vocabulary.agent import FAILURES, FAILURE_NAMES, OWNER, SAFE, STACKS, expected_failures

COLUMNS = ["backend", "stack", "failure", "count", "unknown", "executions", "expected", "witness_case", "witness"]


def table(records: pd.DataFrame) -> pd.DataFrame:
    rows = []
    order = {s: i for i, s in enumerate(STACKS)}
    for (backend, stack), g in records.groupby(["backend", "stack"], sort=False):
        expect = expected_failures(stack)
        for f in FAILURES:
            bad = g[g[f] == "invalid"]
            first = bad.iloc[0] if len(bad) else None
            rows.append({"backend": backend, "stack": stack, "failure": f, "count": int(len(bad)),
                         "unknown": int((g[f] == "unknown").sum()), "executions": int(len(g)),
                         "expected": "shows" if f in expect else "removed",
                         "witness_case": "" if first is None else f"{first['case']}#{first['repetition']}",
                         "witness": "" if first is None else first[f"{f}_witness"]})
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["_o"] = out["stack"].map(lambda s: order.get(s, len(order)))
    return out.sort_values(["backend", "_o"], kind="stable").drop(columns="_o").reset_index(drop=True)


def independence(tab: pd.DataFrame) -> list[tuple[str, str, str, int]]:
    """(backend, stack, failure, count) for every cell that breaks the claim: a failure the stack should show
    and does not, or one it should remove and does not."""
    return [(b, s, f, c) for b, s, f, c, e in zip(tab["backend"], tab["stack"], tab["failure"], tab["count"],
                                                     tab["expected"]) if (c > 0) != (e == "shows")]


def agreement(records: pd.DataFrame) -> pd.DataFrame:
    """Per backend, the premises layer's decisions against the oracle: false allows and false blocks."""
    rev = records[records["stack"].str.contains("premises") & (records["outcome"] != "-")
                  & (records["change"] != "none")]
    allow = (rev["outcome"].isin(SAFE)) & ~(rev["oracle"].isin(SAFE))
    block = ~(rev["outcome"].isin(SAFE)) & (rev["oracle"].isin(SAFE))
    return pd.DataFrame({"backend": rev["backend"], "decisions": 1, "agree": (rev["outcome"] == rev["oracle"]).astype(int),
                         "false_allows": allow.astype(int), "false_blocks": block.astype(int),
                         "change": rev["change"]}).groupby("backend").sum(numeric_only=True).reset_index()


def beyond_stock(records: pd.DataFrame) -> list[str]:
    """Failures a stack showed where stock, in the same backend, case and repetition, did not; each with what
    stock's execution came to there (a run stock never completed cannot meet the failures after its park)."""
    key = ["backend", "case", "repetition"]
    stock = records[records["stack"] == "stock"].set_index(key)
    out = []
    for r in records[records["stack"] != "stock"].itertuples(index=False):
        k = (r.backend, r.case, r.repetition)
        if k not in stock.index:
            continue
        base = stock.loc[k]
        for f in FAILURES:
            if getattr(r, f) == "invalid" and base[f] != "invalid":
                note = "stock never completed there" if base["never_completes"] == "invalid" else f"stock: {base[f]}"
                out.append(f"{r.backend}/{r.stack}/{f} in {r.case}#{r.repetition} ({note})")
    return out


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    rows, matrices = [], []
    for backend, g in tab.groupby("backend", sort=False):
        stacks = list(dict.fromkeys(g["stack"]))
        cells = {}
        for s, f, c, n, u in zip(g["stack"], g["failure"], g["count"], g["executions"], g["unknown"]):
            cells[(s, f)] = (f"{c}/{n}" if c else "0") + (f" ({u} unknown)" if u else "")
        matrices.append(Matrix(f"{backend}: stack x failure (invalid executions / executions)", stacks,
                               list(FAILURES), cells))
        stock = g[g["stack"] == "stock"]
        if len(stock):
            rows.append(row(f"{backend}: failures stock LangGraph shows (of {len(FAILURES)})",
                            int((stock["count"] > 0).sum()), None, "count"))
        full = g[g["stack"] == "once+premises+pinning"]
        if len(full):
            rows.append(row(f"{backend}: failing executions x failures with all three layers", int(full["count"].sum()),
                            None, "count"))
        broken = independence(g)
        rows.append(row(f"{backend}: matrix cells against the independence claim", len(broken), None, "count"))
    agree = agreement(records)
    for r in agree.itertuples(index=False):
        rows.append(row(f"{r.backend}: premises layer vs oracle, false allows (of {r.decisions} decisions)",
                        int(r.false_allows), None, "count"))
        rows.append(row(f"{r.backend}: premises layer vs oracle, false blocks (of {r.decisions} decisions)",
                        int(r.false_blocks), None, "count"))
    broken = independence(tab)
    more = beyond_stock(records)
    witnesses = [f"- {b} / {s} / {f}: {w} (case {c})" for b, s, f, w, c, n in
                 zip(tab["backend"], tab["stack"], tab["failure"], tab["witness"], tab["witness_case"], tab["count"])
                 if n and s == "stock"]
    notes = (
        "What is measured: each execution runs the LangGraph refund agent (scenarios/agent/refund_agent.toml) in real "
        "processes: a start that parks at the approval, the case's premise change and redeployment applied while it "
        "is parked, k approvers forked together behind a barrier, a real SIGKILL at the case's crash point and "
        "LangGraph's documented recovery (invoke(None)) in a fresh process. Its history is judged by the checkers of "
        "all three families and the agent's own `completes`: "
        + "; ".join(f"{f} = {FAILURE_NAMES[f]}, owned by the {OWNER[f]} layer" for f in FAILURES)
        + ". A cell counts the executions whose checker said invalid. The claim (each layer removes exactly its own "
        "failures) is checked cell by cell: "
        + ("every cell agrees." if not broken else "cells against it: " + "; ".join(
            f"{b}/{s}/{f} = {c}" for b, s, f, c in broken) + ".")
        + (" Executions where a stack shows a failure stock did not show in the same case and repetition: "
           + "; ".join(more) + "." if more else "")
        + " No paper publishes this matrix (not in the papers).\n\nStock LangGraph's witnesses:\n" + "\n".join(witnesses))
    return Section("agent_matrix", "Agent: one LangGraph agent, three failure modes, the guard's layers", rows, notes,
                   matrices=matrices)
