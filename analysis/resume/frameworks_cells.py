"""``resume_frameworks_cells``: cell x framework@release, each cell naming the properties it violated.

Serves issue 27 §2 and the report's opening Findings.  ``resume_frameworks``
folds every cell into one verdict per property and shows only the first
violation; a user asking "which frameworks resume exactly once after a
SIGKILL?" needs the cells apart.  This artifact keeps them apart, Hermitage
style, in four groups:

- **crash**: a SIGKILL at a named point, then the framework's recovery;
- **second resume or fork**: a second resume value sent to a parked or consumed
  interrupt, a fork or a replay of a past checkpoint;
- **race**: k resumers at once (``concurrent_resume``, every backend, k and jitter);
- **other**: the baseline and the state-validity cells.

A cell reads ``holds``, ``violates P, Q`` (the properties with an invalid
execution), ``unknown P`` (no violation, but a property the evidence could not
decide: never read as holding) or ``n/a`` (the framework cannot express it).
:func:`findings` writes one line per framework@release for the report's
opening: safe or not, which properties break, the worst witness and its cell,
and the two direct answers ("exactly once after a SIGKILL?", "refuses a second
resumer loudly?", the latter from :mod:`analysis.resume.frameworks_losers`).
"""
from __future__ import annotations

import pandas as pd

from analysis.report import Finding, Matrix, Section
from analysis.resume import frameworks_losers
from analysis.resume.remedies import remedy

GROUPS = ("crash", "second resume or fork", "race", "other")
SECOND = ("second_resume_head", "second_resume_by_id", "fork_twice", "replay_past_checkpoint")
#: the order in which a violation is the worst one to show (effects first: they reach the world)
SEVERITY = ("EO", "CO", "PC", "RD", "CV", "FD", "liveness")
COLUMNS = ["runtime", "group", "fault_cell", "verdict", "violated", "unknown", "witness"]


def group(cell: str, crash_point: str, k: int) -> str:
    if k > 0:
        return "race"
    if crash_point != "-":
        return "crash"
    if cell in SECOND:
        return "second resume or fork"
    return "other"


def _ordered(props) -> list[str]:
    return sorted(set(props), key=lambda p: SEVERITY.index(p) if p in SEVERITY else len(SEVERITY))


def table(records: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (rt, cell), t in records.groupby(["runtime", "fault_cell"], sort=False):
        g = group(cell, str(t["crash_point"].iloc[0]), int(t["k"].max()))
        bad = t[t["verdict"] == "invalid"]
        violated = _ordered(bad["property"])
        unknown = _ordered(t.loc[t["verdict"] == "unknown", "property"])
        if set(t["verdict"]) == {"not applicable"}:
            verdict = "n/a"
        elif violated:
            verdict = "violates " + ", ".join(violated)
        elif unknown:
            verdict = "unknown " + ", ".join(unknown)
        else:
            verdict = "holds"
        witness = ""
        if violated:
            worst = bad[bad["property"] == violated[0]]
            witness = str(worst["witness"].iloc[0])
        elif verdict == "n/a":
            witness = str(t["witness"].iloc[0])
        out.append({"runtime": rt, "group": g, "fault_cell": cell, "verdict": verdict,
                    "violated": ",".join(violated), "unknown": ",".join(unknown), "witness": witness})
    tab = pd.DataFrame(out, columns=COLUMNS)
    if tab.empty:
        return tab
    order = {g: i for i, g in enumerate(GROUPS)}
    return tab.sort_values(["runtime", "group", "fault_cell"], key=lambda s: s.map(order) if s.name == "group"
                           else s, kind="stable").reset_index(drop=True)


def matrices(tab: pd.DataFrame) -> list[Matrix]:
    runtimes = list(dict.fromkeys(tab["runtime"]))
    out = []
    for g in GROUPS:
        t = tab[tab["group"] == g]
        if t.empty:
            continue
        cells = list(dict.fromkeys(t["fault_cell"]))
        out.append(Matrix(f"{g} cells", runtimes, cells,
                          {(r.runtime, r.fault_cell): r.verdict for r in t.itertuples()}))
    return out


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    notes = ("Cells: crash (a SIGKILL at a named point, then the framework's recovery), second resume or fork, race "
             "(k resumers at once, every backend, k and jitter folded), other (the baseline and state validity). "
             "`violates P` names every property with an invalid execution in the cell; `unknown P` a property the "
             "evidence could not decide (never counted as holding); `n/a` a cell the framework cannot express. "
             "The witness of each violation is in `tables/resume_frameworks_cells.csv`.")
    return Section("resume_frameworks_cells", "Frameworks cell by cell: crash, second resume, race",
                   notes=notes, matrices=matrices(tab))


def sigkill_answer(tab: pd.DataFrame, runtime: str) -> str:
    """Exactly once after a SIGKILL: EO (and PC) in every crash cell of ``runtime``."""
    t = tab[(tab["runtime"] == runtime) & (tab["group"] == "crash")]
    if t.empty or set(t["verdict"]) == {"n/a"}:
        return "no crash cell could be run"
    run = int((t["verdict"] != "n/a").sum())
    broken = t[t["violated"].str.contains("EO|PC")]
    if not broken.empty:
        return f"no, in {len(broken)} of {run} crash cells (first: {broken.iloc[0]['fault_cell']})"
    undecided = t[t["unknown"].str.contains("EO|PC")]
    if not undecided.empty:
        return f"undecided: EO or PC unknown in {len(undecided)} of {run} crash cells"
    stuck = t[t["violated"].str.contains("liveness")]
    if not stuck.empty:  # nothing ran twice because the run never went on: not "exactly once"
        return f"no: nothing ran twice, but the run never finished in {len(stuck)} of {run} crash cells"
    return f"yes, in all {run} crash cells run"


def findings(tab: pd.DataFrame, records: pd.DataFrame) -> list[Finding]:
    """One line per framework@release: safe or not, the two direct answers, the worst witness and its cell."""
    losers = {r["runtime"]: r for r in frameworks_losers.table(records).to_dict("records")}
    out = []
    for rt, t in tab.groupby("runtime", sort=False):
        meta = records[records["runtime"] == rt].iloc[0]
        violated = _ordered(p for v in t["violated"] for p in v.split(",") if p)
        unknown = _ordered(p for v in t["unknown"] for p in v.split(",") if p)
        run = int((t["verdict"] != "n/a").sum())
        if violated:
            head = f"**not safe**: breaks {', '.join(violated)} in {int((t['violated'] != '').sum())} of {run} cells."
        elif unknown:
            head = f"**undecided**: no violation, but {', '.join(unknown)} unknown in some cells."
        else:
            head = f"**safe** in every cell run ({run} cells)."
        loud = frameworks_losers.answer(losers[rt]) if rt in losers else "no race was run"
        text = (f"({meta['framework']} {meta['release']}) {head} Exactly once after a SIGKILL: "
                f"{sigkill_answer(tab, rt)}. Refuses a second resumer loudly: {loud}.")
        if violated:
            worst = t[t["violated"].str.split(",").map(lambda ps: violated[0] in ps)].iloc[0]
            text += f" Worst witness ({worst['fault_cell']}): {worst['witness'].rstrip('.')}."
            text += f" {remedy(meta['framework'])}".rstrip()
        out.append(Finding("frameworks", rt, text))
    return out


HEADLINE = ["framework@release", "installed", "verdict", "exactly once after a SIGKILL", "refuses a second resumer loudly"]


def headline(cells: pd.DataFrame, losers: pd.DataFrame, releases: dict[str, str]) -> pd.DataFrame:
    """The README's headline table, one row per framework@release, from this run's two tables (cells, losers)
    and each row's installed release (``releases``: runtime -> "framework version")."""
    loser = {r["runtime"]: r for r in losers.to_dict("records")}
    out = []
    for rt, t in cells.groupby("runtime", sort=True):
        violated = _ordered(p for v in t["violated"] for p in v.split(",") if p)
        unknown = _ordered(p for v in t["unknown"] for p in v.split(",") if p)
        verdict = ("breaks " + ", ".join(violated) if violated else "undecided: " + ", ".join(unknown) if unknown
                   else "safe in every cell run")
        sigkill = sigkill_answer(cells, rt).split(" (first:")[0]
        loud = frameworks_losers.answer(loser[rt]) if rt in loser else "no race was run"
        out.append(dict(zip(HEADLINE, (rt, releases.get(rt, "?"), verdict, sigkill, loud))))
    return pd.DataFrame(out, columns=HEADLINE)
