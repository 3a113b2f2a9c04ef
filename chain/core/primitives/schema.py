"""Every LevelDB key BoR writes, built in one place.

Numbers are big-endian so that iteration runs in height (or time) order. State keys all start
with ``s`` so the state is one contiguous range; undo records restore exactly that range.
"""

from __future__ import annotations

from chain.core.primitives.errors import EncodingError
from chain.core.primitives.types import BlockId, BlockNum, TxId

# chain metadata
META_CHAIN_ID = b"m:chain_id"
META_HEAD = b"m:head"
META_LIB = b"m:lib"
META_STATE_HASH = b"m:state_hash"  # the head state's lattice hash (chain.core.execution.state_hash)
META_FIRST_BLOCK = b"m:first_block"  # set when a snapshot started the store: blocks held from

# blocks (applied chain only; blocks on other branches live in the fork database in memory)
BLOCK = b"b"  # + id -> encoded signed block
BLOCK_NUM = b"n"  # + num(8) -> id
HEADER_STATE = b"h"  # + id -> encoded header state (reversible blocks and the LIB)
UNDO = b"u"  # + num(8) -> undo record of that block
TX_INDEX = b"t"  # + tx id -> num(8)
EVIDENCE = b"e"  # + producer + slot(8) + id -> encoded block (double signing)
VOTE_EVIDENCE = b"v"  # + finalizer key(33) + slot(8) -> encoded pair of votes (double voting)

# state
STATE = b"s"
ACCOUNT = b"sa"  # + name
PRODUCER = b"sp"  # + name
# + tx id -> expiration(4): the by-id index of the de-duplication set before it was the
# transaction index (TX_INDEX); a store holding any has its id lists indexed and them
# deleted when it is opened
TX_SEEN = b"st"
# + latest expiration(4) + num(8) -> the ids a block applied: expiration(4) + id(32) each
TX_BLOCK = b"sx"
TX_BLOCK_ITEM = 4 + 32
OLD_TX_EXPIRY = b"se"  # one entry per id, before TX_BLOCK: a store holding any is refused
BLOCK_SUMMARY = b"sb"  # + (num & 0xffff)(2) -> block id, for TaPoS
# contracts (chain.vm): names are Antelope's 64-bit names, 8 bytes big-endian in keys
CODE = b"sc"  # + account name -> [code hash, abi (JSON text)]
WASM = b"sw"  # + account name -> the module's bytes
CODE_ALLOWED = b"sd"  # + account name -> b"" (chains whose genesis restricts deployment)
ROW = b"sr"  # + contract(8) + scope(8) + table(8) + primary(8) -> payer(8) + row bytes
IDX64 = b"si"  # + contract(8) + scope(8) + table(8) + secondary(8) + primary(8) -> payer(8)
IDX64_BY_PRIMARY = b"sj"  # + contract(8) + scope(8) + table(8) + primary(8) -> secondary(8)
# The other secondary key types, laid out as IDX64 with their own key bytes (chain.vm.tables):
# u128 (16, big-endian), checksum256 (32, as its bytes), double (8, ordered as the numbers).
IDX128 = b"sk"
IDX128_BY_PRIMARY = b"sl"
IDX256 = b"sn"
IDX256_BY_PRIMARY = b"so"
IDX_DOUBLE = b"sf"
IDX_DOUBLE_BY_PRIMARY = b"sg"
RAM = b"sm"  # + account name -> bytes of contract storage it pays for (8, big-endian)
TRACES = (
    b"r"  # + num(8) -> the block's contract traces (chain.core.execution.contracts.encode_traces)
)


def committed(key: bytes) -> bool:
    """Whether the state commitment covers ``key``: every state key (``TX_SEEN`` entries of
    an old store excepted). The de-duplication set enters it as one entry per block, the
    ids the block applied (``TX_BLOCK``), not one per transaction: the commitment then hashes
    no element per transaction for the set, neither when an id joins it nor when it
    expires. Its lookup by id is the transaction index (``StateView.tx_seen``), which a
    snapshot's import fills from those lists (``indexed_ids``)."""
    return not key.startswith(TX_SEEN)


def tx_block_value(applied: list[tuple[int, bytes]]) -> bytes:
    """A block's ``TX_BLOCK`` value: each (expiration, id) it applied, in block order."""
    return b"".join(be(expiration, 4) + tx_id for expiration, tx_id in applied)


def indexed_ids(key: bytes, tx_block: bytes) -> list[tuple[bytes, bytes]]:
    """The transaction index entries (id -> block number) of a ``TX_BLOCK`` entry."""
    if len(key) != len(TX_BLOCK) + 12 or not key.startswith(TX_BLOCK):
        raise EncodingError("block transaction list key", f"{len(key)} bytes")
    if len(tx_block) % TX_BLOCK_ITEM:
        raise EncodingError("block transaction list", f"{len(tx_block)} bytes")
    num = key[-8:]
    return [
        (TX_INDEX + tx_block[at + 4 : at + TX_BLOCK_ITEM], num)
        for at in range(0, len(tx_block), TX_BLOCK_ITEM)
    ]


def be(n: int, size: int) -> bytes:
    """``n`` as ``size`` big-endian bytes; EncodingError if it does not fit (a number from
    outside, such as a block number asked for over the RPC, is never an OverflowError)."""
    if not 0 <= n < 1 << (8 * size):
        raise EncodingError(f"{size}-byte key number", "out of range")  # n may be huge
    return n.to_bytes(size, "big")


def block_key(block_id: BlockId) -> bytes:
    return BLOCK + block_id


def block_num_key(num: BlockNum | int) -> bytes:
    return BLOCK_NUM + be(num, 8)


def header_state_key(block_id: BlockId) -> bytes:
    return HEADER_STATE + block_id


def undo_key(num: BlockNum | int) -> bytes:
    return UNDO + be(num, 8)


def tx_index_key(tx_id: TxId) -> bytes:
    return TX_INDEX + tx_id


def evidence_key(producer: str, slot: int, block_id: BlockId) -> bytes:
    return EVIDENCE + producer.encode() + b"/" + be(slot, 8) + block_id


def vote_evidence_key(key: bytes, slot: int) -> bytes:
    return VOTE_EVIDENCE + key + be(slot, 8)


def account_key(name: str) -> bytes:
    return ACCOUNT + name.encode()


def producer_key(name: str) -> bytes:
    return PRODUCER + name.encode()


def tx_block_key(last_expiration: int, num: BlockNum | int) -> bytes:
    """Ordered by the latest expiration of the block's transactions: the block's list is
    dropped once all of them have expired."""
    return TX_BLOCK + be(last_expiration, 4) + be(num, 8)


def block_summary_key(num: int) -> bytes:
    return BLOCK_SUMMARY + be(num & 0xFFFF, 2)


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix``."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


def code_key(name: str) -> bytes:
    return CODE + name.encode()


def wasm_key(name: str) -> bytes:
    return WASM + name.encode()


def code_allowed_key(name: str) -> bytes:
    return CODE_ALLOWED + name.encode()


def ram_key(name: str) -> bytes:
    return RAM + name.encode()


def table_prefix(contract: int, scope: int, table: int) -> bytes:
    """The prefix of every row of one table in one scope (names as 64-bit numbers)."""
    return ROW + be(contract, 8) + be(scope, 8) + be(table, 8)


def row_key(contract: int, scope: int, table: int, primary: int) -> bytes:
    return table_prefix(contract, scope, table) + be(primary, 8)


def idx64_prefix(contract: int, scope: int, table: int) -> bytes:
    return IDX64 + be(contract, 8) + be(scope, 8) + be(table, 8)


def idx64_key(contract: int, scope: int, table: int, secondary: int, primary: int) -> bytes:
    return idx64_prefix(contract, scope, table) + be(secondary, 8) + be(primary, 8)


def idx64_primary_key(contract: int, scope: int, table: int, primary: int) -> bytes:
    return IDX64_BY_PRIMARY + be(contract, 8) + be(scope, 8) + be(table, 8) + be(primary, 8)


def index_prefix(kind: bytes, contract: int, scope: int, table: int) -> bytes:
    """The prefix of one secondary index's entries, ``kind`` one of IDX64, IDX128, IDX256,
    IDX_DOUBLE (or their BY_PRIMARY twins): then the key bytes and the primary (8)."""
    return kind + be(contract, 8) + be(scope, 8) + be(table, 8)


def traces_key(num: BlockNum | int) -> bytes:
    return TRACES + be(num, 8)
