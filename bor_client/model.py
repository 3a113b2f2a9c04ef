"""JSON answers into the frozen dataclasses of ``bor_client.results``, by their type hints.

One converter for every answer, so that a result class is only its declaration: each field
is read from the member of the same name and checked against the field's type (an int is an
int, not a bool; a nested object becomes its own dataclass), a member the class does not
declare is kept in ``extra`` (a newer node's additions do not break an older client), and a
member the class requires but the answer lacks is a ``MalformedResponse`` naming it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from bor_client.errors import MalformedResponse

T = TypeVar("T")
EXTRA = "extra"  # the field of every result class that keeps the members it does not declare

_hints: dict[type[Any], dict[str, Any]] = {}


def hints_of(cls: type[Any]) -> dict[str, Any]:
    """The resolved type hints of a result class (computed once per class)."""
    found = _hints.get(cls)
    if found is None:
        found = _hints[cls] = typing.get_type_hints(cls)
    return found


def from_json(cls: type[T], value: Any, path: str = "answer") -> T:
    """``value`` (a JSON object) as an instance of the dataclass ``cls``."""
    if not isinstance(value, dict):
        raise MalformedResponse(200, f"{path}: expected an object, got {_kind(value)}")
    hints = hints_of(cls)
    args: dict[str, Any] = {}
    declared = set()
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        declared.add(field.name)
        if field.name == EXTRA:
            continue
        if field.name in value:
            args[field.name] = convert(hints[field.name], value[field.name], f"{path}.{field.name}")
        elif _required(field):
            raise MalformedResponse(200, f"{path}: missing {field.name!r}")
    if EXTRA in declared:
        args[EXTRA] = {k: v for k, v in value.items() if k not in declared}
    return cls(**args)


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def convert(hint: Any, value: Any, path: str) -> Any:
    """``value`` checked against (and built as) the type ``hint``."""
    if hint is Any:
        return value
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        rest = [o for o in options if o is not type(None)]
        if len(rest) == 1:
            return convert(rest[0], value, path)
        for option in rest:
            try:
                return convert(option, value, path)
            except MalformedResponse:
                continue
        raise MalformedResponse(200, f"{path}: {_kind(value)} matches none of {hint}")
    if origin is tuple:
        item = typing.get_args(hint)[0]
        if not isinstance(value, list):
            raise MalformedResponse(200, f"{path}: expected a list, got {_kind(value)}")
        return tuple(convert(item, v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Mapping):
        item = typing.get_args(hint)[1]
        if not isinstance(value, dict):
            raise MalformedResponse(200, f"{path}: expected an object, got {_kind(value)}")
        return {k: convert(item, v, f"{path}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return from_json(hint, value, path)  # type: ignore[arg-type]
    return _scalar(hint, value, path)


def _scalar(hint: Any, value: Any, path: str) -> Any:
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if hint is int and isinstance(value, bool):
        raise MalformedResponse(200, f"{path}: expected an integer, got a boolean")
    if hint in (int, str, bool) and isinstance(value, hint):
        return value
    raise MalformedResponse(200, f"{path}: expected {hint.__name__}, got {_kind(value)}")


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
