"""A signature worker process: recovers signer keys for the node at the end of a pipe.

``ParallelRecoverer`` starts each worker as ``python -m chain.signatures.sigworker FD``, FD being
the worker's end of a ``multiprocessing`` pipe, so that a worker imports only what recovery
needs. A ``multiprocessing`` "spawn" child imports its parent's main module first, which for
``bor-node`` is the whole node (aiohttp, structlog, LevelDB, ...): the worker would be slow
to answer its first job, which a node's first block waits for, and several times larger.

The pipe carries fixed-size binary records: a job id (8 bytes) and records of a 65-byte
signature and a 32-byte digest in; the job id and a 33-byte key per record out (zeros for a
signature that does not recover). An empty message, or the node's end closing, stops it.
"""

from __future__ import annotations

import signal
import sys
from multiprocessing.connection import Connection

from chain.core.primitives.crypto import PUBLIC_KEY_SIZE, SIGNATURE_SIZE, recover
from chain.core.primitives.errors import BadSignature

RECORD = SIGNATURE_SIZE + 32
NO_KEY = bytes(PUBLIC_KEY_SIZE)


def serve(conn: Connection) -> None:
    """Answer jobs on ``conn`` until an empty message or the node's end closes."""
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            return
        if not data:
            return
        out = bytearray(data[:8])
        for i in range(8, len(data), RECORD):
            try:
                out += recover(data[i : i + SIGNATURE_SIZE], data[i + SIGNATURE_SIZE : i + RECORD])
            except BadSignature:
                out += NO_KEY
        try:
            conn.send_bytes(bytes(out))
        except OSError:
            return  # the node is gone (killed mid-job): nobody to answer, nothing to report


def main(argv: list[str]) -> int:
    # Ctrl-C in an operator's terminal reaches the whole process group: the node shuts down
    # and closes the pipe, which is what ends a worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    serve(Connection(int(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
