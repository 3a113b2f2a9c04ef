# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled core's state commitment (``state_hash``'s ``moved`` and ``_sum``): the same
elements, hashed by the same blake3-py hasher, summed into the lanes in C, each straight out
of the digest's bytes (no batch buffer, no numpy call), with the same memo of elements put in.

The lanes are 1,024 ``uint16_t``, and an element's 2,048 bytes are 1,024 little-endian lanes;
the loops below (C) are written so that gcc vectorizes them at -O3 (wrapping adds modulo
2^16, as numpy's). The GIL is held throughout: every element is one call into blake3-py, and
summing an element takes less time than releasing the GIL and taking it again (releasing it
for each sum measured the same, within the machine's noise).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize
from cpython.bytes cimport PyBytes_GET_SIZE
from cpython.dict cimport PyDict_Next
from cpython.ref cimport PyObject
from libc.stdint cimport uint8_t, uint16_t
from libc.string cimport memcpy

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
    """
    void _add "bor_add"(uint16_t* lanes, const uint8_t* element) noexcept nogil
    void _subtract "bor_subtract"(uint16_t* lanes, const uint8_t* element) noexcept nogil

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
        if old is not None:
            entry = _entry(key, old)
            element = memo.pop(entry, None)
            if element is None:
                reset()
                update(entry)
                element = digest(_SIZE)
            _subtract(acc, _lanes_of(element))
        if value is not None:
            entry = _entry(key, value)
            reset()
            update(entry)
            element = digest(_SIZE)
            memo[entry] = element
            _add(acc, _lanes_of(element))
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
