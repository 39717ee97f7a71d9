"""Dependency omission and its mitigation, conservative linking (ATR paper §5 and §7).

ATR's safety is conditional on complete dependencies: it re-evaluates only
the premises the reverse index links to a changed field, and binds to the
commit only the versions of linked fields.  The paper injects the fault
that breaks this condition: "omitting the sole critical dependency produced
false-allow rates" close to the omission probability (values in data/reference/).

**The fault.**  :class:`DependencyOmission` drops, with probability p drawn
from the execution's seeded RNG, the change's *critical edges* from the
dependencies the agent records, before any validation.  A critical edge is
defined from scenario data only (never from a mechanism's output): the edge
(changed field -> premise) where the change writes the field, the premise's
evidence includes it, and the premise's declared rule fails on the changed
state with a severity that forbids release (REPLAN or BLOCK).  Every
single-field blocking variant of the built-in workloads has exactly one such
edge, and its field feeds no other premise, so dropping it also drops the
field's token: ATR neither re-evaluates the premise nor lets the target's
compare-and-set notice the write.  The two-severity blocking variants
(a BLOCK and a REPLAN premise failing at once) have two critical edges; one
draw drops them all (the paper's "sole" edge generalised; the records count
them), so the change stays hidden exactly when the fault fires.

**The mitigation.**  Conservative linking, the paper's answer when
attribution is uncertain ("links supplied inputs conservatively"), links
every supplied input (every recorded read) to every premise.  It lives here,
next to the fault, rather than in ``mechanisms/``: it is not a mechanism
(ATR runs unchanged) but a policy for *recording* the dependency graph the
fault corrupts, and the two are only meaningful together.  It repairs a
missing edge, not a missing read or a missing premise (paper §7: it "cannot
compensate for an omitted or unsound premise"); its cost is that every
change to any read re-evaluates every premise and every read is bound.
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

from vocabulary.revalidation import RELEASING, Change, Ref

if TYPE_CHECKING:  # faults speak the vocabulary; the workload is only read through its attributes
    from scenarios.revalidation.workload import Workload

Edge = tuple[Ref, int]  # (read field, premise position): one entry of the reverse index
Dependencies = Mapping[Ref, tuple[int, ...]]


def critical_edges(workload: "Workload", changes: Sequence[Iterable[Change]]) -> tuple[Edge, ...]:
    """The edges whose loss would hide that the changes make the intent unreleasable.

    Computed from the scenario alone: apply the changes to the initial state
    and run each declared rule that reads a changed field.
    """
    observed = workload.initial_state()
    state = dict(observed)
    for group in changes:
        state.update((c.ref, c.value) for c in group)
    changed = dict.fromkeys(c.ref for group in changes for c in group)
    return tuple((ref, i) for ref in changed for i in workload.dependencies.get(ref, ())
                 if workload.premises[i].severity not in RELEASING
                 and not workload.premises[i].holds(state.__getitem__, observed))


def drop(dependencies: Dependencies, edges: Iterable[Edge]) -> dict[Ref, tuple[int, ...]]:
    """A copy of ``dependencies`` without ``edges``; a field left with no premise is unlinked (and unbound)."""
    out = dict(dependencies)
    for ref, i in edges:
        kept = tuple(x for x in out.get(ref, ()) if x != i)
        if kept:
            out[ref] = kept
        else:
            out.pop(ref, None)
    return out


def missing(dependencies: Dependencies, edges: Iterable[Edge]) -> tuple[Edge, ...]:
    """The edges absent from ``dependencies``."""
    return tuple((ref, i) for ref, i in edges if i not in dependencies.get(ref, ()))


class DependencyOmission:
    """The fault injector: setup (find the critical edges), invoke (maybe drop them), teardown."""

    name = "dependency_omission"

    def __init__(self, rate: float):
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"omission rate must be between 0 and 1, got {rate}")
        self.rate = rate
        self.edges: tuple[Edge, ...] = ()

    def setup(self, workload: "Workload", changes: Sequence[Iterable[Change]]) -> tuple[Edge, ...]:
        self.edges = critical_edges(workload, changes)
        return self.edges

    def invoke(self, dependencies: Dependencies, rng: random.Random) -> tuple[dict[Ref, tuple[int, ...]], bool]:
        """(the dependencies to record, whether the critical edges were dropped).  Always draws once."""
        omitted = rng.random() < self.rate and bool(self.edges)
        return (drop(dependencies, self.edges) if omitted else dict(dependencies)), omitted

    def teardown(self) -> None:
        self.edges = ()


# ---------------------------------------------------------------- linking
Linking = Callable[[Dependencies, "Workload"], dict[Ref, tuple[int, ...]]]


def exact_links(dependencies: Dependencies, workload: "Workload") -> dict[Ref, tuple[int, ...]]:
    """Trust the attributed edges as recorded (after the fault, if any)."""
    return dict(dependencies)


def conservative_links(dependencies: Dependencies, workload: "Workload") -> dict[Ref, tuple[int, ...]]:
    """Every supplied input (recorded read) linked to every premise, whatever was attributed."""
    every = tuple(range(len(workload.premises)))
    return {ref: every for ref in dict.fromkeys([*workload.reads, *dependencies])}


LINKINGS: dict[str, Linking] = {"exact": exact_links, "conservative": conservative_links}
