"""The counting rules of the decision-revalidation family: one definition each, one code path.

Every revalidation analysis (controlled outcomes, durable cells, dependency
omission) and every figure counts through :func:`classify`; no runner
computes a count.  A record is one execution and carries at least
``oracle`` (the mutation's declared outcome, which the loader proved is the
one its rules imply), ``outcome`` (what the mechanism said), ``released``
(whether the effect was committed) and ``payload_stale`` (whether the
released payload differs from the one the state it landed on would give).

- an **invalid effect** is an effect *released* with a stale payload, or
  released although the oracle is REPLAN or BLOCK.  It is counted from what
  was actually released, never from the mechanism's stated outcome;
- a **false allow** is an effect released although the oracle is REPLAN or
  BLOCK (the action should not have happened at all; a subset of invalid
  effects);
- a **false block** is an outcome REPLAN or BLOCK where the oracle is KEEP or
  REFRESH;
- an **unnecessary replan** is an outcome REPLAN where the oracle is KEEP
  (the paper's "safe changes");
- **oracle agreement** is outcome = oracle;
- **premises per change** is premises evaluated / changes applied.

The outcome sets are written out by name, so the counts do not depend on the
integer order of ``Outcome``.
"""
from __future__ import annotations

import pandas as pd

#: Oracles under which the effect must not be released at all.
FORBIDS_RELEASE = ("REPLAN", "BLOCK")
#: Oracles under which the effect may be released (REFRESH: with a refreshed payload).
ALLOWS_RELEASE = ("KEEP", "REFRESH")
#: Outcomes that stop the effect.
STOPS = ("REPLAN", "BLOCK")

COUNTS = ("invalid_effect", "false_allow", "false_block", "unnecessary_replan")

NOTES = (
    "An *invalid effect* is an effect that was released with a stale payload (its payload differs from the one the "
    "state it landed on gives), or released although the oracle is REPLAN or BLOCK; it is counted from what was "
    "released, not from the outcome a mechanism stated. A *false allow* is an effect released although the oracle is "
    "REPLAN or BLOCK (a subset of invalid effects); a *false block* is REPLAN or BLOCK where the oracle is KEEP or "
    "REFRESH; an *unnecessary replan* is REPLAN where the oracle is KEEP (the paper's \"safe changes\" are the KEEP "
    "cases). The oracle is each mutation's declared outcome, which the loader proves is the outcome its rules imply "
    "(a brute-force reference evaluator, independent of the mechanisms' code, applies every variant to the initial "
    "objects and takes the dominant severity of the failing premises, BLOCK > REPLAN > REFRESH > KEEP)."
)


def classify(records: pd.DataFrame) -> pd.DataFrame:
    """Per-execution booleans of the counting rules (index aligned with ``records``).

    Columns: ``agree``, ``invalid_effect``, ``false_allow``, ``false_block``,
    ``unnecessary_replan`` and ``premises_per_change``.
    """
    missing = [c for c in ("oracle", "outcome", "released", "payload_stale") if c not in records.columns]
    if missing:
        raise KeyError(f"revalidation records lack the column(s) {', '.join(missing)}")
    oracle, outcome = records["oracle"].astype(str), records["outcome"].astype(str)
    released = records["released"].astype(bool)
    stale = records["payload_stale"].astype(bool)
    forbidden = oracle.isin(FORBIDS_RELEASE)
    out = pd.DataFrame({
        "agree": outcome == oracle,
        "invalid_effect": released & (stale | forbidden),
        "false_allow": released & forbidden,
        "false_block": outcome.isin(STOPS) & oracle.isin(ALLOWS_RELEASE),
        "unnecessary_replan": (outcome == "REPLAN") & (oracle == "KEEP"),
    }, index=records.index)
    if {"premises_evaluated", "changes"} <= set(records.columns):
        out["premises_per_change"] = records["premises_evaluated"] / records["changes"]
    return out


def with_counts(records: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``records[keys]`` beside the per-execution counting booleans."""
    return pd.concat([records[keys].reset_index(drop=True), classify(records).reset_index(drop=True)], axis=1)


def with_all(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``frame`` stacked with copies where each subset of ``columns`` reads ``all``: grouping the result by
    those columns gives every per-value row beside its totals (``all``) in one pass."""
    from itertools import combinations

    parts = [frame]
    for k in range(1, len(columns) + 1):
        for subset in combinations(columns, k):
            parts.append(frame.assign(**dict.fromkeys(subset, "all")))
    return pd.concat(parts, ignore_index=True)


def order_with_all(values, first: list[str] | None = None) -> list[str]:
    """``all`` first, then ``first`` (in its order, those present), then the rest in order of appearance."""
    seen = [v for v in dict.fromkeys(values) if v != "all"]
    head = [v for v in (first or []) if v in seen]
    return ["all", *head, *[v for v in seen if v not in head]]


def run_counts(records: pd.DataFrame) -> dict[str, int]:
    """What a run covered, for the report's prose: workloads, mutation cases (workload × class), schedules."""
    out = {"executions": len(records)}
    if "workload" in records:
        out["workloads"] = int(records["workload"].nunique())
    if {"workload", "mutation_class"} <= set(records.columns):
        out["mutation_cases"] = int(records[["workload", "mutation_class"]].drop_duplicates().shape[0])
    if "mutation_class" in records:
        out["mutation_classes"] = int(records["mutation_class"].nunique())
    if "schedule" in records:
        out["schedules"] = int(records["schedule"].nunique())
    if "mechanism" in records:
        out["mechanisms"] = int(records["mechanism"].nunique())
    return out


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "es" if word.endswith("s") else "s")
