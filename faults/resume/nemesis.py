"""The nemesis: faults on the wire and in the store, scheduled at named points of a resume (issue 25; Jepsen's way).

Serves issue 25 (``resume_nemesis``).  Every fault the rest of the family
injects is a process crash on one host against a store that never fails.
These are the other ones, as data the runner interprets
(``runners/resume/nemesis.py`` drives them through the lab's hosts,
``runners/resume/hosts.py``, its private cluster,
``runners/resume/pgcluster.py``, and its proxy,
``runners/resume/nemesis_proxy.py``).

One schedule, a literal interleaving, for every fault; host 0 is the
**victim**, hosts 1..k-1 the **others**, each a resumer in its own network
namespace, all resuming the same parked interrupt with the same value:

1. the victim resumes; where the fault has a point, the victim stops there
   (``after_resume_consumed`` of the interrupt node: it holds the claim);
2. the fault lands (below);
3. the others resume, at once, each in its own process;
4. the fault heals, the victim is let go; every call is awaited;
5. every resumer whose call ended without an answer it could trust (an
   **indeterminate** call: its connection was lost) re-sends its resume once,
   from a fresh process on the same host, as a client that could not learn
   the outcome does;
6. if the run is not done, one recovery (the runtime's documented one) from
   host 0: the table says whether the run was stuck before it.

The faults (``none`` is the same schedule without one: the baseline; the paper
profile adds :data:`COMBINED`, each fault with the victim SIGKILLed at its
point while the fault holds, beside ``sigkill`` alone):

- ``partition``: the victim's link goes down while it stands at its point,
  and heals ``heal_s`` later; the others run meanwhile;
- ``cut_at_commit``: the victim reaches the store through the proxy, which
  closes its connection after the victim sent the statement that carries the
  claim (:data:`CLAIMS`) and its commit, and before the reply: the claim may
  have landed, the victim cannot know (the indeterminate commit);
- ``commit_lost``: the same cut, but the claim's commit never reaches the
  store (the proxy drops it and closes both sides): the claim did not land and
  the victim, again, cannot know;
- ``slow_store``: the victim's replies are held ``delay_ms`` each by the
  proxy; the others start ``stagger_s`` after it, as a race;
- ``store_crash``: SIGKILL of the private cluster's postmaster while the
  victim stands at its point, then a restart (crash recovery) before the
  others resume: is a consumed interrupt still consumed?
- ``client_paused``: SIGSTOP of the victim at its point (holding its claim
  and whatever lock it holds), SIGCONT after the others had ``heal_s`` to
  move on.

setup / invoke / teardown: :data:`FAULTS` (setup, validated by
:func:`fault`), the runner's schedule (invoke), the hosts', proxy's and
cluster's ``close`` (teardown, also after Ctrl-C; a SIGKILLed run's leftovers
are removed by the next run).
"""
from __future__ import annotations

from dataclasses import dataclass

from vocabulary.resume import AFTER_RESUME_CONSUMED


@dataclass(frozen=True)
class Fault:
    """One nemesis fault: where the victim stops (if anywhere), its parameters, and one line for the report."""

    name: str
    says: str
    pause: tuple[str, str] | None = None  # (point, node) the victim stops at while the fault lands
    proxy: str = ""  # "cut" | "drop" | "slow": the victim dials the proxy
    heal_s: float = 0.0
    delay_ms: float = 0.0
    stagger_s: float = 0.0
    kill: bool = False  # combined with a SIGKILL of the victim at its point, while the fault holds

    @property
    def kind(self) -> str:
        """The nemesis fault without its SIGKILL (``partition+sigkill`` -> ``partition``; ``sigkill`` -> ``none``)."""
        base = self.name.removesuffix("+sigkill")
        return "none" if base == "sigkill" else base

    @property
    def baseline(self) -> str:
        """The cell this one is compared with: ``none``, or ``sigkill`` for a combined fault."""
        return "sigkill" if self.kill and self.name != "sigkill" else "none"


AT_CLAIM = (AFTER_RESUME_CONSUMED, "approve")  # the lab's approval graph: the interrupt node is ``approve``

NONE = Fault("none", "no fault: the victim stops at its point while the others resume, then goes on", AT_CLAIM)
FAULTS = (
    NONE,
    Fault("partition", "the victim's link is down while it holds the claim, healed 3 s later", AT_CLAIM,
          heal_s=3.0),
    Fault("cut_at_commit", "the proxy cuts the victim's connection after it sent the claim's commit, before the "
          "reply", proxy="cut"),
    Fault("commit_lost", "the proxy drops the victim's claim commit and closes both sides: the claim never lands, "
          "the victim cannot tell", proxy="drop"),
    Fault("slow_store", "the proxy holds every reply to the victim 150 ms; the others start 50 ms after it",
          proxy="slow", delay_ms=150.0, stagger_s=0.05),
    Fault("store_crash", "SIGKILL of the store's postmaster while the victim holds the claim, then a restart with "
          "crash recovery", AT_CLAIM),
    Fault("client_paused", "SIGSTOP of the victim while it holds the claim; SIGCONT 3 s later", AT_CLAIM,
          heal_s=3.0),
)
#: the paper profile's combinations: each fault that has a point, with the victim SIGKILLed there while the fault
#: holds (a worker that dies partitioned, paused, or across the store's crash); ``sigkill`` alone is their baseline
SIGKILL = Fault("sigkill", "no nemesis fault; the victim is SIGKILLed at its point while it holds the claim", AT_CLAIM,
                kill=True)
COMBINED = (SIGKILL, *(Fault(f"{f.name}+sigkill", f"{f.says}; the victim is SIGKILLed at its point while the fault "
                             "holds", f.pause, f.proxy, f.heal_s, f.delay_ms, f.stagger_s, kill=True)
                       for f in FAULTS if f.pause and f.name != "none"))
BY_NAME = {f.name: f for f in (*FAULTS, *COMBINED)}


@dataclass(frozen=True)
class Claim:
    """The statement that carries a runtime's claim of the interrupt, and the message that makes it durable.

    ``at = "sync"``: an autocommit statement (durable when its implicit
    transaction ends, at the ``Sync`` after it); ``"commit"``: the next
    ``COMMIT`` of its transaction.  A runtime without a claim (stock
    LangGraph) is cut at the first durable write of the resume: its pending
    resume write.
    """

    pattern: str
    at: str
    says: str


CLAIMS = {
    "sequencer": Claim(r"INSERT INTO claims\b", "sync", "the claim row (INSERT INTO claims, autocommit)"),
    "langgraph+guard": Claim(r"INSERT INTO driftlab_guard_claims\b", "commit",
                             "the guard's claim transaction (INSERT INTO driftlab_guard_claims ... COMMIT)"),
    "langgraph+remit": Claim(r"INSERT INTO remit_claims\b", "sync", "REMIT's gate row (INSERT INTO remit_claims)"),
    "langgraph": Claim(r"INSERT INTO checkpoint_writes\b", "sync",
                       "stock LangGraph has no claim: its resume write (INSERT INTO checkpoint_writes)"),
    # DBOS 3.4 (dbos/_sys_db.py, SystemDatabase.start_queued_workflows and its partitioned twin): a resumed workflow
    # runs only once a live executor dequeues it, "marking them PENDING and updating their executor ID" in one
    # UPDATE of workflow_status (status ENQUEUED -> PENDING, executor_id = the claimer) inside a transaction; its
    # recovery re-enqueues the workflow so that this "atomic ENQUEUED->PENDING dequeue ... admits exactly one
    # runner" (dbos/_recovery.py).  SQLAlchemy compiles its SET clause in the table's column order, status first,
    # executor_id second; no other UPDATE of DBOS sets both (the re-enqueue sets status, updated_at, queue_name)
    "dbos@3.4": Claim(r"UPDATE\s+(\w+\.)?workflow_status\s+SET\s+status=\S+,\s*executor_id=", "commit",
                      "DBOS's dequeue claim (UPDATE workflow_status SET status=PENDING, executor_id=... COMMIT)"),
}

#: the subjects (runtimes that take a PostgreSQL DSN and run in the lab's own process); quick runs the first two
SUBJECTS = ("langgraph+guard", "langgraph", "sequencer", "langgraph+remit")
#: framework releases in their own environments (runners/resume/envs.py) with a PostgreSQL system database: paper
#: profile only (each cell starts an env server per resumer, and DBOS's calls wait for the workflow, up to 30 s)
FRAMEWORK_SUBJECTS = ("dbos@3.4",)


def fault(name: str) -> Fault:
    if name not in BY_NAME:
        raise ValueError(f"unknown nemesis fault {name!r} (known: {', '.join(BY_NAME)})")
    return BY_NAME[name]


def claim(runtime: str) -> Claim:
    if runtime not in CLAIMS:
        raise ValueError(f"the nemesis does not know which statement carries {runtime}'s claim "
                         f"(known: {', '.join(CLAIMS)})")
    return CLAIMS[runtime]
