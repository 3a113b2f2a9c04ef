"""A small synchronous client of the node's HTTP RPC.

Every failure leaves ``call`` as one of the wallet's own errors: ``RpcFailure`` when the node
answered (with its error name and text when it sent a JSON error, else the HTTP reason), and
``NodeUnreachable`` when it could not be reached or did not answer in time. A URL that is not
an http(s) address with a host and a valid port is ``BadUrl`` at construction, before any call.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from wallet.errors import BadUrl, NodeUnreachable, RpcFailure


class RpcClient:
    def __init__(self, url: str, timeout: float = 40.0) -> None:
        self.url = check_url(url).rstrip("/")
        self.timeout = timeout

    def call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body or {}).encode()
        request = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as err:
            raise _failure(err.code, str(err.reason), _read(err)) from err
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise NodeUnreachable(f"cannot reach the node at {self.url}: {reason}") from err
        try:
            return json.loads(raw)
        except ValueError as err:
            raise RpcFailure(status, "malformed_response", "the answer is not JSON") from err

    def get_info(self) -> dict[str, Any]:
        return self.call("/v1/chain/get_info")  # type: ignore[no-any-return]

    def get_account(self, name: str) -> dict[str, Any]:
        return self.call("/v1/chain/get_account", {"account_name": name})  # type: ignore[no-any-return]


def check_url(url: str) -> str:
    """``url`` if urllib can call it: http or https, a host, and a port (if any) in 1..65535.
    urllib itself fails on the others with ValueError or http.client.InvalidURL, at the call."""
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
    return url


def _read(err: urllib.error.HTTPError) -> bytes:
    try:
        return err.read()
    except OSError:  # the body was cut off: the status and reason still say what happened
        return b""


def _failure(status: int, reason: str, raw: bytes) -> RpcFailure:
    """The node's own error from a JSON error body ``{"error": {"name", "what"}}``; else one
    named ``http_error`` with the HTTP reason."""
    try:
        error = json.loads(raw)["error"]
        name, what = error["name"], error["what"]
    except (ValueError, KeyError, TypeError):
        return RpcFailure(status, "http_error", reason)
    if not isinstance(name, str) or not isinstance(what, str):
        return RpcFailure(status, "http_error", reason)
    return RpcFailure(status, name, what)
