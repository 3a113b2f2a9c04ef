"""Landing-zone bookkeeping of the RDMA channel, apart from the verbs that move the bytes.

The requester of a block range or a snapshot chunk names a zone of its registered memory; the
server writes each block frame of the range (or the chunk's frame) there whole, contiguously,
skipping the zone's tail when a frame does not fit in it (``p2p.rdma.wire`` has the format).
``ZoneWriter`` is the server's view of the peer's zone (where the next frame goes, how much is
free, which writes are in flight); ``ZoneReader`` is the requester's check that each landed
frame is where it must be.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from p2p.errors import MalformedMessage
from p2p.rdma.wire import LAND_UNIT
from p2p.wire.codec import HEADER_SIZE


def units_of(length: int) -> int:
    return -(-length // LAND_UNIT)


@dataclass(slots=True)
class ZoneWriter:
    """The zone the peer named (address, rkey, size in units), as we fill it."""

    zone: tuple[int, int, int] | None = None
    head: int = 0  # next unit to write
    free: int = 0
    in_flight: dict[int, tuple[int, int]] = field(default_factory=dict)  # wr_id -> at, units

    def name(self, addr: int, rkey: int, units: int, capacity: int) -> None:
        """The peer named its zone. It keeps its fill state across requests (it is the same
        zone each time). A zone larger than our staging area (which mirrors it) is not used:
        the range then goes through the ring."""
        if units > capacity:
            self.zone = None
        elif self.zone is None or self.zone[:2] != (addr, rkey):
            self.zone = (addr, rkey, units)
            self.head = 0
            self.free = units

    def takes(self, length: int) -> bool:
        """Whether a frame of ``length`` bytes goes into the zone (else through the ring)."""
        return self.zone is not None and units_of(length) <= self.zone[2]

    def place(self, units: int) -> tuple[int, int] | None:
        """Where a frame of ``units`` goes now — (unit, units skipped at the tail) — or None
        while the space it needs is not yet credited back or still being written."""
        assert self.zone is not None
        total = self.zone[2]
        skip = total - self.head if self.head + units > total else 0
        at = 0 if skip else self.head
        busy = any(at < u + n and u < at + units for u, n in self.in_flight.values())
        if self.free < skip + units or busy:
            return None
        return at, skip

    def posted(self, wr_id: int, at: int, units: int, skip: int) -> None:
        assert self.zone is not None
        self.in_flight[wr_id] = (at, units)
        self.free -= skip + units
        self.head = (at + units) % self.zone[2]

    def completed(self, wr_id: int) -> None:
        self.in_flight.pop(wr_id, None)

    def credited(self, units: int) -> None:
        self.free += units


@dataclass(slots=True)
class ZoneReader:
    """Our own zone: each landed frame must start where the last ended, or at 0 after a skip."""

    units: int
    max_length: int
    tail: int = 0

    def landed(self, at: int, length: int) -> int:
        """Check a frame of ``length`` bytes landed at unit ``at``; returns the units it frees
        when taken (the skipped tail included). Raises MalformedMessage if out of place."""
        units = units_of(length)
        if not HEADER_SIZE <= length <= self.max_length or at + units > self.units:
            raise MalformedMessage(f"landing write of {length} bytes at unit {at} is out of bounds")
        if at != self.tail and at != 0:
            raise MalformedMessage(f"landing write at unit {at}, expected {self.tail} or 0")
        skipped = self.units - self.tail if at != self.tail else 0
        self.tail = (at + units) % self.units
        return skipped + units
