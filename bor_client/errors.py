"""The SDK's errors: every failure a caller can meet is one of these, never aiohttp's,
urllib's or json's (those stop at the transport, ``raise ... from``).

``RpcError`` is the node's own refusal, with its HTTP status and the error's name and reason
as the node wrote them (``{"error": {"code", "name", "what"}}``); its subclasses let a caller
catch a kind of refusal (``except NotFound``) without comparing strings.
"""

from __future__ import annotations


class ClientError(Exception):
    """Base class of the SDK's errors."""


class BadUrl(ClientError):
    """The node's URL is not one the client can call (an http(s) address, a host, a port)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"node URL {url!r}: {reason}")
        self.url = url
        self.reason = reason


class NodeUnreachable(ClientError):
    """The node could not be reached, or did not answer in time."""


class RpcError(ClientError):
    """The node answered with an error: its HTTP status, error name and reason."""

    def __init__(self, status: int, name: str, what: str) -> None:
        super().__init__(f"node refused ({status} {name}): {what}")
        self.status = status
        self.name = name
        self.what = what


class BadRequest(RpcError):
    """400: the body did not match the route's schema (the node names the field)."""


class Unauthorized(RpcError):
    """401: a signature is wrong or missing (``bad_signature``, ``missing_authority``)."""


class CannotPay(RpcError):
    """402: the account cannot pay for the transaction (``insufficient_funds``)."""


class Forbidden(RpcError):
    """403: the actor may not perform this action (``unauthorized``)."""


class NotFound(RpcError):
    """404: no such block, account, transaction, contract or route."""


class Duplicate(RpcError):
    """409: the transaction was seen already (``tx_duplicate``), or a conflicting job runs."""


class TooLarge(RpcError):
    """413: the body or the transaction is too large."""


class Rejected(RpcError):
    """422: the request is well formed but the chain refuses its content (an expired
    transaction, a contract's assertion, a TaPoS mismatch...)."""


class Busy(RpcError):
    """429, 503 or 504: the node is busy (a full mempool, too many requests); retry later."""


class MalformedResponse(RpcError):
    """The node's answer is not the JSON its route promises (named ``malformed_response``)."""

    def __init__(self, status: int, what: str) -> None:
        super().__init__(status, "malformed_response", what)


_BY_STATUS: dict[int, type[RpcError]] = {
    400: BadRequest,
    401: Unauthorized,
    402: CannotPay,
    403: Forbidden,
    404: NotFound,
    409: Duplicate,
    413: TooLarge,
    422: Rejected,
    429: Busy,
    503: Busy,
    504: Busy,
}


def rpc_error(status: int, name: str, what: str) -> RpcError:
    """The error class for a node's refusal: by its status, else ``RpcError`` itself."""
    return _BY_STATUS.get(status, RpcError)(status, name, what)


class KeyMissing(ClientError):
    """No key the client holds can sign for an account that must authorize a transaction."""


class KeystoreError(ClientError):
    """Base class of the wallet file's errors."""


class WrongPassword(KeystoreError):
    """The password does not decrypt the wallet file."""


class WalletFileError(KeystoreError):
    """The wallet file is missing, unreadable or damaged."""


class StreamRefused(ClientError):
    """The node refused or ended a stream subscription (its ``error`` frame's reason)."""

    def __init__(self, reason: str, code: int | None) -> None:
        super().__init__(f"the stream was refused: {reason}")
        self.reason = reason
        self.code = code


class BadAmount(ClientError):
    """An amount the client will not turn into base units (its form, decimals or size)."""


class BadArgument(ClientError):
    """An argument the client refuses before asking the node (an authorization list...)."""


class NoAbi(ClientError):
    """The contract was deployed without an ABI: its actions take bytes, not JSON."""
