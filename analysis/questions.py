"""The question each artifact answers: the first line of its report section (issue 27 §1).

One line per artifact, written for a user who opens the report with a question
and looks for the section that answers it.  A new artifact adds its line here;
``tests/unit/test_unit_findings.py`` fails for an artifact without one.
"""
from __future__ import annotations

QUESTIONS: dict[str, str] = {
    "revalidation_outcomes": "When the state behind a pending action changes while the agent waits, does each "
                             "mechanism release, refresh, replan or block it as the business rule says?",
    "revalidation_durable": "Across a real checkpoint, process exit and resume on SQLite, does revalidation still "
                            "agree with the oracle, and how many premises does it re-check per change?",
    "revalidation_scaling": "How does validation latency grow with the number of recorded reads, for ATR's reverse "
                            "index and for a full scan?",
    "revalidation_races": "When two workers commit the same intent at once, does exactly one commit, and does a "
                          "check of another resource hold until the commit?",
    "revalidation_omission": "If a premise's dependency edge is dropped, how often does ATR release an action it "
                             "should have stopped, and what does conservative linking cost?",
    "isolation_levels": "Which of the four semantic anomalies does each isolation level prevent?",
    "isolation_runtimes": "Which anomalies does today's default runtime admit, and does SSI or static pinning "
                          "prevent them, including a tool discovered mid-run?",
    "isolation_retrieval": "After a new embedding model is deployed mid-workflow, does the resumed workflow still "
                           "return the right document?",
    "isolation_undeclared": "When a contract between resources is omitted or stale, does SSI still refuse the "
                            "wrong combination, and what do fail-closed admission and inference cost?",
    "isolation_contract_omission": "As contracts are dropped at random, how often does SSI admit an incompatible "
                                   "combination?",
    "isolation_microbench": "What do resolution and merge validation cost at the paper's sizes?",
    "resume_faults": "After a SIGKILL at each named point of the resume path, does each runtime continue exactly "
                     "once?",
    "resume_independence": "Does each planted fault break exactly the property it names, and no other?",
    "resume_concurrency": "When k processes resume one parked interrupt at the same moment, how many effects fire?",
    "resume_profile": "Which of the contract's properties does each runtime hold, with a witness for each "
                      "violation?",
    "resume_overhead": "What do the consume-once claim, the guard and REMIT cost per step and per resume?",
    "resume_frameworks": "Which framework releases hold each property of the resume contract, folded over every "
                         "cell?",
    "resume_frameworks_cells": "Cell by cell, which properties does each framework release break: after a crash, "
                               "on a second resume, in a race?",
    "resume_frameworks_losers": "When k resumers race, what does each loser get: refused loudly, accepted inert, a "
                                "failure, or the effect fired again?",
    "resume_guards": "Which guard a LangGraph user can install holds what it claims, in the same fault and race "
                     "cells, and what does adopting it take?",
    "resume_nemesis": "When the network partitions, a commit is cut, the store is slow, crashes or a client "
                      "pauses, does each runtime still resume exactly once?",
    "resume_hosts": "Do k racers on k hosts behave as k racers on one host?",
    "resume_powerloss": "When the power fails within the flush window, is an approved effect made once, and is "
                        "acknowledged progress kept?",
    "agent_matrix": "One agent meets a changed premise, a redeployed prompt or model and two approvers at once: "
                    "which stack of the guard's layers keeps it correct?",
    "agent_overhead": "What does each layer of the guard cost the agent per step and per resume?",
}
