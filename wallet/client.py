"""A small synchronous client of the node's HTTP RPC."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from wallet.errors import NodeUnreachable, RpcFailure


class RpcClient:
    def __init__(self, url: str, timeout: float = 40.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body or {}).encode()
        request = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as err:
            try:
                payload = json.loads(err.read())
                error = payload["error"]
                raise RpcFailure(err.code, error["name"], error["what"]) from err
            except (ValueError, KeyError, TypeError):
                raise RpcFailure(err.code, "http_error", str(err.reason)) from err
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise NodeUnreachable(f"cannot reach the node at {self.url}: {reason}") from err

    def get_info(self) -> dict[str, Any]:
        return self.call("/v1/chain/get_info")  # type: ignore[no-any-return]

    def get_account(self, name: str) -> dict[str, Any]:
        return self.call("/v1/chain/get_account", {"account_name": name})  # type: ignore[no-any-return]
