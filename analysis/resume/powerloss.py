"""``resume_powerloss``: framework and configuration x point of the resume path -> what a power loss leaves.

Serves issue 31.  One record per cell (``runners/resume/powerloss.py``): the
effects the approved action fired in the world (0 / 1 / more), liveness (the
run ends done after the documented recovery and, where it waits again, the
re-sent approval), acknowledged progress kept (what the framework said was
saved is still there after the restart), whether the store loads, and the
witness.  The table is the records themselves, one row per cell; the report
adds the Hermitage matrix (configuration x point, one verdict per cell) and
the findings count what breaks per configuration.
"""
from __future__ import annotations

import pandas as pd

from analysis.report import Finding, Matrix, Section

COLUMNS = ["runtime", "framework", "release", "configuration", "point", "flush_at_park", "fault", "effects", "liveness", "acknowledged_kept",
           "store_loads", "state_after_restart", "witness"]


NA = "n/a"  # liveness of a cell the row cannot reach (a point its adapter declares not applicable)


CONTROL = "crash_only"  # the fault of the control cells: the same SIGKILL and remount, nothing unsynced dropped


def measured(tab: pd.DataFrame) -> pd.DataFrame:
    """The power-loss cells that ran (n/a cells left out: they count for nothing, kept or broken; the crash-only
    control cells left out: no power was lost in them)."""
    return tab[(tab["liveness"].fillna(NA) != NA) & (tab["fault"] != CONTROL)]  # a CSV read back: "n/a" is NaN


def changes(tab: pd.DataFrame) -> list[tuple[str, str]]:
    """What the power loss itself changed: each loss cell whose verdict differs from its crash-only control's (the
    same row, point and flush at park): (row, in words); [] when the run has no control cells."""
    control = {(r["runtime"], r["point"], bool(r["flush_at_park"])): verdict(r)
               for r in tab.to_dict("records") if r["fault"] == CONTROL}
    out = []
    for r in measured(tab).to_dict("records"):
        was = control.get((r["runtime"], r["point"], bool(r["flush_at_park"])))
        if was is not None and was != verdict(r):
            cell = f"{r['point']} ({'flushed' if r['flush_at_park'] else 'fresh'}, {r['fault']})"
            out.append((r["runtime"], f"{r['runtime']}, {cell}: {verdict(r)} where a crash alone gives {was}"))
    return out


def table(records: pd.DataFrame) -> pd.DataFrame:
    return records[COLUMNS].reset_index(drop=True)


def verdict(r: dict) -> str:
    """One cell in a few words: what broke, or ``once`` when the effect fired once and the run ended done; ``n/a``
    where the row cannot reach the point (its reason is the witness)."""
    if r["liveness"] == NA or pd.isna(r["liveness"]):  # (a CSV read back by pandas turns "n/a" into NaN)
        return NA
    if not r["store_loads"]:
        return "store lost"
    bad = []
    if r["effects"] > 1:
        bad.append(f"fired {r['effects']}x")
    if r["effects"] == 0:
        bad.append("never fired")
    if r["liveness"] != "valid":
        bad.append("stuck")
    if not r["acknowledged_kept"]:
        bad.append("acked lost")
    return ", ".join(bad) or "once"


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    columns = list(dict.fromkeys(f"{r.point} ({'flushed' if r.flush_at_park else 'fresh'}, {r.fault})"
                                 for r in tab.itertuples()))
    cells = {(r["runtime"], f"{r['point']} ({'flushed' if r['flush_at_park'] else 'fresh'}, {r['fault']})"): verdict(r)
             for r in tab.to_dict("records")}
    notes = ["The store's folder is the lab's lazy file system (unsynced data lives in its memory; `power_loss` drops "
             "it, `torn` keeps the last write's prefix to a 4 KiB boundary, `power_loss_posix` drops it on the file "
             "system's strict mode, where a file created, renamed or unlinked since its folder's last fsync is "
             "undone too); the effect ledger, the world, is outside "
             "it. After the loss every process of the cell is dead and the file system is mounted again; the "
             "restarted process recovers as LangGraph documents (`invoke(None)`) and re-sends the approval if the run "
             "waits for it again. `once`: the effect fired once and the run ended done with its acknowledged "
             "progress; otherwise what broke. `fresh`: the run was parked a moment before the approval (not flushed). "
             "Framework rows run in their own environments through their fork servers, as `resume_frameworks` runs "
             "them; their restart recovers through the adapter's `recover` (the framework's documented restore); "
             "`n/a`: a point the row's adapter declares unreachable, its reason in the table's witness."]
    for r in tab.to_dict("records"):
        if verdict(r) not in ("once", NA):
            notes.append(f"{r['runtime']}, {r['point']}: {r['witness']}")
    changed = changes(tab)
    if changed:
        notes.append("What the power loss itself changes (each loss cell beside its crash-only control: the same "
                     "SIGKILL at the same point, nothing unsynced dropped): " + "; ".join(c for _, c in changed) + ".")
    configs = "; ".join(dict.fromkeys(f"{r.runtime}: {r.configuration}" for r in tab.itertuples()))
    notes.append(f"Configurations (the lab's rows: the SQLite settings read from the store's connection; framework "
                 f"rows: the store as shipped, its files' journal modes in the witness): {configs}.")
    return Section("resume_powerloss", "Power loss within the flush window: is an approved effect made once?",
                   notes="\n\n".join(notes),
                   matrices=[Matrix("configuration x point of the loss", list(dict.fromkeys(tab["runtime"])), columns,
                                    cells)])


def label(configuration: str) -> str:
    """A row's configuration in a few words: the SQLite settings read (the lab's rows: after the last "; "), or the
    store's name (a framework row's description, before its parenthesis)."""
    last = configuration.split("; ")[-1]
    return last if last.startswith("journal_mode") else configuration.split(" (")[0]


def advice(tab: pd.DataFrame) -> str:
    """Which rows kept an approved effect to one in every cell, and which did not (from the table alone)."""
    whole, tab = tab, measured(tab)
    ok = [rt for rt, t in tab.groupby("runtime", sort=False)
          if ((t["effects"] == 1) & (t["liveness"] == "valid") & t["store_loads"].astype(bool)).all()]
    bad = [rt for rt in dict.fromkeys(tab["runtime"]) if rt not in ok]
    configs = {r.runtime: label(r.configuration) for r in tab.itertuples()}
    say = [f"kept an approved effect to one in every cell: {', '.join(f'{r} ({configs[r]})' for r in ok) or 'none'}"]
    if bad:
        say.append(f"did not: {', '.join(f'{r} ({configs[r]})' for r in bad)}")
    controlled = [rt for rt in dict.fromkeys(tab["runtime"])
                  if ((whole["runtime"] == rt) & (whole["fault"] == CONTROL)).any()]
    if controlled:  # the table's control cells (paper profile): what the loss itself changed, row by row
        changed = {rt for rt, _ in changes(whole)}
        same = [rt for rt in controlled if rt not in changed]
        say.append("against their crash-only controls, the power loss itself changed no outcome of "
                   f"{', '.join(same) or 'no row'}"
                   + (f" and changed outcomes of {', '.join(rt for rt in controlled if rt in changed)}"
                      if changed else ""))
    return "; ".join(say) + "."


def findings(tab: pd.DataFrame, records: pd.DataFrame) -> list[Finding]:
    out = [Finding("power loss", "", "Of the persistence layers in this run, " + advice(tab))]
    for rt, t in measured(tab).groupby("runtime", sort=False):
        n = len(t)
        twice, stuck = int((t["effects"] > 1).sum()), int((t["liveness"] != "valid").sum())
        lost, unreadable = int((~t["acknowledged_kept"].astype(bool)).sum()), int((~t["store_loads"].astype(bool)).sum())
        parts = [f"effect twice in {twice}", f"stuck in {stuck}", f"acknowledged progress lost in {lost}",
                 f"store unreadable in {unreadable}"]
        head = "keeps an approved effect to one" if not twice and not stuck else "does not keep an approved effect to one"
        out.append(Finding("power loss", rt, f"{head} across a power loss: " + ", ".join(parts) + f" of {n} cells."))
    by_row: dict[str, int] = {}
    for rt, _ in changes(tab):
        by_row[rt] = by_row.get(rt, 0) + 1
    for rt, k in by_row.items():
        out.append(Finding("power loss", rt, f"the power loss itself (not the crash) changed the outcome of {k} "
                                             "cell(s) against their crash-only controls (report: what it changes)."))
    return out
