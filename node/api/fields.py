"""Request fields of the RPC: each kind both checks a JSON value and describes itself as JSON
Schema, so a route's validation and its OpenAPI document come from one declaration.

A value is checked for its JSON type first and its size second, and only then converted, so
no input reaches ``int()`` or ``bytes.fromhex`` that could make them raise anything but our
own ``BadField`` (``str.isdigit`` accepts "²" and Arabic-Indic digits, ``int`` refuses over
4,300 digits; patterns here are ASCII classes matched whole). Patterns use only syntax that
means the same in Python and in ECMA-262, the regex dialect of JSON Schema.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from chain.core.primitives.keytext import K1_SIGNATURE, MAX_TEXT, signature_bytes
from node.errors import NodeError


class RequestError(NodeError):
    """A request body that does not match the route's fields (HTTP 400)."""

    name = "bad_request"

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field!r} {reason}")
        self.field = field
        self.reason = reason


class MissingField(RequestError):
    """A required field is absent."""

    name = "missing_field"


class BadField(RequestError):
    """A field has the wrong type, size, form or range."""

    name = "bad_field"


class Kind(Protocol):
    """What a field's value must be."""

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of a valid value."""
        ...

    def parse(self, value: Any) -> Any:
        """The value, converted; raises ValueError with the reason it is not valid."""
        ...


@dataclass(frozen=True, slots=True)
class Integer:
    minimum: int
    maximum: int

    def schema(self) -> dict[str, Any]:
        return {"type": "integer", "minimum": self.minimum, "maximum": self.maximum}

    def parse(self, value: Any) -> int:
        # JSON Schema counts 2.0 as an integer; orjson reads integers beyond 64 bits as floats.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if type(value) is not int or not self.minimum <= value <= self.maximum:
            raise ValueError(f"must be an integer from {self.minimum} to {self.maximum}")
        return value


@dataclass(frozen=True, slots=True)
class Text:
    pattern: str  # matched whole; ASCII classes only
    max_length: int
    what: str  # "a 64-digit hex string": the reason given when a value does not match
    # The pattern compiled once (every push parses its fields: the RPC's busiest path).
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_regex", re.compile(self.pattern, re.ASCII))

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "pattern": f"^(?:{self.pattern})$", "maxLength": self.max_length}

    def parse(self, value: Any) -> str:
        if (
            not isinstance(value, str)
            or len(value) > self.max_length
            or self._regex.fullmatch(value) is None
        ):
            raise ValueError(f"must be {self.what}")
        return value


_HEX_DIGITS = re.compile("[0-9a-fA-F]*", re.ASCII)


@dataclass(frozen=True, slots=True)
class Hex:
    """Hex digits of ``min_bytes`` to ``max_bytes`` bytes; parsed to bytes."""

    min_bytes: int
    max_bytes: int
    text: Text = field(init=False, repr=False, compare=False)  # the schema's form of it

    def __post_init__(self) -> None:
        size = (
            f"{self.min_bytes}"
            if self.min_bytes == self.max_bytes
            else f"{self.min_bytes} to {self.max_bytes}"
        )
        text = Text(
            f"(?:[0-9a-fA-F]{{2}}){{{self.min_bytes},{self.max_bytes}}}",
            2 * self.max_bytes,
            f"hex of {size} bytes",
        )
        object.__setattr__(self, "text", text)

    def schema(self) -> dict[str, Any]:
        return self.text.schema()

    def parse(self, value: Any) -> bytes:
        # The text's pattern, checked as its length and its digits (a counted repeat of
        # digit pairs costs the regex engine several times more on a transaction's hex).
        if isinstance(value, str) and len(value) % 2 == 0 and _HEX_DIGITS.fullmatch(value):
            size = len(value) // 2
            if self.min_bytes <= size <= self.max_bytes:
                return bytes.fromhex(value)
            if size > self.max_bytes:
                # Well-formed hex that is only too long gets its size, not a lesson in hex:
                # the sender of an oversized transaction learns by how much it is over.
                raise ValueError(f"is too large: {size} bytes, at most {self.max_bytes}")
        raise ValueError(f"must be {self.text.what}")


@dataclass(frozen=True, slots=True)
class Signature:
    """A 65-byte K1 signature as BoR's hex (r, s, recovery id) or Antelope's ``SIG_K1_``
    base58 text (checked by its checksum); parsed to BoR's 65 bytes."""

    kinds: tuple[Hex, Text] = field(
        init=False,
        repr=False,
        compare=False,
        default=(Hex(65, 65), Text(f"{K1_SIGNATURE}[1-9A-HJ-NP-Za-km-z]{{1,100}}", MAX_TEXT, "")),
    )

    def schema(self) -> dict[str, Any]:
        return {"anyOf": [k.schema() for k in self.kinds]}

    def parse(self, value: Any) -> bytes:
        """A SIG_K1_ text of the schema's form whose checksum or header is wrong is a
        BadSignature (401, as a signature that recovers no key), not a malformed field: the
        schema cannot say which base58 texts carry a valid check."""
        as_hex, as_text = self.kinds
        if isinstance(value, str) and value.startswith(K1_SIGNATURE):
            try:
                text = as_text.parse(value)
            except ValueError as err:
                raise ValueError(f"is not a SIG_K1_ signature: {err}") from None
            return signature_bytes(text)
        try:
            return as_hex.parse(value)
        except ValueError:
            raise ValueError("must be hex of 65 bytes or a SIG_K1_ signature") from None


@dataclass(frozen=True, slots=True)
class Boolean:
    def schema(self) -> dict[str, Any]:
        return {"type": "boolean"}

    def parse(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError("must be true or false")
        return value


@dataclass(frozen=True, slots=True)
class JsonObject:
    """Any JSON object (a contract action's arguments, checked later against its ABI)."""

    def schema(self) -> dict[str, Any]:
        return {"type": "object"}

    def parse(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValueError("must be a JSON object")
        return value


@dataclass(frozen=True, slots=True)
class Choice:
    values: tuple[str, ...]

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.values)}

    def parse(self, value: Any) -> str:
        if not isinstance(value, str) or value not in self.values:
            raise ValueError(f"must be one of {', '.join(self.values)}")
        return value


@dataclass(frozen=True, slots=True)
class ListOf:
    item: Kind
    min_items: int
    max_items: int
    unique: bool = False  # no item twice (JSON Schema's uniqueItems)

    def schema(self) -> dict[str, Any]:
        out = {
            "type": "array",
            "items": self.item.schema(),
            "minItems": self.min_items,
            "maxItems": self.max_items,
        }
        if self.unique:
            out["uniqueItems"] = True
        return out

    def parse(self, value: Any) -> list[Any]:
        if not isinstance(value, list) or not self.min_items <= len(value) <= self.max_items:
            raise ValueError(f"must be a list of {self.min_items} to {self.max_items} items")
        items = []
        for i, item in enumerate(value):
            try:
                items.append(self.item.parse(item))
            except ValueError as err:
                raise ValueError(f"item {i} {err}") from None
        if self.unique and len(set(map(repr, items))) != len(items):
            raise ValueError("must not hold an item twice")
        return items


@dataclass(frozen=True, slots=True)
class AnyOf:
    """The first of ``kinds`` that takes the value."""

    kinds: tuple[Kind, ...]
    what: str

    def schema(self) -> dict[str, Any]:
        return {"anyOf": [k.schema() for k in self.kinds]}

    def parse(self, value: Any) -> Any:
        for kind in self.kinds:
            try:
                return kind.parse(value)
            except ValueError:
                continue
        raise ValueError(f"must be {self.what}")


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    kind: Kind
    description: str
    required: bool = True
    default: Any = field(default=None)
    # Another name the field is sent under (Antelope's clients send ``account_name`` where
    # BoR's own clients send ``account``); given both, both must be valid and ``name`` wins.
    alias: str | None = None

    def schema(self) -> dict[str, Any]:
        schema = self.kind.schema() | {"description": self.description}
        return schema if self.required else schema | {"default": self.default}

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,) if self.alias is None else (self.name, self.alias)


def parse_fields(fields: Sequence[Field], body: dict[str, Any]) -> dict[str, Any]:
    """Each field's converted value (or its default); fields not declared are ignored.
    Raises MissingField or BadField naming the first field that is wrong."""
    values: dict[str, Any] = {}
    for f in fields:
        given = [n for n in f.names if n in body]
        if not given:
            if f.required:
                also = "" if f.alias is None else f" (or {f.alias!r})"
                raise MissingField(f.name, f"is required{also}")
            values[f.name] = f.default
            continue
        parsed = []
        for name in given:
            try:
                parsed.append(f.kind.parse(body[name]))
            except ValueError as err:
                raise BadField(name, str(err)) from None
        values[f.name] = parsed[0]
    return values


def object_schema(fields: Sequence[Field]) -> dict[str, Any]:
    """The JSON Schema of a body with ``fields``."""
    properties = {f.name: f.schema() for f in fields}
    properties |= {
        f.alias: f.schema() | {"description": f"{f.description} (as {f.name!r})"}
        for f in fields
        if f.alias is not None
    }
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [f.name for f in fields if f.required and f.alias is None]
    either = [
        {"anyOf": [{"required": [n]} for n in f.names]}
        for f in fields
        if f.required and f.alias is not None
    ]
    return (
        schema
        | ({"required": required} if required else {})
        | ({"allOf": either} if either else {})
    )
