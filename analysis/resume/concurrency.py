"""The concurrent-resume table (``resume_concurrency``): k resumers, one parked interrupt.

Serves the paper's concurrent-delivery result (arXiv 2608.03836): k processes
resuming one parked interrupt fire the gated effect k times (saturation 1.0
in most cells for LangGraph 1.2.9: ``data/reference/resume.toml``); the consume-once gate serves one racer
and refuses the rest.  One record per race; saturation = gated effects
fired / k, averaged over the cell's repetitions, with its interval (min, max)
over them; a racer is served (parked or done), refused, failed (the runtime
raised) or unanswered (indeterminate).

Same seed, same table (issue 24 §8), stated exactly: the cell's parameters
and repetitions are exact (:data:`EXACT`); what the racers got depends on
which of them the scheduler ran first, so those columns vary from one
same-seed run to the next (:data:`VARYING`, also in the report's matrix
titles) for a runtime that lets the racers through, never for one that serves
one and refuses the rest (a test runs the grid twice on PostgreSQL).
"""
from __future__ import annotations

import pandas as pd

from analysis.reference import reference
from analysis.resume.langgraph_findings import note as langgraph_note
from analysis.resume.langgraph_findings import remit_races
from analysis.report import Matrix, Section, row
from vocabulary.resume import DONE, PARKED, REFUSED

#: what the k racers of one race got, counted (the frameworks table's losers' fates are read from these)
RACER_COUNTS = ("served", "refused", "failed", "indeterminate")


def racer_counts(answers: list[dict | None]) -> dict[str, int]:
    """The racers' answers counted: served (parked or done), refused, failed (the framework's declared failure: a
    loud answer, never served) and indeterminate (no status)."""
    got = [a["status"]["state"] for a in answers if a and "status" in a]
    return {"served": sum(1 for s in got if s in (PARKED, DONE)), "refused": sum(1 for s in got if s == REFUSED),
            "failed": sum(1 for s in got if s not in (PARKED, DONE, REFUSED)), "indeterminate": len(answers) - len(got)}


#: the columns two same-seed runs give equal, and those the race's timing decides (an interval over repetitions)
EXACT = ("runtime", "backend", "k", "jitter_ms", "repetitions")
VARYING = ("effects_fired_mean", "saturation", "saturation_min", "saturation_max", "served_mean", "refused_mean",
           "failed_mean", "indeterminate")
COLUMNS = [*EXACT, *VARYING]


def table(records: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (rt, be, k, j), g in records.groupby(["runtime", "backend", "k", "jitter_ms"]):
        out.append({"runtime": rt, "backend": be, "k": int(k), "jitter_ms": float(j), "repetitions": len(g),
                    "effects_fired_mean": float(g["effects_fired"].mean()),
                    "saturation": float((g["effects_fired"] / g["k"]).mean()),
                    "saturation_min": float((g["effects_fired"] / g["k"]).min()),
                    "saturation_max": float((g["effects_fired"] / g["k"]).max()),
                    "served_mean": float(g["served"].mean()), "refused_mean": float(g["refused"].mean()),
                    "failed_mean": float(g["failed"].mean()),
                    "indeterminate": int(g["indeterminate"].sum())})
    return pd.DataFrame(out, columns=COLUMNS)


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    ref = reference("resume_concurrency")
    published = {(v["backend"], int(v["k"]), float(v["jitter_ms"])): v["saturation"] for v in ref.get("values", [])}
    runtimes = list(dict.fromkeys(tab["runtime"]))
    compared = next((r for r in runtimes if "langgraph" in r.lower() and "guard" not in r.lower()
                     and "remit" not in r.lower()),
                    "naive" if "naive" in runtimes else None)
    rows, matrices = [], []
    for rt in runtimes:
        t = tab[tab["runtime"] == rt]
        sat = int((t["saturation"] >= 0.999).sum())
        rows.append(row(f"{rt}: cells with saturation 1.0", sat, ref.get("cells_saturated") if rt == compared else None,
                        "count", ours_of=len(t), paper_of=ref.get("cells") if rt == compared else None))
        r = records[records["runtime"] == rt]
        one = int((r["effects_fired"] == 1).sum())
        rows.append(row(f"{rt}: races with exactly one gated effect", one, None, "count", ours_of=len(r)))
        if r["failed"].sum():  # racers answered with the runtime's error: neither served nor refused
            rows.append(row(f"{rt}: racers that failed (the runtime's error)", int(r["failed"].sum()), None, "count",
                            ours_of=int(r["k"].sum())))
        keys = [f"{b} k={k}" for b, k in dict.fromkeys(zip(t["backend"], t["k"]))]
        cols = [f"{j:g} ms" for j in sorted(set(t["jitter_ms"]))]
        cells = {(f"{b} k={k}", f"{j:g} ms"): _fmt(s) for b, k, j, s in zip(t["backend"], t["k"], t["jitter_ms"], t["saturation"])}
        paper = {}
        if rt == compared:
            for (b, k, j) in zip(t["backend"], t["k"], t["jitter_ms"]):
                paper[(f"{b} k={k}", f"{j:g} ms")] = _fmt(published.get((b, int(k), float(j)), ref["default_saturation"]))
        matrices.append(Matrix(f"{rt}: saturation (effects fired / k; varies between same-seed runs: the race's "
                               "timing), backend x k x jitter", keys, cols, cells, paper))
    notes = ("Each race: one run parked, k warm resumer processes released by one barrier, each then waiting its own "
             f"seeded start jitter in [0, jitter] ms. The paper's saturation is {ref['runtime']}'s; it is set beside "
             f"{compared or 'no runtime'} ('naive' behaves as LangGraph does: every racer reads the parked head and runs on). "
             f"Exact between two runs of one seed: {', '.join(EXACT)}; decided by the race's timing, so varying: "
             f"{', '.join(VARYING)} (saturation_min and saturation_max: its interval over the repetitions). "
             "The interrupt node's declared work time is in scenarios/resume/graph_approval_slow.toml.")
    if compared is not None and any(m.differences() for m in matrices):
        notes += (f" Cells where {compared} differs from the paper: its window (from reading the parked head to the "
                  "first checkpoint after the interrupt: the node's declared work) is longer than the largest "
                  "jitter, so every racer still reads the parked head; the paper's LangGraph window on PostgreSQL "
                  "was apparently just under its largest jitter, so some racers read a head that had moved on.")
    if "postgres" not in set(tab["backend"]):
        notes += " PostgreSQL cells are missing from this run (PostgreSQL was unreachable)."

    notes = " ".join(x for x in (notes, langgraph_note(concurrency=tab), remit_races(tab, records)) if x)  # the paper's LangGraph findings beside this run's
    return Section("resume_concurrency", "Resume: k concurrent resumers of one parked interrupt", rows, notes,
                   matrices=matrices)
