"""``resume_guards``: LangGraph with each guard a user can install, in the same fault and race cells.

Serves issue 26 §4.  Rows: stock LangGraph; driftlab's guard on the guarded
savers and as a wrapper of the stock saver (``[any-saver]``); REMIT
(remit-contract 0.1.2, cross-process gate on, as its authors recommend); and
the effect-ledger guards on the registry, resume-guard 1.0.0 and agent-ledger
0.2.1 (``mechanisms/resume/effect_guards.py``), each adopted as its README
says.  Cells per row: the fault matrix (quick: the slice of
``resume_frameworks`` that judges every property) on the row's first backend,
real SIGKILLs and recoveries in new processes, and k-racer cells on every
backend the row supports.  Each record carries what the guard claims
(``covers``) and the lines its adoption takes, so the table shows a property a
guard does not claim as *not covered*, never as violated.
"""
from __future__ import annotations

from mechanisms import resolve
from runners.experiment import Cell, Options, artifact
from runners.resume import common as rc
from runners.resume.concurrency import grid
from runners.resume.frameworks import RACE_REPETITIONS, ResumeFrameworks

#: the rows, in the table's order (``--mechanisms`` picks others)
GUARDS = ("langgraph", "langgraph+guard", "langgraph+guard[any-saver]", "langgraph+remit", "langgraph+resume-guard",
          "langgraph+agent-ledger")
ALL = ("PC", "EO", "FD", "CV", "CO", "RD", "liveness")
#: the quick profile's slice (CI, inside the whole quick profile's budget): a crash after the gated effect, a crash
#: inside the checkpoint write, a second resume, an invalid state, two recoveries, and k = 2 racers; the paper
#: profile runs every fault cell and the whole grid
QUICK_CELLS = ("crash_resume_after_effect_act", "crash_resume_during_checkpoint_write_act", "second_resume_head",
               "invalid_state", "recover_twice")
QUICK_RACES = ((2,), (0.0,))


def claims(runtime: str) -> tuple[tuple[str, str], ...]:
    """What a row's guard claims and what adopting it takes, from its runtime class."""
    cls = resolve(runtime, "resume")
    covers = getattr(cls, "covers", ALL)
    adoption = getattr(cls, "adoption", "")
    return (("covers", ",".join(covers)), ("adoption_lines", str(len(adoption.strip().splitlines()))))


class ResumeGuards(ResumeFrameworks):
    """The frameworks' cells and their runner (``run_cell``), on the guard rows, each on the backends it supports."""

    name = "resume_guards"
    description = "LangGraph + each installable guard (driftlab's, REMIT, resume-guard, agent-ledger): fault and race cells"
    artifacts = (artifact("resume_guards", findings=True),)
    profile_repetitions = {"quick": 1, "paper": 2}

    def runtime_names(self, options: Options) -> list[str]:
        return list(options.mechanisms_for("resume") or GUARDS)

    def check(self, options: Options) -> None:
        rc.fault_cells(options)
        for rt in self.runtime_names(options):
            resolve(rt, "resume")

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        reps = self.repetitions(profile, options)
        g = grid(options)
        ks, jitters = g.grid(profile) if profile != "quick" else QUICK_RACES
        lab = [c for c in rc.fault_cells(options) if profile != "quick" or c.name in QUICK_CELLS]
        pg_down = rc.postgres_reachable()
        out = []
        for rt in self.runtime_names(options):
            own = [b for b in getattr(resolve(rt, "resume"), "backends", ("sqlite", "postgres"))
                   if b != "postgres" or not pg_down]
            if not own:
                rc.note(f"resume_guards: {rt} needs PostgreSQL, which is unreachable ({pg_down}): row skipped")
                continue
            meta = claims(rt)
            out += [Cell(self.name, (("runtime", rt), *meta, ("fault_cell", c.name), ("backend", own[0]), ("k", 0),
                                     ("jitter_ms", 0.0)), reps, seed) for c in lab]
            out += [Cell(self.name, (("runtime", rt), *meta, ("fault_cell", "concurrent_resume"), ("backend", b),
                                     ("k", k), ("jitter_ms", float(j))),
                         options.extra.get("repetitions") or RACE_REPETITIONS[profile], seed)
                    for k in ks for j in jitters for b in own]
        return out
