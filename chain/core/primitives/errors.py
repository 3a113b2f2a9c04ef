"""The error hierarchy of the chain package.

Every class has a stable ``name`` (used as the error name on the RPC) and a one-line
docstring. Transaction errors carry enough context to tell the user what was wrong.
"""

from __future__ import annotations


class ChainError(Exception):
    """Base class of every error raised by the chain package."""

    name = "chain_error"


class EncodingError(ChainError):
    """Bytes that are not a canonical encoding of the expected object."""

    name = "malformed"

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"malformed {what}: {reason}")
        self.what = what
        self.reason = reason


class InvalidKey(ChainError):
    """A public or private key that cannot be parsed."""

    name = "invalid_key"


# --- transactions -------------------------------------------------------------------------


class TransactionError(ChainError):
    """A transaction that cannot be accepted."""

    name = "invalid_transaction"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class MalformedTransaction(TransactionError):
    """A transaction whose encoding or fields are not well formed."""

    name = "malformed_transaction"


class OversizedTransaction(TransactionError):
    """A transaction larger than the chain's limit."""

    name = "tx_too_large"


class BadSignature(TransactionError):
    """A signature that does not parse or recover to a key."""

    name = "bad_signature"


class MissingAuthority(TransactionError):
    """An actor whose active key did not sign, or a signature nobody needed."""

    name = "missing_authority"


class Unauthorized(TransactionError):
    """An action the actor is not allowed to perform at all (governance only)."""

    name = "unauthorized"


class ExpiredTransaction(TransactionError):
    """A transaction whose expiration has passed or is too far in the future."""

    name = "tx_expired"


class TaposMismatch(TransactionError):
    """A reference block that is not on this chain (TaPoS)."""

    name = "tapos_mismatch"


class DuplicateTransaction(TransactionError):
    """A transaction id already seen and not yet expired."""

    name = "tx_duplicate"


class UnknownAccount(TransactionError):
    """An action naming an account that does not exist."""

    name = "unknown_account"


class InsufficientFunds(TransactionError):
    """A transfer or stake larger than the available balance."""

    name = "insufficient_funds"


class InvalidAction(TransactionError):
    """An action whose arguments break a rule of the chain."""

    name = "invalid_action"


class ContractError(TransactionError):
    """A contract refused or failed: an assertion, a trap, a bad module, an unknown action.
    The message names the contract and action (``token::transfer: ...``)."""

    name = "contract_error"


class ContractMissingAuthority(MissingAuthority, ContractError):
    """A contract's ``require_auth`` of an account that did not authorize the action: a
    contract error (caught as one) that the RPC answers as the missing authority it is."""

    name = "missing_authority"


class ReadOnlyAction(ContractError):
    """A transaction (or a contract, inline) carrying an action its contract's ABI marks
    ``read_only``: such an action is run by ``call``, never included in a block."""

    name = "read_only_action"


class ResourceExceeded(TransactionError):
    """A contract went past a limit of the chain (fuel, memory, storage, inline depth, sizes);
    the message names the limit, its value and where it was hit."""

    name = "resource_exceeded"


class OutOfFuel(ResourceExceeded):
    """A contract spent the fuel it was given (``max_tx_fuel``, or what its block had left);
    the one resource error that a fuller block, rather than the transaction, may have caused."""


class BlockFuelExhausted(ResourceExceeded):
    """A transaction that ran out of the fuel its block had left (``max_block_fuel``): a
    producer keeps it for the next block, a validator refuses the block."""


class MempoolFull(TransactionError):
    """The mempool (or this account's share of it) is full."""

    name = "mempool_full"


# --- blocks -------------------------------------------------------------------------------


class BlockError(ChainError):
    """A block that cannot be accepted."""

    name = "invalid_block"

    def __init__(self, num: int, reason: str) -> None:
        super().__init__(f"block {num}: {reason}")
        self.num = num
        self.reason = reason


class InvalidBlock(BlockError):
    """A block that breaks a validation rule."""

    name = "invalid_block"


class OversizedBlock(InvalidBlock):
    """A block whose encoding is larger than the chain's ``max_block_bytes``."""

    name = "block_too_large"

    def __init__(self, num: int, size: int, limit: int) -> None:
        super().__init__(num, f"block is {size} bytes, limit {limit}")
        self.size = size
        self.limit = limit


class UnlinkableBlock(BlockError):
    """A block whose previous block is unknown."""

    name = "unlinkable_block"


class DoubleSign(BlockError):
    """A second, different block by the same producer for the same slot."""

    name = "double_sign"


class StaleBlock(BlockError):
    """A block at or below the last irreversible block that is not on our chain."""

    name = "stale_block"


# --- finality -----------------------------------------------------------------------------


class QcError(ChainError):
    """A quorum certificate that does not prove what it claims."""

    name = "invalid_qc"

    def __init__(self, num: int, reason: str) -> None:
        super().__init__(f"QC on block {num}: {reason}")
        self.num = num
        self.reason = reason


class MalformedQc(QcError):
    """A QC whose bitsets or signature count do not fit the finalizer policy."""

    name = "malformed_qc"


class DuplicateQcVote(QcError):
    """A QC that counts one finalizer or one signature twice."""

    name = "duplicate_qc_vote"


class ForgedQcSignature(QcError):
    """A QC signature that is not by the finalizer its bit names."""

    name = "forged_qc_signature"


class QcBelowThreshold(QcError):
    """A QC whose voters hold no more than two thirds of the finalizers' weight."""

    name = "qc_below_threshold"


class WrongProducerKey(ChainError):
    """The local producer key is not the key the schedule names for the slot."""

    name = "wrong_producer_key"


# --- storage ------------------------------------------------------------------------------


class StoreError(ChainError):
    """The block store failed or holds inconsistent data."""

    name = "store_error"


class StoreInUse(StoreError):
    """Another process (or this one) has the block store open; ``pid`` when it is known."""

    name = "store_in_use"

    def __init__(self, path: str, pid: int | None) -> None:
        owner = "another process" if pid is None else f"process {pid}"
        super().__init__(f"the block store at {path} is in use by {owner}")
        self.path = path
        self.pid = pid


class NotFound(ChainError):
    """A block, transaction or account that is not known."""

    name = "not_found"


class SnapshotError(ChainError):
    """A snapshot file that cannot be used: its reason names the problem."""

    name = "bad_snapshot"
