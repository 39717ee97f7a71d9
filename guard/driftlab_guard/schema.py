"""Layer 1, schema validation: LangGraph state is checked before it is persisted (checkpoint validity).

Serves "Resume Means Resume" (arXiv 2608.03836), checkpoint validity (CV): the
paper found that LangGraph 1.2.9 persists a schema-invalid state silently.  A
LangGraph graph declares its state as a TypedDict, a dataclass or a pydantic
model, and each is enforced differently (or not at all) by LangGraph: a
TypedDict and a dataclass are never checked after the input, and a pydantic
model validates what goes in, not what a node returns.

:class:`StateSchema` reads the declared fields once and checks each persisted
channel value against its field's type with pydantic in **strict** mode (no
coercion: ``"3"`` is not an ``int``), so that a checkpoint or a pending write
that does not fit the schema is refused (:class:`InvalidState`) before the
saver writes anything.  Channels that are not fields of the schema (LangGraph's
own ``branch:to:*`` and ``__*__`` channels) are not checked.  What it trades
away: a check per persisted value (a few microseconds per field), and fields
whose annotation pydantic cannot build an adapter for are left unchecked (they
are listed in :attr:`StateSchema.unchecked`).
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any, Iterable, Mapping

from pydantic import BaseModel, TypeAdapter, ValidationError

from driftlab_guard.errors import InvalidState


def _strip(tp: Any) -> Any:
    """``Annotated[T, reducer]`` -> ``T`` (LangGraph keeps reducers in the annotation's metadata)."""
    if typing.get_origin(tp) is typing.Annotated:
        return typing.get_args(tp)[0]
    return tp


def schema_fields(schema: type) -> dict[str, Any]:
    """The declared fields of a TypedDict, dataclass or pydantic model -> their (reducer-free) types."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return {name: _strip(f.annotation) for name, f in schema.model_fields.items()}
    if dataclasses.is_dataclass(schema) or typing.is_typeddict(schema):
        return {name: _strip(tp) for name, tp in typing.get_type_hints(schema, include_extras=True).items()}
    raise TypeError(f"{schema!r}: a state schema is a TypedDict, a dataclass or a pydantic model")


class StateSchema:
    """The fields of a graph's state schema, each with a strict pydantic validator."""

    def __init__(self, schema: type):
        self.schema = schema
        self.name = getattr(schema, "__name__", str(schema))
        self.adapters: dict[str, TypeAdapter[Any]] = {}
        self.unchecked: list[str] = []
        for name, tp in schema_fields(schema).items():
            try:
                self.adapters[name] = TypeAdapter(tp)
            except Exception:  # noqa: BLE001 - an annotation pydantic cannot express stays unchecked
                self.unchecked.append(name)

    def problems(self, values: Iterable[tuple[str, Any]]) -> list[str]:
        """Why these (channel, value) pairs violate the schema ([] when they fit it)."""
        out: list[str] = []
        for channel, value in values:
            adapter = self.adapters.get(channel)
            if adapter is None:
                continue
            try:
                adapter.validate_python(value, strict=True)
            except ValidationError as exc:
                first = exc.errors()[0]
                out.append(f"{channel}={value!r}: {first['msg']} ({self.name})")
        return out

    def check(self, values: Mapping[str, Any] | Iterable[tuple[str, Any]], where: str) -> None:
        """Raise :class:`InvalidState` when any value violates the schema."""
        pairs = values.items() if isinstance(values, Mapping) else values
        if problems := self.problems(pairs):
            raise InvalidState(where, problems)


def as_schema(schema: "type | StateSchema | None") -> StateSchema | None:
    """Accept a schema class, a ready :class:`StateSchema` or None."""
    if schema is None or isinstance(schema, StateSchema):
        return schema
    return StateSchema(schema)
