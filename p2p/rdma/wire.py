"""The RDMA channel's wire format: immediates, the endpoint exchanged to connect, sizes.


On the wire
-----------
Each side owns a receive ring of ``slots`` slots of ``slot_size`` bytes in its registered
pool, and tells the peer its address and rkey when the queue pairs are connected. A message
is the same frame as on TCP (u32 length, u8 type, payload: ``p2p.wire.codec``), cut into chunks of
at most ``slot_size`` bytes; chunk k of the stream goes into slot k mod ``slots`` of the
peer's ring, written from the same slot of our staging area. Every write carries a 32-bit
immediate (network byte order on the wire), which is all the receiver learns besides the
byte count:

    bits 31..28  op    1 DATA  (a chunk; more of this frame follows)
                       2 END   (the last chunk of a frame)
                       3 CREDIT (zero-length; the peer freed ``arg`` slots of its ring)
                       4 CLOSE (zero-length; the peer closed the channel)
                       5 LAND  (a whole block or snapshot chunk frame written into our
                                landing zone)
                       6 LAND_CREDIT (zero-length; the peer freed ``arg`` KiB of its zone)
    bits 15..0   arg   DATA/END: the slot written (checked against the one expected);
                       CREDIT: slots freed; LAND: the KiB offset in the zone where the
                       frame starts; LAND_CREDIT: KiB freed

Block ranges skip the ring: a sync_request sent over RDMA names the requester's landing
zone (address, rkey, size in KiB; ``RdmaSyncRequest``), and the server writes each block
of the range there whole, contiguously, wrapping to the zone's start when the tail is too
short (the receiver sees the skip from the offset). Snapshot chunks of state sync do the
same: a snapshot_chunk_request sent over RDMA names the zone too (``RdmaChunkRequest``), and
the chunk's frame is written there. Zone space is credited back when ``recv`` takes the
frame. A frame larger than the zone goes through the ring.

Flow control is by credits: a sender starts with ``slots`` credits, spends one per chunk and
waits at zero. The receiver copies each chunk out of its ring as it arrives and credits the
slot back at once — except a frame's last slot, credited only when ``recv`` hands the frame
out, so a peer that does not read stops the sender after ``slots`` frames, as the Channel
contract asks, and a frame larger than the ring still gets through. Credits are returned in
batches (a quarter of the ring, or whenever nothing more is waiting). Several writes are
in flight at once (the paper's design waited for an ACK per block). A staging slot is reused
only once its write has completed locally.

Anything else — an unknown op, a chunk in the wrong slot, an oversized or undecodable frame —
is a malformed stream: ``recv`` raises ``MalformedMessage`` and the channel closes. An error
completion breaks the channel (``ChannelBroken``); the transport then backs off to TCP.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from p2p.errors import MalformedMessage
from p2p.wire.codec import HEADER_SIZE

OP_DATA, OP_END, OP_CREDIT, OP_CLOSE, OP_LAND, OP_LAND_CREDIT = 1, 2, 3, 4, 5, 6
OPS = (OP_DATA, OP_END, OP_CREDIT, OP_CLOSE, OP_LAND, OP_LAND_CREDIT)
LAND_UNIT = 1024  # landing-zone offsets and credits count in KiB
LAND_WR_ID = 1 << 20  # work request ids of landing writes start here (ring writes: slots)


# Endpoint fields other than the GID, and their bounds: QP numbers and PSNs are 24 bits; the
# MTU is the verbs enum (1 = 256 bytes ... 5 = 4096).
_ENDPOINT_INTS = ("qp_num", "psn", "mtu", "ring_addr", "rkey", "slots", "slot_size")
_BOUNDS = (
    (0, 2**24 - 1),
    (0, 2**24 - 1),
    (1, 5),
    (0, 2**64 - 1),
    (0, 2**32 - 1),
    (1, 0xFFFF),
    (HEADER_SIZE, 2**32 - 1),
)
_GID = re.compile(r"[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7}")  # pyverbs' notation


def immediate(op: int, arg: int) -> int:
    return (op << 28) | (arg & 0xFFFF)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """What one side tells the other to connect (exchanged over the TCP channel)."""

    qp_num: int
    psn: int
    gid: str
    mtu: int
    ring_addr: int
    rkey: int
    slots: int
    slot_size: int

    def to_wire(self) -> tuple[int | str, ...]:
        return (
            self.qp_num,
            self.psn,
            self.gid,
            self.mtu,
            self.ring_addr,
            self.rkey,
            self.slots,
            self.slot_size,
        )

    @classmethod
    def from_wire(cls, r: tuple[Any, ...]) -> Endpoint:
        """The peer's endpoint from its rdma_setup, every field in the range verbs accept:
        ``connect`` hands them to pyverbs, which raises foreign errors (OverflowError,
        ValueError) on anything else."""
        if len(r) != 8:
            raise MalformedMessage("bad RDMA endpoint: expected 8 fields")
        for name, value, (lo, hi) in zip(_ENDPOINT_INTS, (*r[:2], *r[3:]), _BOUNDS, strict=True):
            if type(value) is not int or not lo <= value <= hi:
                raise MalformedMessage(f"bad RDMA endpoint: {name} not in [{lo}, {hi}]")
        if type(r[2]) is not str or _GID.fullmatch(r[2]) is None:
            raise MalformedMessage("bad RDMA endpoint: gid")
        return cls(*r)
