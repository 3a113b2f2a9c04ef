# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled core's transaction decoder: a block's signed transactions, each read straight
from its canonical msgpack when it is a single transfer, without the generic unpacker.

It decodes only what it can prove is canonical and valid: every value in msgpack's shortest
form (what ``pack`` writes), names that match the account-name rule, an amount and a memo in
bounds, nothing after the last field. Any other transaction, well formed or not, goes to the
reference (``signed_transaction_from_wire``), which decodes it or raises its own error; so
what a block decodes to, or why it is refused, is the reference's.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport uint8_t, uint64_t

from chain.core.execution.actions import MAX_MEMO, Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction
from chain.core.primitives.crypto import SIGNATURE_SIZE
from chain.core.primitives.types import MAX_AMOUNT

import hashlib


cdef extern from "Python.h":
    int PyObject_GenericSetAttr(object o, object name, object value) except -1
    object PyUnicode_DecodeASCII(const char *s, Py_ssize_t size, const char *errors)


cdef object _Transfer = Transfer
cdef object _Transaction = Transaction
cdef object _Signed = SignedTransaction
cdef object _new = object.__new__
cdef object _sha256 = hashlib.sha256
cdef Py_ssize_t _SIG = SIGNATURE_SIZE
cdef Py_ssize_t _MAX_MEMO = MAX_MEMO
cdef uint64_t _MAX_AMOUNT = MAX_AMOUNT
cdef uint64_t _U32 = 0xFFFFFFFF
# The fields' names, interned once: set on each object as its dataclass __init__ would.
cdef str F_SENDER = "sender", F_RECIPIENT = "recipient", F_AMOUNT = "amount", F_MEMO = "memo"
cdef str F_EXPIRATION = "expiration", F_REF_NUM = "ref_block_num"
cdef str F_REF_PREFIX = "ref_block_prefix", F_ACTIONS = "actions"
cdef str F_TX = "tx", F_PACKED = "packed", F_SIGNATURES = "signatures", F_ID = "id"

cdef enum:
    TRANSFER_CODE = 1


cdef struct Cursor:
    const uint8_t *p
    const uint8_t *end


cdef inline bint _number(const uint8_t *p, Py_ssize_t left, int size, uint64_t least,
                         uint64_t *out):
    """The ``size``-byte big-endian number after the tag at ``p``, if the bytes are there and
    it is at least ``least`` (else a shorter form would have held it: not msgpack's)."""
    cdef uint64_t v = 0
    cdef int i
    if left < 1 + size:
        return False
    for i in range(1, size + 1):
        v = (v << 8) | p[i]
    if v < least:
        return False
    out[0] = v
    return True


cdef inline bint _uint(Cursor *c, uint64_t *out):
    """A non-negative integer in msgpack's shortest form (positive fixint, uint8 from 128,
    uint16 from 256, uint32 from 65,536, uint64 from 2^32); False for anything else."""
    cdef const uint8_t *p = c.p
    cdef Py_ssize_t left = c.end - p
    cdef int size
    cdef uint64_t least
    if left < 1:
        return False
    if p[0] < 0x80:
        out[0] = p[0]
        c.p = p + 1
        return True
    if p[0] == 0xcc:
        size = 1
        least = 0x80
    elif p[0] == 0xcd:
        size = 2
        least = 0x100
    elif p[0] == 0xce:
        size = 4
        least = 0x10000
    elif p[0] == 0xcf:
        size = 8
        least = 0x100000000
    else:
        return False
    if not _number(p, left, size, least, out):
        return False
    c.p = p + 1 + size
    return True


cdef inline Py_ssize_t _str(Cursor *c):
    """The length of a string in msgpack's shortest form (fixstr, str8 from 32 bytes, str16
    from 256), its bytes following at ``c.p``; -1 for anything else. Longer strings than a
    memo's bytes can be go to the reference."""
    cdef const uint8_t *p = c.p
    cdef Py_ssize_t left = c.end - p
    cdef int size = 0
    cdef uint64_t n
    if left < 1:
        return -1
    if 0xa0 <= p[0] <= 0xbf:
        n = p[0] - 0xa0
    elif p[0] == 0xd9:
        size = 1
        if not _number(p, left, size, 32, &n):
            return -1
    elif p[0] == 0xda:
        size = 2
        if not _number(p, left, size, 0x100, &n):
            return -1
    else:
        return -1
    c.p = p + 1 + size
    if c.end - c.p < <Py_ssize_t>n:
        return -1
    return <Py_ssize_t>n


cdef inline object _name(Cursor *c):
    """An account name (``[a-z1-5.]{0,11}[a-z1-5]``) as a str; None if it is not one."""
    cdef Py_ssize_t n = _str(c), i
    cdef const uint8_t *s = c.p
    cdef uint8_t ch
    if n < 1 or n > 12:
        return None
    for i in range(n):
        ch = s[i]
        if not ((b'a' <= ch <= b'z') or (b'1' <= ch <= b'5') or ch == b'.'):
            return None
    if s[n - 1] == b'.':
        return None
    c.p = s + n
    return PyUnicode_DecodeASCII(<const char *>s, n, NULL)


cdef object _transfer_tx(bytes packed):
    """The Transaction that ``decode_transaction(packed)`` gives, when ``packed`` is the
    canonical encoding of a valid one-transfer transaction; None otherwise."""
    cdef Cursor c
    cdef uint64_t expiration, ref_num, ref_prefix, amount
    cdef Py_ssize_t n
    c.p = <const uint8_t *>PyBytes_AS_STRING(packed)
    c.end = c.p + PyBytes_GET_SIZE(packed)
    # [expiration, ref_num, ref_prefix, [[1, sender, recipient, amount, memo]]]
    if c.end - c.p < 1 or c.p[0] != 0x94:
        return None
    c.p += 1
    if not _uint(&c, &expiration) or expiration > _U32:
        return None
    if not _uint(&c, &ref_num) or ref_num > 0xFFFF:
        return None
    if not _uint(&c, &ref_prefix) or ref_prefix > _U32:
        return None
    if c.end - c.p < 3 or c.p[0] != 0x91 or c.p[1] != 0x95 or c.p[2] != TRANSFER_CODE:
        return None
    c.p += 3
    sender = _name(&c)
    if sender is None:
        return None
    recipient = _name(&c)
    if recipient is None:
        return None
    if not _uint(&c, &amount) or amount < 1 or amount > _MAX_AMOUNT:
        return None
    n = _str(&c)
    if n < 0 or c.p + n != c.end:  # the memo ends the transaction
        return None
    try:
        memo = PyUnicode_DecodeUTF8(<const char *>c.p, n, NULL)
    except UnicodeDecodeError:
        return None
    if len(memo) > _MAX_MEMO:
        return None
    action = _new(_Transfer)
    PyObject_GenericSetAttr(action, F_SENDER, sender)
    PyObject_GenericSetAttr(action, F_RECIPIENT, recipient)
    PyObject_GenericSetAttr(action, F_AMOUNT, amount)
    PyObject_GenericSetAttr(action, F_MEMO, memo)
    tx = _new(_Transaction)
    PyObject_GenericSetAttr(tx, F_EXPIRATION, expiration)
    PyObject_GenericSetAttr(tx, F_REF_NUM, ref_num)
    PyObject_GenericSetAttr(tx, F_REF_PREFIX, ref_prefix)
    PyObject_GenericSetAttr(tx, F_ACTIONS, (action,))
    return tx


def decode_transactions(list wire, dict kept, object reference):
    """``tuple([reference(t) for t in wire])``, the one-signature transfers decoded here.
    ``kept`` is the reference's memo of transactions decoded lately, by packed bytes."""
    cdef Py_ssize_t i, n = len(wire)
    cdef list out = [None] * n
    cdef object item, packed, sigs, sig, tx, stx
    for i in range(n):
        item = wire[i]
        if type(item) is list and len(<list>item) == 2:
            packed = (<list>item)[0]
            sigs = (<list>item)[1]
            if (
                type(packed) is bytes
                and type(sigs) is list
                and len(<list>sigs) == 1
                and type((<list>sigs)[0]) is bytes
                and len(<bytes>(<list>sigs)[0]) == _SIG
            ):
                tx = kept.get(packed)
                if tx is None:
                    tx = _transfer_tx(<bytes>packed)
                if tx is not None:
                    stx = _new(_Signed)
                    PyObject_GenericSetAttr(stx, F_TX, tx)
                    PyObject_GenericSetAttr(stx, F_PACKED, packed)
                    PyObject_GenericSetAttr(stx, F_SIGNATURES, ((<list>sigs)[0],))
                    PyObject_GenericSetAttr(stx, F_ID, _sha256(packed).digest())
                    out[i] = stx
                    continue
        out[i] = reference(item)
    return tuple(out)
