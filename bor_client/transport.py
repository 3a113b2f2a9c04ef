"""What the sync and the async client share of HTTP: the URL check and the reading of an
answer, so both raise the same errors for the same answer.

An answer with a JSON error body ``{"error": {"name", "what"}}`` is the node's own refusal
(``rpc_error``: a class by status); any other non-2xx answer is named ``http_error`` with the
HTTP reason; a 2xx answer that is not JSON is ``MalformedResponse``.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from bor_client.errors import BadUrl, MalformedResponse, RpcError, rpc_error

DEFAULT_TIMEOUT_S = 40.0
# The most of an answer read: a page of table rows or a block of large transactions stays
# far below; a server that streams without end is cut off here rather than fill memory.
MAX_ANSWER_BYTES = 256 << 20


def check_url(url: str) -> str:
    """``url`` without a trailing slash, if a client can call it: http or https, a host, and
    a port (if any) in 1..65535; else ``BadUrl`` saying which."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as err:  # an unclosed [ of an IPv6 address
        raise BadUrl(url, str(err)) from err
    if parts.scheme not in ("http", "https"):
        raise BadUrl(url, "not an http:// or https:// address")
    if not parts.hostname:
        raise BadUrl(url, "no host")
    try:
        port = parts.port  # ValueError when it is not a number or out of range
    except ValueError:
        port = 0
    if port == 0:
        raise BadUrl(url, "the port is not a number from 1 to 65535")
    return url.rstrip("/")


def encode_body(body: Any) -> bytes:
    return json.dumps({} if body is None else body, separators=(",", ":")).encode()


def read_answer(status: int, reason: str, raw: bytes) -> Any:
    """The JSON of a 2xx answer; the error any other answer stands for, raised."""
    if not 200 <= status < 300:
        raise error_of(status, reason, raw)
    try:
        return json.loads(raw)
    except ValueError as err:
        raise MalformedResponse(status, "the answer is not JSON") from err


def error_of(status: int, reason: str, raw: bytes) -> RpcError:
    """The node's own error from a JSON error body; else one named ``http_error``."""
    try:
        error = json.loads(raw)["error"]
        name, what = error["name"], error["what"]
    except (ValueError, KeyError, TypeError):
        return rpc_error(status, "http_error", reason)
    if not isinstance(name, str) or not isinstance(what, str):
        return rpc_error(status, "http_error", reason)
    return rpc_error(status, name, what)


def error_from_json(value: Any) -> RpcError | None:
    """A batch element's ``{"error": {"code", "name", "what"}}`` as its error; None when
    ``value`` is not one."""
    if not isinstance(value, dict) or set(value) != {"error"}:
        return None
    error = value["error"]
    if not isinstance(error, dict):
        return None
    code, name, what = error.get("code"), error.get("name"), error.get("what")
    if type(code) is not int or not isinstance(name, str) or not isinstance(what, str):
        return None
    return rpc_error(code, name, what)
