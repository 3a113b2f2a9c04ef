"""The C allocator's hold on freed memory: big buffers are given back to the system when
freed, so that a flood of large answers leaves no memory behind.

glibc serves an allocation of 128 KiB or more with its own ``mmap`` and unmaps it on
``free``, but the first such free raises that threshold to the size freed (up to 32 MiB):
from then on, every block's JSON, every HTTP answer and every transport buffer of a few MB
comes from the heap, and a heap keeps what it frees. Fixing the threshold keeps them
mapped on their own (tests/integration/api/test_http_flood.py measures RSS after a flood).
"""

from __future__ import annotations

import ctypes
import ctypes.util

# mallopt parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Allocations of this size and up are mapped on their own and unmapped when freed: big
# enough that the syscall pair costs nothing beside filling the buffer (a block's JSON is
# 0.1 to 5 MB); fixing it also stops glibc from raising it after each big free.
MMAP_THRESHOLD = 256 << 10
# The heap's free top beyond this goes back to the system at once (glibc's own default,
# kept fixed too, as glibc otherwise doubles it with the mmap threshold).
TRIM_THRESHOLD = 128 << 10


def return_big_buffers() -> bool:
    """Fix glibc's mmap and trim thresholds; False where the C library is not glibc (musl
    and others return big buffers to the system already, or have no ``mallopt``)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt answers 1 on success, 0 for a parameter it does not know.
    return bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


def give_back_free_memory() -> bool:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim``): after a burst
    of work that allocated on several threads (a chain thread decoding blocks for many
    subscribers), the freed memory lies in the middle of the heaps, below what the trim
    threshold can release, and the process would keep holding it. False where there is no
    ``malloc_trim`` (not glibc) or nothing was given back."""
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return bool(trim(0))
