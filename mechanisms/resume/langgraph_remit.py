"""LangGraph + REMIT (``remit-contract`` 0.1.2), the paper authors' own guard, as a runtime row beside the lab's.

Serves issue 14 §3: "Resume Means Resume" (arXiv 2608.03836) ships REMIT, a
Rust core with a LangGraph checkpointer shim.  This row is the lab's stock
LangGraph adapter (:class:`mechanisms.resume.langgraph_runtime.LangGraphRuntime`,
the installed release) on ``remit.wrap(SqliteSaver | PostgresSaver, conn,
validator=..., cross_process_gate=True)`` exactly as REMIT's README
configures it for concurrent resumers:

- ``cross_process_gate=True`` (opt-in; its authors recommend it for
  concurrent resumers): a resume of a parked thread takes a
  ``(thread, checkpoint)`` claim in the saver's own store before any node
  runs; the loser raises ``RemitConsumeConflict`` -> the call is ``refused``;
- ``validator``: raises on a state that does not fit the graph's schema
  (strict pydantic per declared field); REMIT turns it into
  ``RemitValidityError`` before anything is persisted -> ``failed``;
- the lab's own reads (``state``, the head before ``start``/``fork``) pass
  ``remit_inspect=True``, as REMIT documents for inspection reads, so that
  reading a parked thread does not take its claim.  Calls that run the graph
  (``resume``, and ``recover`` = ``invoke(None)``, as for every LangGraph row)
  are not inspections: REMIT decides what they claim.

Effects are the family's plain ledger (REMIT has no effect ledger of its own
in the LangGraph shim: its EO core is a Rust API the graph would have to call
per effect, which stock nodes do not), LangGraph's default durability.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import remit
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import TypeAdapter, ValidationError

from mechanisms.resume.langgraph_graphs import STATE_KINDS
from mechanisms.resume.langgraph_runtime import SQLITE_SYNCHRONOUS, LangGraphRuntime, _pointed
from vocabulary.resume import PARKED, PARKED_POINT, REFUSED, Status


def schema_validator(state_cls: type):
    """REMIT's ``validator``: raise ``ValueError`` when a declared channel holds a value of the wrong type."""
    import typing

    adapters = {k: TypeAdapter(t) for k, t in typing.get_type_hints(state_cls).items()}

    def validate(checkpoint: dict) -> None:
        for channel, value in (checkpoint.get("channel_values") or {}).items():
            if channel in adapters:
                try:
                    adapters[channel].validate_python(value, strict=True)
                except ValidationError as exc:
                    raise ValueError(f"{channel}={value!r}: {exc.errors()[0]['msg']}") from None

    return validate


class LangGraphRemitRuntime(LangGraphRuntime):
    """Stock LangGraph on REMIT's wrapped saver, cross-process gate on (module docstring)."""

    name = "langgraph+remit"
    #: the adoption, as REMIT's README shows it (resume_guards counts its lines)
    adoption = ("import remit\n"
                "saver = remit.wrap(SqliteSaver, conn, validator=validate, cross_process_gate=True)\n")

    def _open_saver(self):
        ns = self.backend.namespace.lower()
        kwargs = dict(remit_validator=schema_validator(STATE_KINDS["typeddict"]), remit_cross_process_gate=True)
        if self.backend.kind == "sqlite":
            path = str(Path(self.backend.location) / f"{ns}lg.sqlite")
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
            self._conn.execute(SQLITE_SYNCHRONOUS)
            saver = remit.saver_class(_pointed(SqliteSaver))(self._conn, **kwargs)
        else:
            import psycopg
            from psycopg.rows import dict_row

            self._conn = psycopg.connect(self.backend.location, autocommit=True, prepare_threshold=0,
                                         row_factory=dict_row, options=f"-c search_path={ns}")
            saver = remit.saver_class(_pointed(PostgresSaver))(self._conn, **kwargs)
        saver.runtime_point = self._checkpoint_point
        return saver

    def _snapshot(self, config):
        config = {"configurable": {**config["configurable"], "remit_inspect": True}}
        return super()._snapshot(config)

    def _invoke(self, run_id: str, value: Any, checkpoint_id: str | None = None) -> Status:
        """As the stock row's, with REMIT's two answers told apart from a failed node."""
        try:
            self.app.invoke(value, self._config(run_id, checkpoint_id), durability=self.durability)
        except remit.RemitConsumeConflict as exc:
            return Status(run_id, REFUSED, reason=f"RemitConsumeConflict: {_line(exc)}")
        except remit.RemitValidityError as exc:
            return self._failed(run_id, f"RemitValidityError (nothing persisted): {_line(exc)}")
        except Exception as exc:  # noqa: BLE001 - a node or LangGraph failed: the call's outcome is "failed"
            return self._failed(run_id, f"{type(exc).__name__}: {_line(exc)}")
        status = self.state(run_id)
        if status.state == PARKED:
            self.point(PARKED_POINT, run_id, self.graph.interrupt_step)
        return status


def _line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else ""

