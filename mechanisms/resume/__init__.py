"""The resume family's durable runtimes (arXiv 2608.03836), by name.

A runtime implements :class:`mechanisms.resume.base.DurableRuntime` (start,
resume, fork, recover, checkpoints, state over a Backend and a GraphSpec).
A new runtime is one module plus one line in :data:`RUNTIMES`; a user's own
plugs in as ``package.module:Class``.  The experiments iterate over
``options.mechanisms_for("resume") or DEFAULT_RUNTIMES``; the faulted
sequencer variants (``sequencer+<switch>``) are registered too, so that the
independence matrix and the checkers' planted-bug tests load them by name.
"""
from __future__ import annotations

RUNTIMES: dict[str, str] = {
    "naive": "mechanisms.resume.naive:Naive",
    "sequencer": "mechanisms.resume.sequencer:Sequencer",
    "sequencer+replay": "mechanisms.resume.faulted:Replay",
    "sequencer+fork_ignore": "mechanisms.resume.faulted:ForkIgnore",
    "sequencer+invalid_persist": "mechanisms.resume.faulted:InvalidPersist",
    "sequencer+nondet_recovery": "mechanisms.resume.faulted:NondetRecovery",
    "sequencer+double_consume": "mechanisms.resume.faulted:DoubleConsume",
    "sequencer+prefix_replay": "mechanisms.resume.faulted:PrefixReplay",
    "sequencer+state_rebuild": "mechanisms.resume.faulted:StateRebuild",
}

#: the runtimes the three process experiments run when the user names none
DEFAULT_RUNTIMES: tuple[str, ...] = ("naive", "sequencer")

#: the protocol's methods (mechanisms.FAMILIES)
METHODS: tuple[str, ...] = ("start", "resume", "fork", "recover", "checkpoints", "state")
