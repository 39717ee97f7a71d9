"""``resume_nemesis``: runtime x fault x property, Hermitage style, each violation with its witness (issue 25).

Serves issue 25.  One record per cell x property (``runners/resume/nemesis.py``):
the family checkers' verdict on the cell's history (indeterminate calls
included: unknown where the evidence cannot decide, never valid by default)
and its witness, beside what the schedule saw: the fault's own evidence, the
gated effect's count, the calls' answers, and whether the run was stuck
(not done) after every resumer had answered and each indeterminate one had
re-sent, before the recovery.  The report's matrix reads one cell per
runtime x fault; its notes say, for each fault, what changed against the
same runtime's ``none`` cell (the same schedule without the fault), and
answer the two questions of the issue from the records: after a cut at
commit of the claim, does a retry claim twice or is the run stuck; after the
store's crash, is a consumed interrupt still consumed.
"""
from __future__ import annotations

import re

import pandas as pd

from analysis.report import Finding, Matrix, Section
from analysis.resume.verdicts import worst_verdict

COLUMNS = ["runtime", "fault", "k", "property", "repetitions", "verdict", "effects_fired", "effects_fired_max",
           "stuck_before_recovery", "stuck_after_recovery", "state_before_recovery", "state_after_recovery", "served",
           "refused", "indeterminate", "crashes", "evidence", "calls", "witness", "interrupt_consumed_max"]
#: the faults in the order faults/resume/nemesis.py declares them (the baseline first); others follow as found
ORDER = ("none", "partition", "cut_at_commit", "commit_lost", "slow_store", "store_crash", "client_paused", "sigkill",
         "partition+sigkill", "store_crash+sigkill", "client_paused+sigkill")


def baseline(fault: str) -> str:
    """The cell a fault is compared with: ``none``; ``sigkill`` for a fault combined with a SIGKILL."""
    return "sigkill" if fault.endswith("+sigkill") else "none"


def table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per runtime x fault x k x property: the worst verdict over repetitions, the gated effect's mean and
    maximum count, how many repetitions were stuck before (and after) the recovery, and the evidence, calls and
    witness of the first repetition that shows the worst verdict."""
    out = []
    for (rt, f, k, prop), g in records.groupby(["runtime", "fault", "k", "property"], sort=False):
        worst = worst_verdict(g["verdict"])
        first = g[g["verdict"] == worst].iloc[0]
        out.append({"runtime": rt, "fault": f, "k": int(k), "property": prop, "repetitions": len(g), "verdict": worst,
                    "effects_fired": float(g["effects_fired"].mean()), "effects_fired_max": int(g["effects_fired"].max()),
                    "stuck_before_recovery": int(g["stuck_before_recovery"].astype(bool).sum()),
                    "stuck_after_recovery": int((g["state_after_recovery"] != "done").sum()),
                    "state_before_recovery": first["state_before_recovery"],
                    "state_after_recovery": first["state_after_recovery"],
                    "served": int(first["served"]), "refused": int(first["refused"]),
                    "indeterminate": int(first["indeterminate"]), "crashes": int(g["crashes"].sum()),
                    "evidence": first["evidence"], "calls": first["calls"], "witness": first["witness"],
                    # the interrupt node's consume traces (the ledger's own count; records before it was kept: -1)
                    "interrupt_consumed_max": int(g["interrupt_consumed"].max())
                    if "interrupt_consumed" in g and g["interrupt_consumed"].notna().all() else -1})
    t = pd.DataFrame(out, columns=COLUMNS)
    rank = {f: i for i, f in enumerate(ORDER)}
    t["_order"] = [rank.get(f, len(ORDER)) for f in t["fault"]]
    runtimes = {rt: i for i, rt in enumerate(dict.fromkeys(t["runtime"]))}
    t["_rt"] = [runtimes[rt] for rt in t["runtime"]]
    return t.sort_values(["k", "_rt", "_order"], kind="stable").drop(columns=["_order", "_rt"]).reset_index(drop=True)


def cell_says(g: pd.DataFrame) -> str:
    """One matrix cell: ``holds``, ``violates EO,CO``, ``unknown ...``; ``stuck until recovery`` appended."""
    bad = [p for p, v in zip(g["property"], g["verdict"]) if v == "invalid"]
    unk = [p for p, v in zip(g["property"], g["verdict"]) if v == "unknown"]
    text = "violates " + ",".join(bad) if bad else ("unknown " + ",".join(unk) if unk else "holds")
    r0 = g.iloc[0]
    n = int(r0["repetitions"])
    of = "" if n == 1 else f" in {{}} of {n}"
    if int(r0["stuck_after_recovery"]):
        text += "; stuck even after recovery" + of.format(int(r0["stuck_after_recovery"]))
    elif int(r0["stuck_before_recovery"]):
        text += "; stuck until recovery" + of.format(int(r0["stuck_before_recovery"]))
    return text


def _changes(base: pd.DataFrame, g: pd.DataFrame) -> str:
    """What the fault changed against the runtime's ``none`` cell, from the records."""
    b = dict(zip(base["property"], base["verdict"]))
    out = [f"{p} {b.get(p, '?')} -> {v}" for p, v in zip(g["property"], g["verdict"]) if b.get(p) != v]
    b0, g0 = base.iloc[0], g.iloc[0]
    if b0["effects_fired"] != g0["effects_fired"]:
        out.append(f"gated effect fired {b0['effects_fired']:g} -> {g0['effects_fired']:g} time(s) (mean)")
    for col, what in (("stuck_before_recovery", "repetitions stuck until recovery"),
                      ("stuck_after_recovery", "repetitions stuck even after recovery")):
        if b0[col] != g0[col]:
            out.append(f"{what} {b0[col]} -> {g0[col]}")
    for col, what in (("served", "calls served"), ("refused", "calls refused")):
        if b0[col] != g0[col]:
            out.append(f"{what} {b0[col]} -> {g0[col]}")
    return "; ".join(out) or "nothing"


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    runtimes = list(dict.fromkeys(tab["runtime"]))
    faults = list(dict.fromkeys(tab["fault"]))
    ks = list(dict.fromkeys(tab["k"]))
    matrices, notes = [], []
    notes.append("Every resumer is a process in a network namespace of its own, reaching the lab's private "
                 "PostgreSQL 15 cluster (fsync on) only over its veth link; every fault is real: the link set down, "
                 "the connection closed by the lab's wire-protocol proxy after the claim's commit was sent and before "
                 "its reply, the postmaster SIGKILLed and restarted with crash recovery, the resumer SIGSTOPped. "
                 "Schedule (faults/resume/nemesis.py): the victim (host 0) resumes and stops holding its claim, the "
                 "fault lands, the others resume, the fault heals, every indeterminate caller re-sends once from a "
                 "fresh process, then one recovery if the run is not done. 'stuck until recovery': the run was not "
                 "done once every resumer had answered and re-sent. A call whose client lost its connection is "
                 "indeterminate; the checkers judge with it.")
    reps = sorted(set(int(r) for r in tab["repetitions"]))
    if reps == [1]:
        notes.append("One repetition per cell: where the others race the victim (slow_store, and every cell after "
                     "the fault heals), a cell can read differently in another run; the paper profile runs three "
                     "and keeps the worst.")
    for k in ks:
        t = tab[tab["k"] == k]
        cells = {(rt, f): cell_says(g) for (rt, f), g in t.groupby(["runtime", "fault"], sort=False)}
        matrices.append(Matrix(f"runtime x fault, k = {k} hosts", runtimes, faults, cells))
        for (rt, f), g in t.groupby(["runtime", "fault"], sort=False):
            base = t[(t["runtime"] == rt) & (t["fault"] == baseline(f))]
            r0 = g.iloc[0]
            wit = g.loc[g["witness"] != "", ["property", "witness"]]
            line = f"k={k}, {rt}, {f}: {cell_says(g)}."
            if f != baseline(f) and len(base):
                line += f" Against {'no fault' if baseline(f) == 'none' else 'the SIGKILL alone'}: {_changes(base, g)}."
            line += f" Evidence: {r0['evidence']}. Calls: {r0['calls']}."
            if len(wit):
                line += f" Witness ({wit.iloc[0]['property']}): {wit.iloc[0]['witness']}"
            notes.append(line)
    notes += _answers(tab)
    return Section("resume_nemesis", "The nemesis: resumers on separate hosts, faults on the wire and in the store",
                   notes="\n\n".join(notes), matrices=matrices)


def _answers(tab: pd.DataFrame) -> list[str]:
    """The issue's two questions, answered per runtime from the records."""
    out = []
    for rt, t in tab.groupby("runtime", sort=False):
        for r in t[t["fault"].isin(("cut_at_commit", "commit_lost"))].drop_duplicates(["fault", "k"]).itertuples():
            reps = f" (worst of {r.repetitions} repetitions)" if r.repetitions > 1 else ""
            resend = re.search(r"/resume@h0#(?:[2-9]|\d\d+): (\w+)", str(r.calls))
            own = re.search(r"/resume@h0#1: (\w+)", str(r.calls))
            claim = (f"the gated effect fired up to {r.effects_fired_max} time(s); the victim's own call answered "
                     f"{own.group(1) if own else '?'} and its re-send was "
                     + (resend.group(1) if resend else "not made (its call was not indeterminate)"))
            if r.stuck_after_recovery:
                run = (f"the run stayed {r.state_after_recovery} even after the recovery in {r.stuck_after_recovery} "
                       "repetition(s): stuck for good")
            elif r.stuck_before_recovery:
                run = (f"the run was stuck ({r.state_before_recovery}) after the retries in {r.stuck_before_recovery} "
                       "repetition(s) and moved only with the recovery")
            else:
                run = "the run was done after the retries"
            what = "a cut at commit" if r.fault == "cut_at_commit" else "a lost commit"
            out.append(f"After {what} ({rt}, k={r.k}){reps}: {claim}; {run}.")
        for r in t[t["fault"] == "store_crash"].drop_duplicates(["k"]).itertuples():
            later = [c for c in str(r.calls).split("; ") if "#1:" not in c and "/recover" not in c]
            again = [c for c in later if c.split(": ", 1)[-1].startswith(("done", "parked"))]
            if r.interrupt_consumed_max >= 0:  # the ledger's trace says how often the interrupt node consumed a value
                said = ("still consumed: the interrupt node consumed a value once" if r.interrupt_consumed_max <= 1
                        else f"consumed again: the interrupt node consumed a value {r.interrupt_consumed_max} times")
                said += (f" (in the trace; {len(again)} later resume(s) answered {again[0].split(': ', 1)[-1][:20]}"
                         " all the same)" if again and r.interrupt_consumed_max <= 1 else " (in the trace)")
            else:
                said = ("still consumed: every later resume was refused" if not again else
                        f"served again by {len(again)} later resume(s) ({again[0]})")
            out.append(f"After the store's crash ({rt}, k={r.k}): the consumed interrupt was " + said
                       + f"; gated effect fired up to {r.effects_fired_max} time(s)"
                       + (f" (the calls of the first repetition with the worst verdict, of {r.repetitions})"
                          if r.repetitions > 1 else "") + ".")
    return out


def findings(tab: pd.DataFrame, records: pd.DataFrame) -> list[Finding]:
    out = []
    for rt, t in tab.groupby("runtime", sort=False):
        says: dict[str, dict[str, list[int]]] = {}  # fault -> what the cell says -> the k it says it at
        for (f, k), g in t.groupby(["fault", "k"], sort=False):
            says.setdefault(f, {}).setdefault(cell_says(g), []).append(int(k))
        ks = lambda k: "k=" + ",".join(map(str, k))  # noqa: E731
        base = "; ".join(f"{s} ({ks(k)})" for s, k in says.get("none", {}).items()) or "no baseline cell"
        broken = [f"{f}: {s} ({ks(k)})" for f, by in says.items() if f != "none" for s, k in by.items()
                  if s != "holds"]
        out.append(Finding("nemesis", rt, f"without a fault it {base}; " + (
            "under every fault it holds" if not broken else "under the nemesis: " + "; ".join(broken)) + "."))
    return out
