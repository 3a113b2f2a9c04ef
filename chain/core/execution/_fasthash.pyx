# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled core's state commitment (``state_hash``'s ``moved`` and ``_sum``): the same
elements, hashed by the same blake3-py hasher, summed into the lanes in C, each straight out
of the digest's bytes (no batch buffer, no numpy call), with the same memo of elements put in.

The lanes are 1,024 ``uint16_t``, and an element's 2,048 bytes are 1,024 little-endian lanes;
the loops below (C) are written so that gcc vectorizes them at -O3 (wrapping adds modulo
2^16, as numpy's). The GIL is held throughout: every element is one call into blake3-py, and
summing an element takes less time than releasing the GIL and taking it again (releasing it
for each sum measured the same, within the machine's noise).

It also lists a block's changes, the entries the commitment hashes (``StateView.changes``):
an account's or producer's record is written straight into bytes as msgpack's packer writes
it (what ``Account.encode`` and ``Producer.encode`` give), and any field of another kind or
size (a negative or a float, a str subclass, a record past 1 KiB) leaves the record to
``pack`` itself.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize
from cpython.bytes cimport PyBytes_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from cpython.dict cimport PyDict_Next
from cpython.ref cimport PyObject
from libc.stdint cimport uint8_t, uint16_t
from libc.string cimport memcpy

from chain.core.execution.state import Account, Producer
from chain.core.primitives.encoding import pack

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* Lane i of an element (2,048 bytes, 1,024 little-endian lanes): a plain load on a
       little-endian machine, so that gcc makes each loop below a few vector loads and adds
       (SSE2 at -O3 without -march) rather than byte shuffles. */
    static inline uint16_t bor_lane(const unsigned char *element, size_t i) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        uint16_t lane;
        memcpy(&lane, element + 2 * i, 2);
        return lane;
    #else
        return (uint16_t)(element[2 * i] | (element[2 * i + 1] << 8));
    #endif
    }
    /* Add or subtract an element, lane by lane, modulo 2^16. */
    static void bor_add(uint16_t *restrict lanes, const unsigned char *restrict element) {
        for (size_t i = 0; i < 1024; i++) lanes[i] = (uint16_t)(lanes[i] + bor_lane(element, i));
    }
    static void bor_subtract(uint16_t *restrict lanes, const unsigned char *restrict element) {
        for (size_t i = 0; i < 1024; i++) lanes[i] = (uint16_t)(lanes[i] - bor_lane(element, i));
    }
    /* Ask for an element's cache lines ahead of its sum (a memo's element is read cold). */
    static void bor_prefetch(const unsigned char *element) {
    #if defined(__GNUC__)
        for (size_t i = 0; i < 2048; i += 64) __builtin_prefetch(element + i);
    #else
        (void)element;
    #endif
    }
    """
    void _add "bor_add"(uint16_t* lanes, const uint8_t* element) noexcept nogil
    void _subtract "bor_subtract"(uint16_t* lanes, const uint8_t* element) noexcept nogil
    void _prefetch "bor_prefetch"(const uint8_t* element) noexcept nogil

cdef enum:
    LANES = 1024
    SIZE = 2 * LANES

cdef object _SIZE = SIZE


cdef bytes _entry(object key, object value):
    """The element's input: the key's length (4 bytes, big-endian), the key, the value."""
    cdef Py_ssize_t length, size
    cdef bytes entry
    cdef char* out
    if not (PyBytes_CheckExact(key) and PyBytes_CheckExact(value)):
        return (len(key)).to_bytes(4, "big") + key + value  # what the reference does
    length = PyBytes_GET_SIZE(key)
    if length > 0xFFFFFFFF:
        raise OverflowError("int too big to convert")
    size = PyBytes_GET_SIZE(value)
    entry = PyBytes_FromStringAndSize(NULL, 4 + length + size)
    out = PyBytes_AS_STRING(entry)
    out[0] = <char>((length >> 24) & 0xFF)
    out[1] = <char>((length >> 16) & 0xFF)
    out[2] = <char>((length >> 8) & 0xFF)
    out[3] = <char>(length & 0xFF)
    memcpy(out + 4, PyBytes_AS_STRING(key), length)
    memcpy(out + 4 + length, PyBytes_AS_STRING(value), size)
    return entry


cdef const uint8_t* _lanes_of(object element) except NULL:
    if not PyBytes_CheckExact(element) or PyBytes_GET_SIZE(element) != SIZE:
        raise ValueError("an element is not 2,048 bytes")
    return <const uint8_t*>PyBytes_AS_STRING(element)


def sum_into(uint16_t[::1] lanes, entries, hasher):
    """Add the element of every ``(key, value)`` of ``entries`` to ``lanes`` (1,024)."""
    if lanes.shape[0] != LANES:
        raise ValueError("not 1,024 lanes")
    cdef uint16_t* acc = &lanes[0]
    reset, update, digest = hasher.reset, hasher.update, hasher.digest
    for key, value in entries:
        entry = _entry(key, value)
        reset()
        update(entry)
        _add(acc, _lanes_of(digest(_SIZE)))


def move(uint16_t[::1] lanes, changes, before, hasher, dict memo, Py_ssize_t bound):
    """``StateHash.moved`` on ``lanes`` (1,024, changed in place): for each ``(key, value)``
    of ``changes`` with ``before[key]`` another value, the old entry's element taken out
    (from ``memo`` when there, and dropped from it), the new one's put in and kept in
    ``memo``; then the oldest of ``memo`` dropped down to ``bound``."""
    if lanes.shape[0] != LANES:
        raise ValueError("not 1,024 lanes")
    cdef uint16_t* acc = &lanes[0]
    reset, update, digest = hasher.reset, hasher.update, hasher.digest
    for key, value in changes:
        old = before[key]
        if old == value:
            continue
        taken = None
        if old is not None:
            entry = _entry(key, old)
            taken = memo.pop(entry, None)
            if taken is None:
                reset()
                update(entry)
                taken = digest(_SIZE)
            else:  # read cold: fetched while the new entry is hashed, summed after it
                _prefetch(_lanes_of(taken))
        if value is not None:
            entry = _entry(key, value)
            reset()
            update(entry)
            element = digest(_SIZE)
            memo[entry] = element
            _add(acc, _lanes_of(element))
        if taken is not None:
            _subtract(acc, _lanes_of(taken))
    _trim(memo, bound)


cdef void _trim(dict memo, Py_ssize_t bound) except *:
    """Drop the oldest entries of ``memo`` (insertion order) until it holds ``bound``."""
    cdef Py_ssize_t excess = len(memo) - bound, pos = 0
    cdef PyObject* key
    cdef PyObject* value
    if excess <= 0:
        return
    oldest = []
    while excess > 0 and PyDict_Next(memo, &pos, &key, &value):
        oldest.append(<object>key)
        excess -= 1
    for entry in oldest:
        del memo[entry]


# --- the changes it hashes: ``StateView.changes`` with accounts and producers encoded in C --

cdef object _pack = pack
cdef object _Account = Account
cdef object _Producer = Producer

cdef enum:
    ROOM = 1024  # a record that does not fit is left to msgpack


cdef Py_ssize_t _put(char* out, Py_ssize_t at, object o, int depth) except -2:
    """Write ``o`` at ``out[at:]`` as msgpack's ``Packer(use_bin_type=True)`` does; the new
    end, or -1 when ``o`` is of a kind left to msgpack itself (or does not fit)."""
    cdef Py_ssize_t n, i
    cdef unsigned long long u
    cdef const char* data
    cdef int head
    if at + 9 > ROOM or depth > 4:
        return -1
    if o is True or o is False:
        out[at] = <char>(0xC3 if o is True else 0xC2)
        return at + 1
    if type(o) is int:
        if o < 0 or o > 0xFFFFFFFFFFFFFFFF:
            return -1
        u = o
        if u < 0x80:
            out[at] = <char>u
            return at + 1
        if u < 0x100:
            head, n = 0xCC, 1
        elif u < 0x10000:
            head, n = 0xCD, 2
        elif u < 0x100000000:
            head, n = 0xCE, 4
        else:
            head, n = 0xCF, 8
        out[at] = <char>head
        for i in range(n):
            out[at + n - i] = <char>((u >> (8 * i)) & 0xFF)
        return at + 1 + n
    if type(o) is str:
        data = PyUnicode_AsUTF8AndSize(o, &n)
        if n < 32:
            out[at] = <char>(0xA0 | n)
            at += 1
        else:
            at = _length(out, at, n, 0xD9, 0xDA)
        return -1 if at < 0 else _copy(out, at, data, n)
    if type(o) is bytes:
        n = PyBytes_GET_SIZE(o)
        at = _length(out, at, n, 0xC4, 0xC5)
        return -1 if at < 0 else _copy(out, at, PyBytes_AS_STRING(o), n)
    if type(o) is tuple or type(o) is _Account or type(o) is _Producer:
        n = PyTuple_GET_SIZE(o)
        if n < 16:
            out[at] = <char>(0x90 | n)
            at += 1
        elif n < 0x10000:
            out[at] = <char>0xDC
            out[at + 1] = <char>(n >> 8)
            out[at + 2] = <char>(n & 0xFF)
            at += 3
        else:
            return -1
        for i in range(n):
            at = _put(out, at, <object>PyTuple_GET_ITEM(o, i), depth + 1)
            if at < 0:
                return -1
        return at
    return -1


cdef inline Py_ssize_t _length(char* out, Py_ssize_t at, Py_ssize_t n, int h8, int h16):
    """A str or bin header of length ``n`` (8 or 16 bits), as msgpack writes it; -1 for a
    length of 32 bits (never in the buffer)."""
    if n < 0x100:
        out[at] = <char>h8
        out[at + 1] = <char>n
        return at + 2
    if n < 0x10000:
        out[at] = <char>h16
        out[at + 1] = <char>(n >> 8)
        out[at + 2] = <char>(n & 0xFF)
        return at + 3
    return -1


cdef inline Py_ssize_t _copy(char* out, Py_ssize_t at, const char* data, Py_ssize_t n):
    if at + n > ROOM:
        return -1
    memcpy(out + at, data, n)
    return at + n


cdef object _encode(object record):
    """An account's or producer's record, as ``pack`` gives it."""
    cdef char out[ROOM]
    cdef Py_ssize_t end
    try:
        end = _put(out, 0, record, 0)
    except Exception:  # msgpack raises its own (a str that is not UTF-8)
        end = -1
    if end < 0:
        return _pack(record)
    return PyBytes_FromStringAndSize(out, end)


def changes(view):
    """``view.changes()``: every write, encoded, in key order (accounts and producers here,
    anything else by its own ``encode``)."""
    cdef dict writes = view._writes
    cdef list out = []
    for key in sorted(writes):
        value = writes[key]
        if value is None or isinstance(value, bytes):
            out.append((key, value))
        elif type(value) is _Account or type(value) is _Producer:
            out.append((key, _encode(value)))
        else:
            out.append((key, value.encode()))
    return out
