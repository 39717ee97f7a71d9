"""The resume family's durable runtimes (arXiv 2608.03836), by name.

A runtime implements :class:`mechanisms.resume.base.DurableRuntime` (start,
resume, fork, recover, checkpoints, state over a Backend and a GraphSpec).
A new runtime is one module plus one line in :data:`REGISTRY`; a user's own
plugs in as ``package.module:Class``.  The experiments iterate over
``options.mechanisms_for("resume") or DEFAULT_RUNTIMES``; the faulted
sequencer variants (``sequencer+<switch>``) are registered too, so that the
independence matrix and the checkers' planted-bug tests load them by name.
"""
from __future__ import annotations

REGISTRY: dict[str, str] = {
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

# ---- LangGraph (issue 9): the installed release, stock and with the consume-once guard, as runtime rows
_LG = "mechanisms.resume.langgraph_runtime:"
REGISTRY["langgraph"] = _LG + "LangGraphRuntime"
REGISTRY["langgraph+guard"] = _LG + "LangGraphGuardRuntime"
for _v in ("async-saver", "durability-sync", "durability-async", "durability-exit", "dataclass", "pydantic",
           "stock-durability"):
    _cls = "".join(p.title() for p in _v.replace("-", "_").split("_"))
    REGISTRY[f"langgraph[{_v}]"] = _LG + "LangGraphRuntime" + _cls
    REGISTRY[f"langgraph+guard[{_v}]"] = _LG + "LangGraphGuardRuntime" + _cls
REGISTRY["langgraph+guard[any-saver]"] = _LG + "LangGraphGuardAnySaverRuntime"  # issue 26 §2: guard(saver, claims)
DEFAULT_RUNTIMES = (*DEFAULT_RUNTIMES, "langgraph", "langgraph+guard", "langgraph+guard[any-saver]")

# ---- LangGraph + the effect-ledger guards on the registry (issue 26 §4), judged in resume_guards
REGISTRY["langgraph+resume-guard"] = "mechanisms.resume.effect_guards:LangGraphResumeGuardRuntime"
REGISTRY["langgraph+agent-ledger"] = "mechanisms.resume.effect_guards:LangGraphAgentLedgerRuntime"

# ---- LangGraph + REMIT (issue 14 §3): the paper authors' guard, remit-contract 0.1.2, cross-process gate on
REGISTRY["langgraph+remit"] = "mechanisms.resume.langgraph_remit:LangGraphRemitRuntime"
DEFAULT_RUNTIMES = (*DEFAULT_RUNTIMES, "langgraph+remit")

# ---- framework releases in their own environments (issue 14): one runtime per [tool.driftlab.runtimes."<name>"]
# of data/envs/*/pyproject.toml (aliases too), served by mechanisms/resume/framework.py; run by resume_frameworks
# by default and by the other resume experiments when named with --mechanisms
from mechanisms.resume.frameworks import declared as _declared  # noqa: E402

for _name, _decl in _declared().items():
    REGISTRY[_name] = "mechanisms.resume.framework:Framework_" + "".join(c if c.isalnum() else "_" for c in _name)
FRAMEWORK_RUNTIMES: tuple[str, ...] = tuple(dict.fromkeys(d.name for d in _declared().values()))
