"""``RdmaChannel``: typed messages over an RC queue pair, by RDMA WRITE WITH IMMEDIATE.

On the wire
-----------
Each side owns a receive ring of ``slots`` slots of ``slot_size`` bytes in its registered
pool, and tells the peer its address and rkey when the queue pairs are connected. A message
is the same frame as on TCP (u32 length, u8 type, payload: ``p2p.codec``), cut into chunks of
at most ``slot_size`` bytes; chunk k of the stream goes into slot k mod ``slots`` of the
peer's ring, written from the same slot of our staging area. Every write carries a 32-bit
immediate (network byte order on the wire), which is all the receiver learns besides the
byte count:

    bits 31..28  op    1 DATA  (a chunk; more of this frame follows)
                       2 END   (the last chunk of a frame)
                       3 CREDIT (zero-length; the peer freed ``arg`` slots of its ring)
                       4 CLOSE (zero-length; the peer closed the channel)
                       5 LAND  (a whole block frame written into our landing zone)
                       6 LAND_CREDIT (zero-length; the peer freed ``arg`` KiB of its zone)
    bits 15..0   arg   DATA/END: the slot written (checked against the one expected);
                       CREDIT: slots freed; LAND: the KiB offset in the zone where the
                       frame starts; LAND_CREDIT: KiB freed

Block ranges skip the ring: a sync_request sent over RDMA names the requester's landing
zone (address, rkey, size in KiB; ``RdmaSyncRequest``), and the server writes each block
of the range there whole, contiguously, wrapping to the zone's start when the tail is too
short (the receiver sees the skip from the offset). Zone space is credited back when
``recv`` takes the block. A block larger than the zone goes through the ring.

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
completion breaks the channel (``ChannelBroken``); the peer manager then falls back to TCP.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import socket
from collections import deque
from dataclasses import dataclass
from typing import Any

from p2p.channel import Channel
from p2p.codec import HEADER_SIZE, MAX_FRAME_SIZE, decode_message, encode_frame, frame_length
from p2p.errors import ChannelBroken, ChannelClosed, MalformedMessage
from p2p.messages import Message, Outbound, RawBlock, RdmaSyncRequest, SyncRequest
from p2p.rdma.device import PORT, Completion, RdmaDevice
from p2p.rdma.verbs import RdmaFailure

OP_DATA, OP_END, OP_CREDIT, OP_CLOSE, OP_LAND, OP_LAND_CREDIT = 1, 2, 3, 4, 5, 6
_OPS = (OP_DATA, OP_END, OP_CREDIT, OP_CLOSE, OP_LAND, OP_LAND_CREDIT)
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


class RdmaChannel(Channel):
    transport = "rdma"

    def __init__(self, device: RdmaDevice, remote: str, max_frame: int = MAX_FRAME_SIZE) -> None:
        super().__init__(remote)
        self.device = device
        self._max_frame = max_frame
        self.slots = device.slots
        self.slot_size = device.slot_size
        self._region = device.take_region()
        base = self._region * device.region_size
        self._ring = base  # offsets into the device pool
        self._staging = base + device.ring_size
        self._landing = base + 2 * device.ring_size
        self._land_staging = base + 3 * device.ring_size
        self.land_units = min(device.ring_size // LAND_UNIT, 0xFFFF)
        try:
            self.qp: Any
            self.qp, self.inline_max = device.create_qp()
        except device.v.Error as err:
            device.give_region(self._region)
            raise RdmaFailure(f"cannot create a queue pair: {err}") from err
        self.psn = random.getrandbits(24)
        self._peer: Endpoint | None = None
        self._credit_wr: Any = None
        # Sending side.
        self._credits = 0
        self._send_slot = 0  # next slot of the peer's ring (and of our staging area)
        self._in_flight: set[int] = set()
        self._send_lock = asyncio.Lock()
        self._can_send = asyncio.Event()
        # Landing writes (we serve a range into the zone the peer named).
        self._land: tuple[int, int, int] | None = None  # the peer's zone: addr, rkey, units
        self._land_head = 0  # next unit to write
        self._land_free = 0
        self._land_in_flight: dict[int, tuple[int, int]] = {}  # wr_id -> (unit, units)
        self._land_seq = 0
        self.landed_bytes = 0  # range bytes written straight into the peer's zone
        # Receiving side.
        self._land_tail = 0  # where the next frame in our zone should start
        self._recv_slot = 0
        self._partial = bytearray()
        self._frames: deque[tuple[bytes, int]] = deque()  # frame, landing units it holds
        self._arrived = asyncio.Event()
        self._unreturned = 0  # slots freed by recv, not yet credited back
        # State and counters.
        self._peer_closed = False
        self._error: Exception | None = None
        self.writes = 0
        self.inline_writes = 0
        self.completions = 0
        device.register(self.qp.qp_num, self._on_completion)

    # --- connecting -------------------------------------------------------------------------

    def endpoint(self) -> Endpoint:
        info = self.device.info
        return Endpoint(
            self.qp.qp_num,
            self.psn,
            info.gid,
            info.mtu,
            self.device.region_address(self._region),
            self.device.pool.rkey,
            self.slots,
            self.slot_size,
        )

    def connect(self, peer: Endpoint) -> None:
        """Bring the queue pair to RTS towards ``peer`` (raises the verbs error)."""
        v, dev = self.device.v, self.device
        if peer.slot_size != self.slot_size or peer.slots != self.slots:
            raise MalformedMessage("peer's ring has another shape")
        attr = v.QPAttr(port_num=PORT)
        attr.pkey_index = 0
        attr.qp_access_flags = dev.access
        attr.path_mtu = min(dev.info.mtu, peer.mtu)
        attr.dest_qp_num = peer.qp_num
        attr.rq_psn = peer.psn
        attr.sq_psn = self.psn
        attr.max_dest_rd_atomic = 1
        attr.max_rd_atomic = 1
        attr.min_rnr_timer = 12
        attr.timeout = 14  # 4.096 us * 2^14 = 67 ms per try
        attr.retry_cnt = 7
        attr.rnr_retry = 7
        route = v.GlobalRoute(
            dgid=v.GID(peer.gid), sgid_index=dev.info.gid_index, hop_limit=64, traffic_class=0
        )
        attr.ah_attr = v.AHAttr(port_num=PORT, is_global=1, gr=route, sl=0)
        try:
            self.qp.to_rts(attr)
        except v.Error as err:
            raise RdmaFailure(f"cannot connect the queue pair to {self._remote}: {err}") from err
        self._peer = peer
        write_imm = v.E.ibv_wr_opcode.IBV_WR_RDMA_WRITE_WITH_IMM
        signaled = v.E.ibv_send_flags.IBV_SEND_SIGNALED
        sge = v.SGE(dev.scratch.buf, 1, dev.scratch.lkey)
        # Control writes are signalled too: unsignalled ones hold send-queue entries until a
        # later signalled one completes, and a side that only returns credits has none.
        self._credit_wr = v.SendWR(
            wr_id=self.slots, opcode=write_imm, num_sge=1, sg=[sge], send_flags=signaled
        )
        self._credit_wr.num_sge = 0
        self._credits = self.slots
        self._can_send.set()

    # --- Channel ----------------------------------------------------------------------------

    async def send(self, message: Outbound) -> None:
        if isinstance(message, SyncRequest) and message.end:
            # Name our landing zone: the peer writes the blocks of this range straight into it.
            message = RdmaSyncRequest(
                message.start,
                message.end,
                self.device.region_address(self._region) + 2 * self.device.ring_size,
                self.device.pool.rkey,
                self.land_units,
            )
        frame = encode_frame(message)
        if isinstance(message, RawBlock) and self._land is not None:
            units = -(-len(frame) // LAND_UNIT)
            if units <= self._land[2]:
                async with self._send_lock:
                    await self._land_frame(frame, units)
                self._sent += len(frame)
                return
        await self.send_frame(frame)

    async def _land_frame(self, frame: bytes, units: int) -> None:
        """Write a block frame into the peer's landing zone, contiguously (skipping the zone's
        tail when it does not fit there), as one RDMA WRITE WITH IMMEDIATE."""
        assert self._land is not None and self._peer is not None
        addr, rkey, total = self._land
        while True:
            self._check_open()
            start = self._land_head
            skip = total - start if start + units > total else 0
            at = 0 if skip else start
            busy = any(at < u + n and u < at + units for u, n in self._land_in_flight.values())
            if self._land_free >= skip + units and not busy:
                break
            self._can_send.clear()
            await self._can_send.wait()
        v, pool = self.device.v, self.device.pool
        local = self._land_staging + at * LAND_UNIT
        self.device.view[local : local + len(frame)] = frame
        self._land_seq += 1
        wr_id = LAND_WR_ID + self._land_seq
        wr = v.SendWR(
            wr_id=wr_id,
            opcode=v.E.ibv_wr_opcode.IBV_WR_RDMA_WRITE_WITH_IMM,
            num_sge=1,
            sg=[v.SGE(pool.buf + local, len(frame), pool.lkey)],
            send_flags=v.E.ibv_send_flags.IBV_SEND_SIGNALED,
        )
        wr.imm_data = socket.htonl(immediate(OP_LAND, at))
        wr.set_wr_rdma(rkey, addr + at * LAND_UNIT)
        if self.qp is None:
            raise ChannelClosed(f"channel to {self._remote} is closed")
        try:
            self.qp.post_send(wr)
        except v.Error as err:
            self._fail(ChannelBroken(f"post to {self._remote} failed: {err}"))
            raise self._error from err  # type: ignore[misc]
        self._land_in_flight[wr_id] = (at, units)
        self._land_free -= skip + units
        self._land_head = (at + units) % total
        self.writes += 1
        self.landed_bytes += len(frame)

    async def send_frame(self, frame: bytes) -> None:
        """Write one encoded frame into the peer's ring (also the tests' raw side door)."""
        async with self._send_lock:
            for start in range(0, max(len(frame), 1), self.slot_size):
                chunk = frame[start : start + self.slot_size]
                last = start + self.slot_size >= len(frame)
                await self._write_chunk(chunk, OP_END if last else OP_DATA)
        self._sent += len(frame)

    async def _write_chunk(self, chunk: bytes, op: int) -> None:
        slot = self._send_slot
        while True:
            self._check_open()
            if self._credits > 0 and slot not in self._in_flight:
                break
            self._can_send.clear()
            await self._can_send.wait()
        assert self._peer is not None
        offset = self._staging + slot * self.slot_size
        self.device.view[offset : offset + len(chunk)] = chunk
        # A work request copies its SGE when built, so each chunk gets its own (~3 us).
        v, pool = self.device.v, self.device.pool
        flags = v.E.ibv_send_flags.IBV_SEND_SIGNALED
        if len(chunk) <= self.inline_max:
            flags |= v.E.ibv_send_flags.IBV_SEND_INLINE
            self.inline_writes += 1
        wr = v.SendWR(
            wr_id=slot,
            opcode=v.E.ibv_wr_opcode.IBV_WR_RDMA_WRITE_WITH_IMM,
            num_sge=1,
            sg=[v.SGE(pool.buf + offset, len(chunk), pool.lkey)],
            send_flags=flags,
        )
        wr.imm_data = socket.htonl(immediate(op, slot))
        wr.set_wr_rdma(self._peer.rkey, self._peer.ring_addr + slot * self.slot_size)
        if self.qp is None:
            raise ChannelClosed(f"channel to {self._remote} is closed")
        try:
            self.qp.post_send(wr)
        except v.Error as err:
            self._fail(ChannelBroken(f"post to {self._remote} failed: {err}"))
            raise self._error from err  # type: ignore[misc]
        self._credits -= 1
        self._in_flight.add(slot)
        self._send_slot = (slot + 1) % self.slots
        self.writes += 1

    def _post_control(self, op: int, arg: int) -> None:
        if self._peer is None or self._error is not None or self.qp is None:
            return
        wr = self._credit_wr
        wr.imm_data = socket.htonl(immediate(op, arg))
        wr.set_wr_rdma(self._peer.rkey, self._peer.ring_addr)
        try:
            self.qp.post_send(wr)
        except self.device.v.Error as err:
            self._fail(ChannelBroken(f"post to {self._remote} failed: {err}"))
            return
        self.writes += 1

    async def recv(self) -> Message:
        while not self._frames:
            if self._error is not None:
                if not self._closed:
                    await self.close()
                raise self._error
            if self._closed or self._peer_closed:
                raise ChannelClosed(f"channel to {self._remote} is closed")
            self._arrived.clear()
            await self._arrived.wait()
        frame, land_units = self._frames.popleft()
        if land_units:
            self._post_control(OP_LAND_CREDIT, land_units)
        else:
            self._credit_back(force=not self._frames)
        try:
            if len(frame) < HEADER_SIZE:
                raise MalformedMessage("frame shorter than its header")
            kind, length = frame_length(frame[:HEADER_SIZE], self._max_frame)
            if length != len(frame) - HEADER_SIZE:
                raise MalformedMessage("frame length does not match the bytes written")
            message = decode_message(kind, frame[HEADER_SIZE:])
            if isinstance(message, RdmaSyncRequest):
                message = self._named_zone(message)
        except MalformedMessage as err:
            self._fail(err)
            await self.close()
            raise
        self._received += len(frame)
        return message

    def _named_zone(self, request: RdmaSyncRequest) -> SyncRequest:
        """The peer named its landing zone for a range: write the range's blocks there. The
        zone keeps its fill state across requests (it is the same zone each time)."""
        zone = (request.addr, request.rkey, request.units)
        if request.units > self.land_units:
            # Our staging area mirrors the zone: a larger one would overrun it. Use the ring.
            self._land = None
        elif self._land is None or self._land[:2] != zone[:2]:
            self._land = zone
            self._land_head = 0
            self._land_free = request.units
        return SyncRequest(request.start, request.end)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._error is None:
            self._post_control(OP_CLOSE, 0)
            await asyncio.sleep(0.05)  # let the close write leave before the QP goes
        self._release()

    def abort(self) -> None:
        """Drop the queue pair without a word to the peer, as a crash would (its writes then
        fail and its channel breaks). Used when the connection is beyond saving, and by tests."""
        self._closed = True
        self._fail(ChannelBroken(f"channel to {self._remote} aborted"))
        self._release()

    def _release(self) -> None:
        self._can_send.set()
        self._arrived.set()
        if self.qp is None:
            return
        qp, self.qp = self.qp, None  # pyverbs does not guard a closed QP: never touch it again
        self.device.unregister(qp.qp_num)
        with contextlib.suppress(Exception):
            qp.close()
        self.device.give_region(self._region)

    # --- completions (on the event loop, in the order the CQ gave them) ----------------------

    def _on_completion(self, wc: Completion) -> None:
        self.completions += 1
        if wc.status != 0:
            self._fail(
                ChannelBroken(
                    f"RDMA completion error {wc.status} (vendor {wc.vendor_err}) "
                    f"with {self._remote}"
                )
            )
            return
        if wc.opcode == self.device.v.E.ibv_wc_opcode.IBV_WC_RDMA_WRITE:
            if wc.wr_id >= LAND_WR_ID:
                self._land_in_flight.pop(wc.wr_id, None)
            else:
                self._in_flight.discard(wc.wr_id)
            self._can_send.set()
            return
        op, arg = wc.imm >> 28, wc.imm & 0xFFFF
        if op not in _OPS or (wc.imm >> 16) & 0xFFF:
            self._malformed(f"unknown immediate {wc.imm:#010x}")
        elif op == OP_CREDIT:
            self._credits += arg
            self._can_send.set()
        elif op == OP_CLOSE:
            self._peer_closed = True
            self._can_send.set()
            self._arrived.set()
        elif op == OP_LAND_CREDIT:
            self._land_free += arg
            self._can_send.set()
        elif op == OP_LAND:
            self._on_landed(arg, wc.byte_len)
        else:
            self._on_chunk(op, arg, wc.byte_len)

    def _on_landed(self, at: int, length: int) -> None:
        """A block frame the peer wrote into our landing zone at unit ``at``."""
        units = -(-length // LAND_UNIT)
        if (
            not HEADER_SIZE <= length <= self._max_frame + HEADER_SIZE
            or at + units > self.land_units
        ):
            self._malformed(f"landing write of {length} bytes at unit {at} is out of bounds")
            return
        if at != self._land_tail and at != 0:
            self._malformed(f"landing write at unit {at}, expected {self._land_tail} or 0")
            return
        skipped = (self.land_units - self._land_tail) if at != self._land_tail else 0
        offset = self._landing + at * LAND_UNIT
        self._frames.append((bytes(self.device.view[offset : offset + length]), skipped + units))
        self._land_tail = (at + units) % self.land_units
        self._arrived.set()

    def _on_chunk(self, op: int, slot: int, length: int) -> None:
        if slot != self._recv_slot or length > self.slot_size:
            self._malformed(f"chunk in slot {slot}, expected {self._recv_slot}")
            return
        offset = self._ring + slot * self.slot_size
        if not self._partial and length >= HEADER_SIZE:
            try:
                frame_length(
                    bytes(self.device.view[offset : offset + HEADER_SIZE]), self._max_frame
                )
            except MalformedMessage as err:
                self._fail(err)
                self._arrived.set()
                return
        self._partial += self.device.view[offset : offset + length]
        self._recv_slot = (slot + 1) % self.slots
        if len(self._partial) > self._max_frame + HEADER_SIZE:
            self._malformed("frame larger than the limit")
            return
        if op == OP_END:
            # The frame's last slot stays spent until ``recv`` takes the frame: that is the
            # back-pressure. Its other slots were copied out and are credited back now, so a
            # frame larger than the whole ring still gets through.
            self._frames.append((bytes(self._partial), 0))
            self._partial.clear()
            self._arrived.set()
        else:
            self._credit_back(force=False)

    def _credit_back(self, force: bool) -> None:
        """One more slot of ours is free; tell the peer in batches (a quarter of the ring,
        or now with ``force``). Fewer than a batch stay unreturned, so a blocked sender always
        gets credits back."""
        self._unreturned += 1
        if force or self._unreturned >= max(1, self.slots // 4):
            self._post_control(OP_CREDIT, self._unreturned)
            self._unreturned = 0

    # --- failure ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._error is not None:
            raise ChannelBroken(str(self._error)) from self._error
        if self._closed or self._peer_closed:
            raise ChannelClosed(f"channel to {self._remote} is closed")

    def _malformed(self, why: str) -> None:
        self._fail(MalformedMessage(why))
        self._arrived.set()

    def _fail(self, error: Exception) -> None:
        if self._error is None:
            self._error = error
        self._can_send.set()
        self._arrived.set()
