# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled core's transfer pass: a run of a block's one-transfer transactions applied
to the state view with every check of the reference (``transition.apply_transaction``), in
its order.

It never refuses a transaction itself: at the first one that is not a single native transfer,
or that any check would refuse, it stops and says where, and the reference applies (or
refuses, with its own error) that one. Every check comes before the first write and reads
the same keys in the same order as the reference, so what it leaves in the view (writes,
reads for the undo record, marked ids) is what the reference would have left.
"""

from libc.stdint cimport uint64_t

from chain.core.execution.actions import Transfer
from chain.core.execution.state import Account, decode_account
from chain.core.execution.transition import settle
from chain.core.primitives import schema
from chain.core.primitives.types import MAX_AMOUNT

cdef object _Transfer = Transfer
cdef object _Account = Account
cdef object _new = tuple.__new__
cdef object _MAX_AMOUNT = MAX_AMOUNT
cdef bytes _ACCOUNT = schema.ACCOUNT
cdef bytes _TX_INDEX = schema.TX_INDEX
cdef Py_ssize_t _ITEM = schema.TX_BLOCK_ITEM
cdef object _MISSING = object()


cdef object _read(dict writes, dict reads, object cached, object base, bytes key):
    """``StateView._read`` of an account on a root view, written out (a view over a
    ``CachingReader`` asks it first; every read is kept for the undo record)."""
    value = writes.get(key, _MISSING)
    if value is not _MISSING:
        return value
    held = reads.get(key)
    if held is not None:
        return (<tuple>held)[1]
    if cached is not None:
        held = cached(key)
        if held is not None:
            reads[key] = held
            return (<tuple>held)[1]
    raw = base.get(key)
    value = None if raw is None else decode_account(raw)
    reads[key] = (raw, value)
    return value


cdef inline uint64_t _word(const unsigned char *p) noexcept nogil:
    """Eight bytes as a little-endian number, whatever the machine's byte order."""
    cdef uint64_t w = 0
    cdef int k
    for k in range(7, -1, -1):
        w = (w << 8) | p[k]
    return w


cdef inline bint _may_hold(const unsigned char *bits, uint64_t mask, const unsigned char *tx_id) noexcept nogil:
    """``TxFilter.may_hold``: each of the id's four bits is set."""
    cdef uint64_t p
    cdef int j
    for j in range(4):
        p = _word(tx_id + 8 * j) & mask
        if not (bits[p >> 3] & (1 << (p & 7))):
            return False
    return True



def apply_transfers(view, list txs, Py_ssize_t start, ctx, bint check_auth):
    """Apply ``txs[start:]`` (pairs of a signed transaction and its signers' keys) while each
    is one transfer that every rule admits; the index of the first that is not.

    Only on a root view (a block's), whose reads and writes it makes as the view's own
    methods would: a child view is left to the reference whole."""
    cdef Py_ssize_t i = start, n = len(txs)
    if view._parent is not None:
        return start
    cdef object params = ctx.params
    cdef Py_ssize_t max_tx_bytes = params.max_tx_bytes
    cdef object now = ctx.block_time_s
    cdef object latest = now + params.max_tx_lifetime_s
    cdef dict writes = view._writes
    cdef dict reads = view._reads
    cdef set marked = view._marked
    cdef dict tapos = view._tapos
    cdef object cached = view._cached
    cdef object base = view._base
    tapos_matches = view.tapos_matches
    # The store's filter of the de-duplication set's ids (chain.storage.txfilter), if any:
    # an id it does not hold is not in the transaction index as an unexpired one.
    cdef object seen = getattr(base, "tx_filter", None)
    cdef bytearray seen_bits = None if seen is None else seen.bits
    cdef uint64_t seen_mask = 0 if seen is None else seen.mask
    cdef const unsigned char *seen_at = NULL
    if seen_bits is not None and seen_mask < <uint64_t>len(seen_bits) * 8:
        seen_at = seen_bits  # else (a filter not as built) every id is looked up
    cdef tuple pair, actions
    cdef bytes skey, rkey, tx_id
    cdef object stx, keys, tx, a, sender, recipient, amount, s, r, signer, known
    while i < n:
        pair = <tuple>txs[i]
        stx = pair[0]
        keys = pair[1]
        tx = stx.tx
        actions = tx.actions
        if len(actions) != 1:
            break
        a = actions[0]
        if type(a) is not _Transfer:
            break
        # check_limits: a transfer's limit is max_tx_bytes
        if len(<bytes>stx.packed) > max_tx_bytes:
            break
        if tx.expiration < now or tx.expiration > latest:
            break
        # check_tapos, with the view's memo of each reference's answer
        known = tapos.get((tx.ref_block_num, tx.ref_block_prefix))
        if known is None:
            known = tapos_matches(tx.ref_block_num, tx.ref_block_prefix)
        if not known:
            break
        # tx_seen: applied in this block, or in one the transaction index holds
        tx_id = stx.id
        if tx_id in marked:
            break
        if len(tx_id) != 32 or seen_at == NULL or _may_hold(seen_at, seen_mask, tx_id):
            if base.get(_TX_INDEX + tx_id) is not None:
                break
        sender = a.sender
        recipient = a.recipient
        amount = a.amount
        skey = _ACCOUNT + (<str>sender).encode()
        if check_auth:  # authorize: the sender's key signed, and nothing else did
            signer = _read(writes, reads, cached, base, skey)
            if signer is None or signer.key not in keys:
                break
            if len(keys) != 1 or len(stx.signatures) != 1:
                break
        if sender == recipient:
            break
        s = _read(writes, reads, cached, base, skey)
        if s is None:
            break
        if s.unbonding:
            s = settle(s, now)
        rkey = _ACCOUNT + (<str>recipient).encode()
        r = _read(writes, reads, cached, base, rkey)
        if r is None:
            break
        if r.unbonding:
            r = settle(r, now)
        if s.balance < amount:
            break
        if r.balance + amount > _MAX_AMOUNT:
            break
        writes[skey] = _new(
            _Account, (s.name, s.key, s.balance - amount, s.staked, s.unbonding, s.votes)
        )
        writes[rkey] = _new(
            _Account, (r.name, r.key, r.balance + amount, r.staked, r.unbonding, r.votes)
        )
        marked.add(tx_id)
        i += 1
    return i



def filter_add(bytearray bits, uint64_t mask, bytes value):
    """``TxFilter.add_entry``'s bits: those of each whole (expiration, id) item of a
    ``TX_BLOCK`` value."""
    cdef unsigned char *b = bits
    cdef const unsigned char *v = value
    cdef Py_ssize_t at, n = len(value) - len(value) % _ITEM
    cdef uint64_t p
    cdef int j
    if mask >= <uint64_t>(len(bits)) * 8:
        raise ValueError("a mask beyond the bits")
    for at in range(0, n, _ITEM):
        for j in range(4):
            p = _word(v + at + 4 + 8 * j) & mask
            b[p >> 3] |= <unsigned char>(1 << (p & 7))


def filter_may_hold(bytearray bits, uint64_t mask, bytes tx_id):
    """The pass's test of one id (for the tests)."""
    if len(tx_id) != 32 or mask >= <uint64_t>(len(bits)) * 8:
        raise ValueError("an id is 32 bytes, and the mask within the bits")
    return _may_hold(bits, mask, tx_id)
