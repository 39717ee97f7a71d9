"""The agent family's vocabulary: one agent, three failure modes, the guard's layers and their stacks.

Serves issue 15's fourth family: a LangGraph refund agent parks for a human
approval while, at once, a premise of its decision changes (the ATR paper's
question), the prompt / model / policy behind an alias is redeployed (the
SemIso paper's) and approvers resume concurrently while the worker is
SIGKILLed (Resume Means Resume's).  Nothing here does I/O, and nothing here
imports another family: the names the other families' checkers read (their
operation names and value keys) are plain strings in the histories this
family writes, documented in the README's "Agent" section.

- A **layer** of the guard: ``once`` (consume-once savers + effect ledger),
  ``premises`` (premise revalidation at resume: KEEP / REFRESH / REPLAN /
  BLOCK), ``pinning`` (semantic pinning: a manifest in the checkpoint,
  inherited by subgraphs, contracts checked at first binding).
- A **stack** is a set of layers over stock LangGraph: ``stock``, each layer
  alone, each pair, all three (:data:`STACKS`, named ``once+premises``...).
- A **failure** is one column of ``agent_matrix`` (:data:`FAILURES`); each is
  owned by exactly one layer (:data:`OWNER`): the layer that should remove it.
"""
from __future__ import annotations

from itertools import combinations

from vocabulary.schema import ALWAYS, ANSWERED, WHEN_OK, HistorySchema, Key, MetaKey, OpSpec, list_of, of_type

FAMILY = "agent"

# ------------------------------------------------------------------ layers and stacks
ONCE, PREMISES, PINNING = "once", "premises", "pinning"
LAYERS = (ONCE, PREMISES, PINNING)
STOCK = "stock"


def stack_name(layers) -> str:
    """``stock`` for no layer, else the layers in :data:`LAYERS` order joined by ``+``."""
    chosen = [x for x in LAYERS if x in set(layers)]
    return "+".join(chosen) if chosen else STOCK


def stack_layers(name: str) -> frozenset[str]:
    """The layers of a stack name (ValueError for an unknown layer)."""
    if name == STOCK:
        return frozenset()
    parts = name.split("+")
    unknown = [p for p in parts if p not in LAYERS]
    if unknown or len(set(parts)) != len(parts):
        raise ValueError(f"stack {name!r}: layers are {', '.join(LAYERS)} joined by '+' (or 'stock')")
    return frozenset(parts)


#: stock; each layer alone; each pair; all three
STACKS: tuple[str, ...] = tuple(stack_name(c) for n in range(len(LAYERS) + 1) for c in combinations(LAYERS, n))

# ------------------------------------------------------------------ premise changes (the ATR paper's classes)
IRRELEVANT, PRESENTATION, PREDICATE_PRESERVING, REPLANNING, BLOCKING = (
    "irrelevant", "presentation", "predicate_preserving", "replanning", "blocking")
CHANGE_CLASSES = (IRRELEVANT, PRESENTATION, PREDICATE_PRESERVING, REPLANNING, BLOCKING)
KEEP, REFRESH, REPLAN, BLOCK = "KEEP", "REFRESH", "REPLAN", "BLOCK"
OUTCOMES = (KEEP, REFRESH, REPLAN, BLOCK)  # dominance: BLOCK > REPLAN > REFRESH > KEEP
SAFE = (KEEP, REFRESH)  # the action may go ahead (REFRESH: with its payload re-rendered)

# ------------------------------------------------------------------ the resume family's crash points used here
AFTER_EFFECT = "after_effect"  # the act node's effect is durable, the node has not returned
AFTER_RESUME_CONSUMED = "after_resume_consumed"  # the approval was consumed, the next node has not run
CRASH_POINTS = (AFTER_EFFECT, AFTER_RESUME_CONSUMED)
DURABILITY = ("sync", "async", "exit")  # LangGraph's durability modes

# ------------------------------------------------------------------ the graph, in the resume family's terms
#: nodes in order: decide (reads the premises, resolves prompt/model/policy), approve (the interrupt),
#: act (revalidates if the stack can, then writes the outcome: a refund, a replan request or a block
#: notice), notify (a subgraph composes and sends the e-mail)
NODES = ("decide", "approve", "act", "notify")
INTERRUPT_NODE, ACT_NODE, NOTIFY_NODE = "approve", "act", "notify"
EFFECTS = {"decide": (), "approve": (), "act": ("outcome",), "notify": ("email",)}
#: the state fields the resume family's checkers judge (its state schema); the rest is the agent's own
RESUME_FIELDS = ("input", "approval", "steps", "log")


def resume_graph() -> dict:
    """The graph as the resume family's histories declare it (``meta["graph"]``)."""
    return {"name": "refund_agent", "nodes": [{"name": n, "effects": list(EFFECTS[n]), "interrupt": n == INTERRUPT_NODE,
                                               "invalid": False, "work_ms": 0.0} for n in NODES]}


# ------------------------------------------------------------------ failures (agent_matrix's columns)
STALE_RELEASE = "stale_release"
NEEDLESS_REPLAN = "needless_replan"
READ_SKEW = "read_skew"
COMPATIBILITY_SKEW = "compatibility_skew"
DOUBLE_EFFECT = "double_effect"
SECOND_APPROVAL = "second_approval"
NEVER_COMPLETES = "never_completes"
FAILURES = (STALE_RELEASE, NEEDLESS_REPLAN, READ_SKEW, COMPATIBILITY_SKEW, DOUBLE_EFFECT, SECOND_APPROVAL,
            NEVER_COMPLETES)
FAILURE_NAMES = {
    STALE_RELEASE: "stale action released (the rules say REFRESH, REPLAN or BLOCK; it went out as decided)",
    NEEDLESS_REPLAN: "safe action needlessly replanned or blocked (the rules say KEEP or REFRESH)",
    READ_SKEW: "semantic read skew (one run saw two versions of one prompt / model / policy)",
    COMPATIBILITY_SKEW: "compatibility skew (a combination of versions a declared contract forbids)",
    DOUBLE_EFFECT: "double effect (an effect of the run fired twice)",
    SECOND_APPROVAL: "second approval silently accepted (a resume of a consumed interrupt was not refused)",
    NEVER_COMPLETES: "a resume that never completes (after the approvals and the documented recovery, still not done)",
}
#: failure -> the layer that owns it (removes it)
OWNER = {STALE_RELEASE: PREMISES, NEEDLESS_REPLAN: PREMISES, READ_SKEW: PINNING, COMPATIBILITY_SKEW: PINNING,
         DOUBLE_EFFECT: ONCE, SECOND_APPROVAL: ONCE, NEVER_COMPLETES: ONCE}
#: failure -> (family, checker) whose INVALID verdict witnesses it (the agent's own ``completes`` included)
JUDGED_BY = {STALE_RELEASE: ("revalidation", "oracle_agreement"), NEEDLESS_REPLAN: ("revalidation", "oracle_agreement"),
             READ_SKEW: ("isolation", "semantic_read_skew"), COMPATIBILITY_SKEW: ("isolation", "compatibility_skew"),
             DOUBLE_EFFECT: ("resume", "EO"), SECOND_APPROVAL: ("resume", "CO"),
             NEVER_COMPLETES: ("agent", "completes")}


def expected_failures(stack: str) -> frozenset[str]:
    """The failures a stack should leave (those whose owning layer it lacks): the independence claim."""
    layers = stack_layers(stack)
    return frozenset(f for f in FAILURES if OWNER[f] not in layers)


# ------------------------------------------------------------------ the history format (driftlab check)
def _graph(raw) -> str | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("nodes"), list):
        return f"must be an object with a list of nodes (got {raw!r})"
    return None


_CALL = (Key("run", "string", ALWAYS), Key("op", "string", ALWAYS), Key("workflow", "string"), Key("resume", "any"),
         Key("state", "string", ANSWERED), Key("values", "object", nullable=True), Key("reason", "string"))
#: The other families' operation names and value keys, as an agent history carries them (judged whole: every
#: family's checkers read the same execution).
HISTORY = HistorySchema(
    FAMILY,
    operations=(
        OpSpec("start", "the agent's run starts (a process of its own; indeterminate: killed)", _CALL),
        OpSpec("resume", "an approver resumes the run with the approval (`resume`)", _CALL),
        OpSpec("recover", "the documented recovery after a killed call (`invoke(None, config)`)", _CALL),
        OpSpec("mutate", "a second actor changes a premise of the decision",
               (Key("field", "string"), Key("to", "any"), Key("change", "string"))),
        OpSpec("deploy", "a redeployment behind an alias", (Key("identity", "string", ALWAYS),
                                                            Key("version", "integer", WHEN_OK))),
        OpSpec("resolve", "the run resolves an identity (the pinning layer's event)",
               (Key("run", "string"), Key("workflow", "string"), Key("identity", "string", ALWAYS),
                Key("version", "integer", WHEN_OK))),
        OpSpec("spawn", "the run starts a subgraph (a child workflow)",
               (Key("run", "string"), Key("workflow", "string"), Key("child", "string", WHEN_OK),
                Key("relation", "string", choices=("child", "fork", "retry")))),
        OpSpec("release", "the act node's outcome beside the scenario's declared oracle",
               (Key("run", "string"), Key("oracle", "string", WHEN_OK, choices=OUTCOMES),
                Key("outcome", "string", WHEN_OK, choices=OUTCOMES), Key("released", "boolean", WHEN_OK),
                Key("payload_stale", "boolean"), Key("mechanism", "string"))),
        OpSpec("checkpoint", "a checkpoint the saver holds afterwards",
               (Key("run", "string", ALWAYS), Key("step", "integer", ALWAYS), Key("values", "object", ALWAYS),
                Key("created", "number", ALWAYS), Key("parked", "boolean"))),
        OpSpec("effect", "an effect that fired (the ledger)",
               (Key("run", "string", ALWAYS), Key("task", "string", ALWAYS), Key("effect", "string", ALWAYS),
                Key("op", "string"), Key("at", "number"))),
        OpSpec("trace", "a node ran, consumed the approval, or was replayed (the ledger's trace)",
               (Key("run", "string", ALWAYS), Key("step", "integer", ALWAYS),
                Key("kind", "string", ALWAYS, choices=("node", "consume", "memo")), Key("op", "string"),
                Key("at", "number"), Key("resume", "any"))),
    ),
    meta=(MetaKey("graph", "the agent's graph, as the resume checkers read it", _graph),
          MetaKey("contracts", "the declared contracts", list_of(of_type("string"), "contract strings"))),
    common=(Key("group", "key", doc="the repetition"),),
)
