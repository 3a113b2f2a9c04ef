"""``RdmaChannel``: typed messages over an RC queue pair, by RDMA WRITE WITH IMMEDIATE.

The bytes on the wire (rings, immediates, landing zones, credits) are described in
``p2p.rdma.wire``. This module moves them: chunking frames into the peer's ring, landing range
blocks and snapshot chunks in the zone the peer named, crediting slots back, and turning
completions (handed over by the device's poller thread, on the event loop) into received
frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from collections import deque
from typing import Any

from p2p.errors import ChannelBroken, ChannelClosed, MalformedMessage
from p2p.rdma.device import Completion, RdmaDevice
from p2p.rdma.landing import ZoneReader, ZoneWriter, units_of
from p2p.rdma.qp import connect_qp, control_wr, write_wr
from p2p.rdma.verbs import RdmaFailure
from p2p.rdma.wire import (
    LAND_UNIT,
    LAND_WR_ID,
    OP_CLOSE,
    OP_CREDIT,
    OP_DATA,
    OP_END,
    OP_LAND,
    OP_LAND_CREDIT,
    OPS,
    Endpoint,
    immediate,
)
from p2p.transport.channel import Channel, ChannelStats
from p2p.wire.codec import HEADER_SIZE, MAX_FRAME_SIZE, decode_message, encode_frame, frame_length
from p2p.wire.messages import (
    Message,
    Outbound,
    RawBlock,
    RdmaChunkRequest,
    RdmaSyncRequest,
    SnapshotChunk,
    SnapshotChunkRequest,
    SyncRequest,
)


class RdmaChannel(Channel):
    transport = "rdma"

    def __init__(
        self,
        device: RdmaDevice,
        remote: str,
        max_frame: int = MAX_FRAME_SIZE,
        control: Channel | None = None,
    ) -> None:
        super().__init__(remote)
        # The TCP channel the queue pairs were exchanged over: it stays open as long as this
        # channel (the peer watches it too) and is closed with it.
        self._control = control
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
        # Landing writes (we serve a range into the zone the peer named), and our own zone.
        self._zone_out = ZoneWriter()
        self._land_seq = 0
        self.landed_bytes = 0  # range bytes written straight into the peer's zone
        self._zone_in = ZoneReader(self.land_units, max_frame + HEADER_SIZE)
        # Receiving side.
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
        dev, ring = self.device, self.device.region_address(self._region)
        qp, psn, slots, size = self.qp.qp_num, self.psn, self.slots, self.slot_size
        return Endpoint(qp, psn, dev.info.gid, dev.info.mtu, ring, dev.pool.rkey, slots, size)

    def connect(self, peer: Endpoint) -> None:
        """Bring the queue pair to RTS towards ``peer`` (raises the verbs error)."""
        dev = self.device
        if peer.slot_size != self.slot_size or peer.slots != self.slots:
            raise MalformedMessage("peer's ring has another shape")
        connect_qp(dev, self.qp, self.psn, peer, self._remote)
        self._peer = peer
        self._credit_wr = control_wr(dev, self.slots)
        self._credits = self.slots
        self._can_send.set()

    # --- Channel ----------------------------------------------------------------------------

    def stats(self) -> ChannelStats:
        tcp = self._control
        tcp_sent, tcp_received = (tcp.bytes_sent, tcp.bytes_received) if tcp else (0, 0)
        return ChannelStats(
            self.transport, self._sent, self._received, tcp_sent, tcp_received,
            self.writes, self.completions, self.landed_bytes,
        )  # fmt: skip

    async def send(self, message: Outbound) -> None:
        frame = encode_frame(self._wire_form(message))
        landed = isinstance(message, RawBlock | SnapshotChunk)
        if landed and self._zone_out.takes(len(frame)):
            async with self._send_lock:
                await self._land_frame(frame)
            self._sent += len(frame)
            return
        await self._send_frame(frame)

    def _wire_form(self, message: Outbound) -> Outbound:
        """The channel's hook (see ``p2p.transport.channel``): a range or snapshot chunk request
        names our landing zone, so the peer writes the blocks or the chunk straight into it.
        ``_from_wire`` undoes it."""
        if isinstance(message, SyncRequest) and message.end:
            return RdmaSyncRequest(message.start, message.end, *self._our_zone())
        if isinstance(message, SnapshotChunkRequest):
            return RdmaChunkRequest(message.block_id, message.index, *self._our_zone())
        return message

    def _our_zone(self) -> tuple[int, int, int]:
        """Our landing zone as a request names it: address, rkey, size in units."""
        addr = self.device.region_address(self._region) + 2 * self.device.ring_size
        return addr, self.device.pool.rkey, self.land_units

    def _from_wire(self, message: Message) -> Message:
        if isinstance(message, RdmaSyncRequest):
            self._zone_out.name(message.addr, message.rkey, message.units, self.land_units)
            return SyncRequest(message.start, message.end)
        if isinstance(message, RdmaChunkRequest):
            self._zone_out.name(message.addr, message.rkey, message.units, self.land_units)
            return SnapshotChunkRequest(message.block_id, message.index)
        return message

    async def _land_frame(self, frame: bytes) -> None:
        """Write a block frame into the peer's landing zone, contiguously (skipping the zone's
        tail when it does not fit there), as one RDMA WRITE WITH IMMEDIATE."""
        zone = self._zone_out
        assert zone.zone is not None and self._peer is not None
        addr, rkey, _ = zone.zone
        units = units_of(len(frame))
        self._check_open()
        while (placed := zone.place(units)) is None:
            self._can_send.clear()
            await self._can_send.wait()
            self._check_open()
        at, skip = placed
        local = self._land_staging + at * LAND_UNIT
        self.device.view[local : local + len(frame)] = frame
        self._land_seq += 1
        wr_id = LAND_WR_ID + self._land_seq
        imm = immediate(OP_LAND, at)
        wr = write_wr(self.device, wr_id, local, len(frame), imm, rkey, addr + at * LAND_UNIT)
        self._post(wr)
        zone.posted(wr_id, at, units, skip)
        self.writes += 1
        self.landed_bytes += len(frame)

    async def _send_frame(self, frame: bytes) -> None:
        """Write one encoded frame into the peer's ring."""
        async with self._send_lock:
            for start in range(0, max(len(frame), 1), self.slot_size):
                chunk = frame[start : start + self.slot_size]
                last = start + self.slot_size >= len(frame)
                await self._write_chunk(chunk, OP_END if last else OP_DATA)
        self._sent += len(frame)

    async def _write_chunk(self, chunk: bytes, op: int) -> None:
        slot = self._send_slot
        self._check_open()
        while self._credits <= 0 or slot in self._in_flight:
            self._can_send.clear()
            await self._can_send.wait()
            self._check_open()
        assert self._peer is not None
        offset = self._staging + slot * self.slot_size
        self.device.view[offset : offset + len(chunk)] = chunk
        inline = len(chunk) <= self.inline_max
        self.inline_writes += inline
        remote = self._peer.ring_addr + slot * self.slot_size
        imm = immediate(op, slot)
        wr = write_wr(self.device, slot, offset, len(chunk), imm, self._peer.rkey, remote, inline)
        self._post(wr)
        self._credits -= 1
        self._in_flight.add(slot)
        self._send_slot = (slot + 1) % self.slots
        self.writes += 1

    def _post(self, wr: Any) -> None:
        if self.qp is None:
            raise ChannelClosed(f"channel to {self._remote} is closed")
        try:
            self.qp.post_send(wr)
        except self.device.v.Error as err:
            self._fail(ChannelBroken(f"post to {self._remote} failed: {err}"))
            raise self._error from err  # type: ignore[misc]

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
            message = self._from_wire(decode_message(kind, frame[HEADER_SIZE:]))
        except MalformedMessage as err:
            self._fail(err)
            await self.close()
            raise
        self._received += len(frame)
        return message

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._error is None:
                self._post_control(OP_CLOSE, 0)
                await asyncio.sleep(0.05)  # let the close write leave before the QP goes
            self._release()
        if self._control is not None:  # also after ``abort``
            await self._control.close()

    async def release(self) -> None:
        """Close the RDMA side only: a declined upgrade stays on the control channel."""
        self._control = None
        await self.close()

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
                self._zone_out.completed(wc.wr_id)
            else:
                self._in_flight.discard(wc.wr_id)
            self._can_send.set()
            return
        op, arg = wc.imm >> 28, wc.imm & 0xFFFF
        if op not in OPS or (wc.imm >> 16) & 0xFFF:
            self._malformed(f"unknown immediate {wc.imm:#010x}")
        elif op == OP_CREDIT:
            self._credits += arg
            self._can_send.set()
        elif op == OP_CLOSE:
            self._peer_closed = True
            self._can_send.set()
            self._arrived.set()
        elif op == OP_LAND_CREDIT:
            self._zone_out.credited(arg)
            self._can_send.set()
        elif op == OP_LAND:
            self._on_landed(arg, wc.byte_len)
        else:
            self._on_chunk(op, arg, wc.byte_len)

    def _on_landed(self, at: int, length: int) -> None:
        """A block frame the peer wrote into our landing zone at unit ``at``."""
        try:
            units = self._zone_in.landed(at, length)
        except MalformedMessage as err:
            self._malformed(str(err))
            return
        offset = self._landing + at * LAND_UNIT
        self._frames.append((bytes(self.device.view[offset : offset + length]), units))
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
