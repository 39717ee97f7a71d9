"""Checkers of the decision-revalidation family: judge race histories from their operations alone.

A history here is what ``runners/revalidation/races.py`` writes
(and what a user's own runtime may write in the same JSON Lines format,
:mod:`vocabulary`): operations grouped by ``value["group"]`` (one race pair
or one cross-resource execution), each with its actor, name, start, end,
status (``ok`` / ``fail`` / ``indeterminate``) and value.  The names read:

- ``commit`` — an attempt to release the effect; ``ok`` means it committed,
  ``fail`` that it was refused, ``indeterminate`` that its process died or
  went silent (it may or may not have committed).  ``value`` may carry
  ``intent``, ``target_token`` and ``policy_token``;
- ``setup`` — ``value["state"]``: the fresh target and policy
  (``amount``, ``refunds``, ``refund_limit``, ``refunds_enabled``);
- ``set_policy`` — ``value["args"]``: the policy fields written;
  ``value["result"]`` ``committed`` (in effect at once) or ``updated``
  (in effect at the same actor's next ``commit_txn``);
- ``audit`` — ``value["state"]``: what the target held afterwards.

**Indeterminate operations are never guessed.**  Each checker considers
every choice of which indeterminate operations took effect: VALID if the
history is correct under every choice, INVALID if under none, UNKNOWN if it
depends on the choice.  An audit read can only *prove* a violation (two
refunds on the row), never resolve an unknown into a valid.

Checkers (:data:`CHECKERS`):

- :class:`OneCommitPerPair` (``one_commit_per_pair``): a group in which two
  or more actors attempt a commit is a race pair; exactly one of its commits
  may land.  Two commits of one intent are INVALID (witness: both commits,
  with their tokens and times); none at all is INVALID too (the pair lost
  its intent).  Groups with fewer than two committing actors are not pairs
  and are not judged.
- :class:`RuleHoldsAtCommit` (``rule_holds_at_commit``): every commit that
  landed must have landed while the declared refund rule
  (``refunds == 0 and amount <= refund_limit and refunds_enabled == 1``)
  held, in some order of the effects consistent with real time
  (linearizability: an operation that ended before another started comes
  first; overlapping ones may go either way).  A refund committed after the
  policy turned false (the target-only CAS's false allow) is INVALID.

**Quick paths** (``check_groups``, what ``driftlab check`` calls on a
million-operation file): each checker also judges groups given as validated
history lines, one list per group, and decides the common simple shape
there without building operations or searching orders (a race pair with one
commit landed and none indeterminate; a refund history whose only effect is
at most one landed commit, no policy change).  Any other group is judged by
the general path on its own :class:`~vocabulary.History`, so a quick path
only ever answers VALID or "not judged", where the general path does too;
``tests/test_check_fastpath.py`` holds ``check_groups`` to ``check`` on
random histories that take both paths.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from itertools import chain
from typing import Any, Iterable, Sequence

from vocabulary import INDETERMINATE, OK, CheckResult, History, Operation, Verdict, Witness, worst
from vocabulary.revalidation import HISTORY  # noqa: F401 - the declared history format `driftlab check` validates
from vocabulary.schema import operation

COMMIT, SETUP, AUDIT, SET_POLICY, COMMIT_TXN = "commit", "setup", "audit", "set_policy", "commit_txn"
MAX_OPTIONAL = 8  # indeterminate operations per group beyond which choices are not enumerated (UNKNOWN)
MAX_EFFECTS = 9  # effects per group beyond which linearizations are not enumerated (UNKNOWN)


def _t(x: float | None) -> str:
    return "t=?" if x is None else f"t={x:.6f} s"


def _token(op: Operation) -> str:
    tok = op.value.get("target_token")
    return "an unknown token" if tok is None else f"token v{tok}"


def _group_name(group: Any) -> str:
    return str(group)


@dataclass(frozen=True)
class GroupVerdict:
    group: Any
    verdict: Verdict
    witness: Witness | None = None


def _combine(name: str, judged: Sequence[GroupVerdict], what: str, valid: int = 0) -> CheckResult:
    """One checker's result on its judged groups (and ``valid`` more groups judged VALID, without witnesses)."""
    counts = {v: sum(g.verdict is v for g in judged) for v in Verdict}
    summary = (f"{len(judged) + valid} {what}: {counts[Verdict.VALID] + valid} valid, {counts[Verdict.INVALID]} "
               f"invalid, {counts[Verdict.UNKNOWN]} unknown")
    witnesses = tuple(g.witness for g in judged if g.witness is not None and g.verdict is not Verdict.VALID)
    return CheckResult(name, worst(chain((Verdict.VALID,) if valid else (), (g.verdict for g in judged))),
                       witnesses, summary)


GENERAL = object()  # a quick path's answer: not the simple shape, the general path judges this group


def _check_groups(checker, parts: Iterable[list[dict]], what: str) -> CheckResult:
    """``checker.check`` on the history of these groups, each one group's validated lines (``value.group`` shared,
    file order, groups in the order they first appear): the quick path first, else the general one on the group."""
    judged: list[GroupVerdict] = []
    valid, quick, family = 0, checker.quick, checker.family
    for rows in parts:
        if not rows:
            continue
        got = quick(rows)
        if got is Verdict.VALID:
            valid += 1
        elif got is GENERAL:
            judged += checker.judge(History(family, tuple(map(operation, rows))))
    return _combine(checker.name, judged, what, valid)


# ------------------------------------------------------------------ exactly one commit per race pair
class OneCommitPerPair:
    """Exactly one commit per race pair (ATR paper §5: "exactly one update committed per pair")."""

    name = "one_commit_per_pair"
    family = "revalidation"
    reads = frozenset({COMMIT, AUDIT})  # what a verdict reads, with every indeterminate op (runners/check.py: reads)

    def judge(self, history: History) -> list[GroupVerdict]:
        """One verdict per race pair (groups with two or more committing actors), in history order."""
        out = []
        for group, ops in history.groups().items():
            commits = [op for op in ops if op.name == COMMIT]
            if len({op.actor for op in commits}) < 2:
                continue
            out.append(self._pair(group, ops, commits))
        return out

    def check(self, history: History) -> CheckResult:
        return _combine(self.name, self.judge(history), "race pairs")

    def check_groups(self, parts: Iterable[list[dict]]) -> CheckResult:
        return _check_groups(self, parts, "race pairs")

    @staticmethod
    def quick(rows: list[dict]) -> Any:
        """One group's lines: None (not a race pair), VALID (one commit landed, none indeterminate, no audit that
        found two refunds), or GENERAL (any other pair: :meth:`_pair` judges it)."""
        commits = [r for r in rows if r["op"] == COMMIT]
        if len({r["actor"] for r in commits}) < 2:
            return None
        statuses = [r["status"] for r in commits]
        if statuses.count(OK) != 1 or INDETERMINATE in statuses:
            return GENERAL
        for r in rows:
            if r["op"] == AUDIT:
                audited = (r["value"].get("state") or {}).get("refunds")
                return GENERAL if isinstance(audited, int) and audited >= 2 else Verdict.VALID
        return Verdict.VALID

    def _pair(self, group: Any, ops: list[Operation], commits: list[Operation]) -> GroupVerdict:
        g = _group_name(group)
        landed = sorted((op for op in commits if op.status == OK), key=lambda op: (op.end or 0, op.index))
        open_ = [op for op in commits if op.status == INDETERMINATE]
        audit = next((op for op in ops if op.name == AUDIT), None)
        audited = (audit.value.get("state") or {}).get("refunds") if audit else None
        if len(landed) >= 2:
            a, b = landed[0], landed[1]
            same = b.value.get("target_token") is not None and a.value.get("target_token") == b.value.get("target_token")
            text = (f"pair {g}: {a.actor} committed with {_token(a)} at {_t(a.end)}, then {b.actor} committed "
                    f"with {'the same ' + _token(b) if same else _token(b)} at {_t(b.end)}: two commits of one intent"
                    + (f" (the target row holds {audited} refunds afterwards)." if audited is not None else "."))
            return GroupVerdict(group, Verdict.INVALID, Witness((a.index, b.index), text))
        if isinstance(audited, int) and audited >= 2:
            steps = tuple(op.index for op in commits) + (audit.index,)
            text = (f"pair {g}: the audit read at {_t(audit.start)} found {audited} refunds on the target after the "
                    f"pair ({', '.join(f'{op.actor} {op.status}' for op in commits)}): two commits of one intent.")
            return GroupVerdict(group, Verdict.INVALID, Witness(steps, text))
        if isinstance(audited, int) and audited > len(landed) + len(open_):
            steps = tuple(op.index for op in commits) + (audit.index,)
            text = (f"pair {g}: the audit read found {audited} refund(s) although only {len(landed)} commit(s) "
                    f"answered committed and none is indeterminate: a refused commit landed.")
            return GroupVerdict(group, Verdict.INVALID, Witness(steps, text))
        if open_:
            lost = "; ".join(f"{op.actor}'s commit started at {_t(op.start)} and never answered"
                             + (f" ({op.value['lost']})" if op.value.get("lost") else "") for op in open_)
            if landed:
                text = (f"pair {g}: {landed[0].actor} committed with {_token(landed[0])} at {_t(landed[0].end)}; "
                        f"{lost}: the pair holds one or two commits, the history cannot tell which.")
            else:
                text = f"pair {g}: no commit answered committed; {lost}: the pair may hold zero, one or more commits."
            return GroupVerdict(group, Verdict.UNKNOWN, Witness(tuple(op.index for op in commits), text))
        if not landed:
            refusals = ", ".join(f"{op.actor} {op.value.get('result', op.status)}"
                                 + (f" by {op.value['refused_by']}" if op.value.get("refused_by") else "")
                                 for op in commits)
            text = f"pair {g}: no commit landed ({refusals}): the pair's intent was refused twice, not exactly once."
            return GroupVerdict(group, Verdict.INVALID, Witness(tuple(op.index for op in commits), text))
        return GroupVerdict(group, Verdict.VALID)


# ------------------------------------------------------------------ the rule holds at every commit
@dataclass(frozen=True)
class _Effect:
    op: Operation  # the operation whose interval bounds when the effect landed
    kind: str  # "commit" | "policy"
    changes: dict
    optional: bool  # indeterminate: it may or may not have landed


def _holds(state: dict) -> bool:
    return state["refunds"] == 0 and state["amount"] <= state["refund_limit"] and state["refunds_enabled"] == 1


def _before(a: Operation, b: Operation) -> bool:
    """Real-time order: ``a`` ended before ``b`` started."""
    return a.end is not None and b.start is not None and a.end < b.start


class RuleHoldsAtCommit:
    """Every commit that landed did so while the declared refund rule held (cross-resource histories)."""

    name = "rule_holds_at_commit"
    family = "revalidation"
    reads = frozenset({SETUP, COMMIT, SET_POLICY, COMMIT_TXN})  # and every indeterminate one (runners/check.py)

    def judge(self, history: History) -> list[GroupVerdict]:
        out = []
        for group, ops in history.groups().items():
            setup = next((op for op in ops if op.name == SETUP), None)
            state = (setup.value.get("state") or {}) if setup else {}
            if not all(k in state for k in ("amount", "refund_limit", "refunds_enabled")):
                continue  # not a refund history this checker can read
            if not any(op.name == COMMIT for op in ops):
                continue
            out.append(self._group(group, ops, {"refunds": 0, **{k: state[k] for k in
                                                                 ("amount", "refund_limit", "refunds_enabled")}}))
        return out

    def check(self, history: History) -> CheckResult:
        return _combine(self.name, self.judge(history), "histories")

    def check_groups(self, parts: Iterable[list[dict]]) -> CheckResult:
        return _check_groups(self, parts, "histories")

    @staticmethod
    def quick(rows: list[dict]) -> Any:
        """One group's lines: None (no refund setup, or no commit), VALID (no policy change, no indeterminate
        commit, and none landed, or one while the setup's state keeps the rule: every order is then the same),
        or GENERAL (any other group, or one that is not judged: :meth:`judge` on it)."""
        for r in rows:
            if r["op"] == SETUP:
                state = r["value"].get("state") or {}
                break
        else:
            state = {}
        if not ("amount" in state and "refund_limit" in state and "refunds_enabled" in state):
            return None
        landed = 0
        for r in rows:
            name = r["op"]
            if name == COMMIT:
                status = r["status"]
                if status == OK:
                    landed += 1
                elif status == INDETERMINATE:
                    return GENERAL
            elif name == SET_POLICY or name == COMMIT_TXN:
                return GENERAL
        if landed == 0:  # no effect: VALID if some commit was refused, else not judged
            return Verdict.VALID if any(r["op"] == COMMIT for r in rows) else None
        if landed == 1 and _holds({"refunds": 0, "amount": state["amount"], "refund_limit": state["refund_limit"],
                                   "refunds_enabled": state["refunds_enabled"]}):
            return Verdict.VALID
        return GENERAL

    @staticmethod
    def _effects(ops: list[Operation]) -> list[_Effect]:
        effects, pending = [], {}
        for op in ops:
            if op.name == COMMIT and op.status in (OK, INDETERMINATE):
                effects.append(_Effect(op, "commit", {}, op.status == INDETERMINATE))
            elif op.name == SET_POLICY and op.status in (OK, INDETERMINATE):
                changes = dict(op.value.get("args") or {})
                if op.value.get("result") == "updated":  # inside a transaction: lands at its commit_txn
                    pending.setdefault(op.actor, {}).update(changes)
                else:
                    effects.append(_Effect(op, "policy", changes, op.status == INDETERMINATE))
            elif op.name == COMMIT_TXN and op.actor in pending and op.status in (OK, INDETERMINATE):
                effects.append(_Effect(op, "policy", pending.pop(op.actor), op.status == INDETERMINATE))
        return effects

    def _group(self, group: Any, ops: list[Operation], initial: dict) -> GroupVerdict:
        g = _group_name(group)
        effects = self._effects(ops)
        optional = [e for e in effects if e.optional]
        if len(optional) > MAX_OPTIONAL or len(effects) > MAX_EFFECTS:
            return GroupVerdict(group, Verdict.UNKNOWN, Witness((), f"history {g}: too many effects to enumerate."))
        outcomes = []  # per choice of optional effects: None if some linearization keeps the rule, else a witness
        for k in range(len(optional) + 1):
            for chosen in itertools.combinations(optional, k):
                included = [e for e in effects if not e.optional or e in chosen]
                outcomes.append(self._violation(g, included, initial))
        if all(w is None for w in outcomes):
            return GroupVerdict(group, Verdict.VALID)
        witness = next(w for w in outcomes if w is not None)
        if all(w is not None for w in outcomes):
            return GroupVerdict(group, Verdict.INVALID, witness)
        text = (f"history {g}: whether the rule held at every commit depends on indeterminate operations "
                f"({', '.join(f'{e.op.actor} {e.op.name}' for e in optional)}); if they landed: "
                + witness.explanation)
        return GroupVerdict(group, Verdict.UNKNOWN, Witness(witness.steps, text))

    def _violation(self, g: str, effects: list[_Effect], initial: dict) -> Witness | None:
        """None if some real-time-consistent order keeps the rule at every commit; else the first violation seen."""
        first: list[Witness] = []

        def search(placed: list[_Effect], rest: list[_Effect], state: dict) -> bool:
            if not rest:
                return True
            for e in rest:
                if any(_before(o.op, e.op) for o in rest if o is not e):
                    continue  # something still unplaced must come first
                if e.kind == "commit":
                    if not _holds(state):
                        if not first:
                            first.append(self._witness(g, e, placed, state))
                        continue
                    nxt = {**state, "refunds": state["refunds"] + 1}
                else:
                    nxt = {**state, **e.changes}
                if search(placed + [e], [o for o in rest if o is not e], nxt):
                    return True
            return False

        return None if search([], list(effects), dict(initial)) else first[0]

    @staticmethod
    def _witness(g: str, commit: _Effect, placed: list[_Effect], state: dict) -> Witness:
        why = []
        if state["refunds"] != 0:
            why.append(f"the target already held {state['refunds']} refund(s)")
        if state["amount"] > state["refund_limit"]:
            why.append(f"amount {state['amount']} > refund_limit {state['refund_limit']}")
        if state["refunds_enabled"] != 1:
            why.append("refunds were disabled")
        changes = [e for e in placed if e.kind == "policy"]
        by = "; ".join(f"{e.op.actor} set {', '.join(f'{k}={v}' for k, v in e.changes.items())} at {_t(e.op.end)}"
                       for e in changes)
        op = commit.op
        text = (f"history {g}: {op.actor} committed the refund with {_token(op)}"
                + (f" and policy token v{op.value['policy_token']}" if op.value.get("policy_token") is not None else "")
                + f" at {_t(op.end)}, while {' and '.join(why)}" + (f" ({by})" if by else "")
                + ": the declared rule was false at commit, an effect it forbids.")
        return Witness(tuple(e.op.index for e in placed) + (op.index,), text)


# ------------------------------------------------------------------ oracle agreement (durable cells)
RELEASE = "release"
INVALID_WHEN_RELEASED = ("REPLAN", "BLOCK")


class OracleAgreement:
    """The mechanism's decision agrees with the scenario's declared oracle, and no invalid effect was released.

    Reads ``release`` operations (one per execution group): ``value`` holds ``oracle`` (from the
    scenario file, proven against its rules at load time), ``outcome``, ``released`` and
    ``payload_stale``.  INVALID when the outcome differs from the oracle, naming what was released
    (an effect released although the oracle is REPLAN or BLOCK, or with a stale payload, is an invalid
    effect); UNKNOWN when the release step's process died (it may or may not have committed) or never
    ran; VALID otherwise.
    """

    name = "oracle_agreement"
    family = "revalidation"
    reads = frozenset({RELEASE})  # and every indeterminate operation, whatever its name (runners/check.py)

    def judge(self, history: History) -> list[GroupVerdict]:
        out = []
        for group, ops in history.groups().items():
            release = next((op for op in ops if op.name == RELEASE), None)
            if release is None:
                if any(op.indeterminate for op in ops):
                    dead = next(op for op in ops if op.indeterminate)
                    out.append(GroupVerdict(group, Verdict.UNKNOWN, Witness((dead.index,), (
                        f"execution {group}: {dead.actor}'s {dead.name} died (status indeterminate), so the release "
                        "never ran: the outcome is unknown, not valid"))))
                continue
            out.append(self._one(group, release))
        return out

    def _one(self, group: Any, op: Operation) -> GroupVerdict:
        v = op.value
        if op.indeterminate:
            return GroupVerdict(group, Verdict.UNKNOWN, Witness((op.index,), (
                f"execution {group}: the release by {op.actor} died before answering; whether the effect committed "
                "is unknown")))
        if v.get("outcome") == v.get("oracle"):
            return GroupVerdict(group, Verdict.VALID)
        released = bool(v.get("released"))
        if released and v.get("oracle") in INVALID_WHEN_RELEASED:
            what = f"released the effect although the oracle is {v['oracle']}: an invalid effect (a false allow)"
        elif released and v.get("payload_stale"):
            what = "released the effect with a stale payload although the oracle is REFRESH: an invalid effect"
        else:
            what = f"decided {v.get('outcome')} where the declared rules imply {v.get('oracle')}"
        return GroupVerdict(group, Verdict.INVALID, Witness((op.index,), (
            f"execution {group}: {op.actor} ({v.get('mechanism', 'the mechanism')}) {what}.")))

    def check(self, history: History) -> CheckResult:
        return _combine(self.name, self.judge(history), "executions")

    def check_groups(self, parts: Iterable[list[dict]]) -> CheckResult:
        return _check_groups(self, parts, "executions")

    @staticmethod
    def quick(rows: list[dict]) -> Any:
        """One group's lines: None (no release, nothing indeterminate), VALID (a release that answered the oracle's
        decision), or GENERAL (:meth:`judge` on the group)."""
        release = next((r for r in rows if r["op"] == RELEASE), None)
        if release is None:
            return GENERAL if any(r["status"] == INDETERMINATE for r in rows) else None
        value = release["value"]
        if release["status"] != INDETERMINATE and value.get("outcome") == value.get("oracle"):
            return Verdict.VALID
        return GENERAL


CHECKERS = {c.name: c for c in (OneCommitPerPair(), RuleHoldsAtCommit(), OracleAgreement())}


def verdicts_by_group(history: History, checkers: Iterable = ()) -> dict[Any, GroupVerdict]:
    """Per group, the worst verdict among ``checkers`` (default: all) that judged it."""
    out: dict[Any, GroupVerdict] = {}
    for c in checkers or CHECKERS.values():
        for gv in c.judge(history):
            prev = out.get(gv.group)
            if prev is None or gv.verdict.rank > prev.verdict.rank:
                out[gv.group] = gv
    return out


__all__ = ["CHECKERS", "GroupVerdict", "OneCommitPerPair", "RuleHoldsAtCommit", "verdicts_by_group"]
