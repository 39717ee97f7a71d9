"""``resume_frameworks_losers``: when k resumers race, what each loser got, counted per framework@release.

Serves issue 27 §2 ("who refuses a second resumer loudly?"), beside
``resume_frameworks``, whose saturation (effects fired / k) says how many
effects fired but not what the other racers were told.  Read from the race
records of ``resume_frameworks``: per race, the racers the framework served
(parked or done), refused, failed (it raised) or left unanswered, and the gated
effects fired.  Of the k racers one is the winner (the first served); each
other racer is a loser, and gets exactly one fate:

- **refused loudly**: the framework refused the resume (its documented refusal);
- **fired again**: served, and the effect fired once more (effects fired - 1);
- **accepted inert**: served, and no further effect fired (told "done" or
  "parked" without acting: a silent acceptance);
- **failed**: the framework raised (loud, but not a refusal it documents);
- **unanswered**: the racer's answer never came (indeterminate).

A race where no racer was served has no winner: all k are counted as losers,
and the race is counted under ``no_winner``.  The distribution of effects per
race (0 / 1 / more than 1) is given beside the fates: a race that consumed the
decision and fired nothing is a lost effect, not low saturation.
"""
from __future__ import annotations

import pandas as pd

from analysis.report import Section, markdown_table

COLUMNS = ["runtime", "races", "losers", "refused", "inert", "failed", "fired_again", "unanswered", "no_winner",
           "races_0_effects", "races_1_effect", "races_2plus_effects", "loud"]


def races(records: pd.DataFrame) -> pd.DataFrame:
    """One row per race (the race records of resume_frameworks, one per property, deduplicated)."""
    if records.empty or "served" not in records:
        return records.iloc[0:0]
    r = records[records["k"] > 0]
    return r.drop_duplicates(subset=["runtime", "cell", "repetition"])


def fates(race: pd.DataFrame) -> pd.DataFrame:
    """Per race: each loser's fate, counted (module docstring)."""
    k, served, fired = race["k"].astype(int), race["served"].astype(int), race["effects_fired"].astype(int)
    winner = (served > 0).astype(int)
    again = (fired - 1).clip(lower=0)
    return pd.DataFrame({
        "runtime": race["runtime"], "losers": k - winner, "refused": race["refused"].astype(int),
        "fired_again": again, "inert": (served - winner - again).clip(lower=0), "failed": race["failed"].astype(int),
        "unanswered": race["indeterminate"].astype(int), "no_winner": 1 - winner, "effects": fired})


def table(records: pd.DataFrame) -> pd.DataFrame:
    race = races(records)
    if race.empty:
        return pd.DataFrame(columns=COLUMNS)
    f = fates(race)
    out = []
    for rt, t in f.groupby("runtime", sort=False):
        line = {"runtime": rt, "races": len(t)}
        for c in ("losers", "refused", "inert", "failed", "fired_again", "unanswered", "no_winner"):
            line[c] = int(t[c].sum())
        line.update(races_0_effects=int((t["effects"] == 0).sum()), races_1_effect=int((t["effects"] == 1).sum()),
                    races_2plus_effects=int((t["effects"] > 1).sum()),
                    loud=bool(line["losers"]) and line["refused"] == line["losers"])
        out.append(line)
    return pd.DataFrame(out, columns=COLUMNS)


def answer(line: dict) -> str:
    """One sentence: does this runtime refuse a second concurrent resumer loudly?"""
    if not line.get("losers"):
        return "no race was run"
    n = line["losers"]
    if line["loud"]:
        return f"yes: every loser was refused loudly ({n} of {n}, in {line['races']} races)"
    parts = [f"{line[c]} {what}" for c, what in (("refused", "refused loudly"), ("inert", "accepted inert"),
                                                  ("failed", "failed (raised)"), ("fired_again", "fired the effect again"),
                                                  ("unanswered", "unanswered")) if line[c]]
    lost = f"; {line['races_0_effects']} race(s) fired no effect at all" if line["races_0_effects"] else ""
    return f"no: of {n} losers in {line['races']} races, " + ", ".join(parts) + lost


def report(tab: pd.DataFrame, records: pd.DataFrame) -> Section:
    notes = ["Each loser of a race gets one fate: refused loudly (the framework's documented refusal), accepted "
             "inert (served without a further effect: a silent acceptance), failed (the framework raised), fired "
             "again (served, and the gated effect fired once more) or unanswered. Effects per race: 0 (a lost "
             "effect), 1, or more."]
    notes += [f"{r['runtime']}: {answer(r)}." for r in tab.to_dict("records")]
    if not tab.empty:
        notes.append(markdown_table(tab))
    return Section("resume_frameworks_losers", "Frameworks: what the losers of a race get", notes="\n\n".join(notes))
