"""``resume_hosts``: k racers on k hosts beside k racers on one host (issue 25 §6).

Serves issue 25.  One record per race (``runners/resume/nemesis_hosts.py``);
the table folds a cell's races: saturation (gated effects / k) mean and
range, served / refused / indeterminate racers per race (mean), the start
spread, and the worst CO, EO and liveness verdicts.  The report's matrix
sets, per runtime and k, the two placements side by side; its notes say where
they differ, from the records.
"""
from __future__ import annotations

import pandas as pd

from analysis.report import Matrix, Section
from analysis.resume.verdicts import worst_verdict

COLUMNS = ["runtime", "k", "placement", "races", "saturation", "saturation_min", "saturation_max", "served",
           "refused", "indeterminate", "failed", "start_skew_ms", "co_verdict", "eo_verdict", "liveness_verdict"]


def table(records: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (rt, k, pl), g in records.groupby(["runtime", "k", "placement"], sort=False):
        out.append({"runtime": rt, "k": int(k), "placement": pl, "races": len(g),
                    "saturation": float(g["saturation"].mean()), "saturation_min": float(g["saturation"].min()),
                    "saturation_max": float(g["saturation"].max()), "served": float(g["served"].mean()),
                    "refused": float(g["refused"].mean()), "indeterminate": float(g["indeterminate"].mean()),
                    "failed": float(g["failed"].mean()), "start_skew_ms": float(g["start_skew_ms"].median()),
                    "co_verdict": worst_verdict(g["co_verdict"]), "eo_verdict": worst_verdict(g["eo_verdict"]),
                    "liveness_verdict": worst_verdict(g["liveness_verdict"])})
    return pd.DataFrame(out, columns=COLUMNS)


def _says(r: pd.Series) -> str:
    bad = [p for p, v in (("CO", r["co_verdict"]), ("EO", r["eo_verdict"]), ("liveness", r["liveness_verdict"]))
           if v != "valid"]
    return (f"saturation {r['saturation']:.2f} ({r['saturation_min']:.2f}-{r['saturation_max']:.2f}), "
            f"served {r['served']:g}, refused {r['refused']:g}" + (f"; {', '.join(bad)} not valid" if bad else ""))


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    rows = [f"{rt}, k={k}" for rt, k in dict.fromkeys(zip(tab["runtime"], tab["k"]))]
    cells = {(f"{r['runtime']}, k={r['k']}", r["placement"]): _says(r) for _, r in tab.iterrows()}
    notes = ["Each racer is a process in a network namespace: `k_hosts` gives each its own namespace and veth link "
             "to the lab's private PostgreSQL 15 cluster, `one_host` puts all k in one namespace behind one link. "
             "Per race the racers connect, stop at a start line, and are let go together; no fault is injected. "
             "Saturation is gated effects fired / k (1.0: every racer fired it; 1/k: exactly one did). The start line is "
             "released by one write to each racer's pipe in turn, so the start spread (the racers' first "
             "statements, apart) grows with k and with the machine's load; it is reported, not controlled."]
    for (rt, k), g in tab.groupby(["runtime", "k"], sort=False):
        by = {r["placement"]: r for _, r in g.iterrows()}
        if set(by) == {"one_host", "k_hosts"}:
            a, b = by["one_host"], by["k_hosts"]
            same = (a["saturation"] == b["saturation"] and a["served"] == b["served"]
                    and a["co_verdict"] == b["co_verdict"] and a["eo_verdict"] == b["eo_verdict"])
            notes.append(f"{rt}, k={k}: " + ("the same on k hosts as on one host" if same else
                         f"one host: {_says(a)}; k hosts: {_says(b)}")
                         + f" (median start spread {a['start_skew_ms']:.1f} ms on one host, "
                         f"{b['start_skew_ms']:.1f} ms on k hosts; {int(a['races'])} and {int(b['races'])} races).")
    return Section("resume_hosts", "k racers on k hosts beside k racers on one host", notes="\n\n".join(notes),
                   matrices=[Matrix("runtime, k x placement", rows, ["one_host", "k_hosts"], cells)])
