# cython: language_level=3, boundscheck=False, wraparound=False
"""Key recovery of a batch of signatures in one call to libsecp256k1 that releases the GIL
once, where ``crypto.recover_many`` releases it around each signature (coincurve's binding
does): a thread that recovers beside a busy event loop waits for the GIL again after every
signature, up to the interpreter's switch interval each time.

The same library coincurve loaded (its function pointers and context, from
``crypto.secp256k1_pointers``) and the same checks as ``crypto.recover``, in its order:
sizes, recovery id, low s, then the library's parse, recover and serialize.
"""

from libc.stdint cimport uintptr_t
from libc.string cimport memcmp, memcpy

from chain.core.primitives.crypto import LOW_S_MAX, PUBLIC_KEY_SIZE, SIGNATURE_SIZE

ctypedef int (*ParseFn)(
    const void *ctx, unsigned char *sig, const unsigned char *input64, int recid
) noexcept nogil
ctypedef int (*RecoverFn)(
    const void *ctx, unsigned char *pubkey, const unsigned char *sig, const unsigned char *msg32
) noexcept nogil
ctypedef int (*SerializeFn)(
    const void *ctx, unsigned char *out, size_t *outlen, const unsigned char *pubkey,
    unsigned int flags
) noexcept nogil

cdef Py_ssize_t _SIG = SIGNATURE_SIZE
cdef Py_ssize_t _KEY = PUBLIC_KEY_SIZE
cdef bytes _HALF = LOW_S_MAX
cdef Py_ssize_t _ITEM = SIGNATURE_SIZE + 32


cdef class BatchRecovery:
    """``recover_many`` through the library at the given addresses; ``keep`` holds what
    owns them (coincurve's context) for as long as this lives. A pair that is not two
    ``bytes`` goes to ``reference`` (``crypto.recover_many``)."""

    cdef const void *ctx
    cdef ParseFn parse
    cdef RecoverFn recover
    cdef SerializeFn serialize
    cdef unsigned int flags
    cdef object keep
    cdef object reference

    def __init__(
        self,
        uintptr_t ctx,
        uintptr_t parse,
        uintptr_t recover,
        uintptr_t serialize,
        unsigned int flags,
        object keep,
        object reference,
    ):
        self.ctx = <const void *>ctx
        self.parse = <ParseFn>parse
        self.recover = <RecoverFn>recover
        self.serialize = <SerializeFn>serialize
        self.flags = flags
        self.keep = keep
        self.reference = reference

    def __call__(self, list items):
        """The compressed key of each (signature, digest) pair, or None where the pair is
        not a valid low-s signature of a 32-byte digest."""
        cdef Py_ssize_t n = len(items), i
        cdef bytearray given = bytearray(n * _ITEM)
        cdef bytearray keys = bytearray(n * _KEY)
        cdef bytearray ok = bytearray(n)
        cdef unsigned char *src = given
        cdef unsigned char *dst = keys
        cdef unsigned char *good = ok
        cdef const unsigned char *half = _HALF
        cdef dict odd = {}  # index -> the reference's answer
        cdef object sig, digest
        for i in range(n):
            sig, digest = items[i]
            if type(sig) is not bytes or type(digest) is not bytes:
                odd[i] = self.reference([items[i]])[0]
            elif len(<bytes>sig) == _SIG and len(<bytes>digest) == 32:
                memcpy(src + i * _ITEM, <const unsigned char *>(<bytes>sig), _SIG)
                memcpy(src + i * _ITEM + _SIG, <const unsigned char *>(<bytes>digest), 32)
                good[i] = 1
        cdef unsigned char rsig[65]
        cdef unsigned char pub[64]
        cdef size_t size
        cdef const unsigned char *item
        with nogil:
            for i in range(n):
                if not good[i]:
                    continue
                item = src + i * _ITEM
                good[i] = 0
                if item[64] > 3 or memcmp(item + 32, half, 32) > 0:
                    continue
                if not self.parse(self.ctx, rsig, item, item[64]):
                    continue
                if not self.recover(self.ctx, pub, rsig, item + 65):
                    continue
                size = _KEY
                self.serialize(self.ctx, dst + i * _KEY, &size, pub, self.flags)
                good[i] = size == <size_t>_KEY
        out = [
            bytes(keys[i * _KEY : (i + 1) * _KEY]) if good[i] else None for i in range(n)
        ]
        for i, key in odd.items():
            out[i] = key
        return out
