"""RDMA detection and the node-wide verbs resources, created once.

``detect`` answers "can this node speak RDMA, and as what?": pyverbs importable, a device
with an ACTIVE port, and a RoCE v2 GID for the IPv4 address the node uses.

``RdmaDevice`` owns everything shared by all RDMA peers, created at start-up and closed in
reverse order: one protection domain; one registered memory pool cut into per-channel
regions (a receive ring the peer writes into and a send staging area of the same shape — no
registration on the hot path); one shared receive queue for every peer's queue pair,
replenished in batches; one completion queue bound to a completion channel.

The poller thread waits on the completion channel's fd with ``select`` (which releases the
GIL — pyverbs' ``get_cq_event`` does not, so a thread blocked in it would freeze the node),
then reads the events, acks them, re-arms the CQ, drains completions in batches, re-posts the
receive WQEs they consumed, and hands each batch to the asyncio loop in one call.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ipaddress
import mmap
import os
import select
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from p2p.rdma.verbs import RdmaFailure, RdmaUnavailable, Verbs, is_again, load, open_comp_channel

log = structlog.get_logger("rdma")

PORT = 1
CQ_DEPTH = 4096
SRQ_DEPTH = 1024
REPOST_BATCH = 32  # receive WQEs re-posted at once
POLL_BATCH = 64
INLINE_WANTED = 256  # bytes of a write copied into the work request (no DMA read of ours)
RECV_WR_ID = 1 << 62  # marks the SRQ's receive WQEs (send WRs carry small slot numbers)
HUGE_PAGE = 2 << 20  # x86-64's default huge page size
MAP_HUGETLB = getattr(mmap, "MAP_HUGETLB", 0x40000)  # Python < 3.14 lacks the name (Linux value)


@dataclass(frozen=True, slots=True)
class RdmaInfo:
    """What ``detect`` found: usable or not, and why."""

    available: bool
    reason: str
    device: str = ""
    gid: str = ""
    gid_index: int = -1
    mtu: int = 0  # the enum value (3 = 1024 bytes)
    pyverbs: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "available": self.available,
            "reason": self.reason,
            "device": self.device,
            "gid": self.gid,
            "gid_index": self.gid_index,
            "pyverbs": self.pyverbs,
        }


def _mapped(ip: str) -> str:
    """The IPv4-mapped GID of ``ip`` in pyverbs' notation (8 groups of 4 hex digits)."""
    packed = ipaddress.IPv6Address(f"::ffff:{ip}").packed
    return ":".join(packed[i : i + 2].hex() for i in range(0, 16, 2))


def detect(ip: str | None = None, device: str | None = None) -> RdmaInfo:
    """Look for a device (``device``, or any) whose port 1 is ACTIVE and has a RoCE v2 GID
    mapping ``ip`` (or any IPv4-mapped one when ``ip`` is None)."""
    try:
        v = load()
    except RdmaUnavailable as err:
        return RdmaInfo(False, str(err))
    try:
        # rdma-core raises here when the kernel has no RDMA subsystem at all (no
        # /sys/class/infiniband): the distro's pyverbs installed on a host without a NIC.
        names = [d.name.decode() for d in v.get_device_list()]
    except v.Error as err:
        return RdmaInfo(False, f"no RDMA device ({err})", pyverbs=v.version)
    if device is not None:
        names = [n for n in names if n == device]
    if not names:
        return RdmaInfo(False, "no RDMA device" + (f" named {device}" if device else ""))
    reasons = []
    for name in names:
        try:
            ctx = v.Context(name=name)
        except v.Error as err:
            reasons.append(f"{name}: cannot open ({err})")
            continue
        try:
            found = _roce_v2_gid(v, ctx, name, ip)
        except v.Error as err:
            found = f"{name}: cannot query ({err})"
        finally:
            ctx.close()
        if isinstance(found, RdmaInfo):
            return found
        reasons.append(found)
    return RdmaInfo(False, "; ".join(reasons), pyverbs=v.version)


def _roce_v2_gid(v: Verbs, ctx: Any, name: str, ip: str | None) -> RdmaInfo | str:
    """The usable GID of device ``name`` for ``ip``, or why there is none."""
    roce_v2 = v.E.ibv_gid_type_sysfs.IBV_GID_TYPE_SYSFS_ROCE_V2
    port = ctx.query_port(PORT)
    if port.state != v.E.ibv_port_state.IBV_PORT_ACTIVE:
        return f"{name}: port {PORT} is not active"
    wanted = _mapped(ip) if ip else None
    for index in range(port.gid_tbl_len):
        try:
            gid = str(ctx.query_gid(PORT, index).gid)
            kind = ctx.query_gid_type(PORT, index)
        except v.Error:
            continue
        if kind != roce_v2 or not gid.startswith("0000:0000:0000:0000:0000:ffff:"):
            continue
        if wanted is None or gid == wanted:
            return RdmaInfo(True, "ready", name, gid, index, int(port.active_mtu), v.version)
    return f"{name}: no RoCE v2 GID for {ip or 'an IPv4 address'}"


def _huge_pages_reserved() -> bool:
    try:
        with open("/proc/sys/vm/nr_hugepages") as f:
            return int(f.read().strip() or 0) > 0
    except (OSError, ValueError):
        return False


@dataclass(frozen=True, slots=True)
class Completion:
    """One work completion, copied out of pyverbs' WC in the poller thread."""

    qp_num: int
    wr_id: int
    status: int
    opcode: int
    imm: int  # host byte order
    byte_len: int
    vendor_err: int


class RdmaDevice:
    """The node's verbs resources and poller thread (see the module docstring)."""

    def __init__(
        self,
        info: RdmaInfo,
        *,
        channels: int = 16,
        slots: int = 32,
        slot_size: int = 64 * 1024,
    ) -> None:
        if not info.available:
            raise RdmaUnavailable(info.reason)
        self.v: Verbs = load()
        self.info = info
        self.slots = slots
        self.slot_size = slot_size
        # Per peer: receive ring, send staging, landing zone (sync ranges written straight
        # into it by the peer) and landing staging (the ranges we write into the peer's).
        self.ring_size = slots * slot_size
        self.region_size = 4 * self.ring_size
        v = self.v
        e = v.E
        self.access = (
            e.ibv_access_flags.IBV_ACCESS_LOCAL_WRITE | e.ibv_access_flags.IBV_ACCESS_REMOTE_WRITE
        )
        self._closers: list[Callable[[], None]] = []
        try:
            self.ctx = v.Context(name=info.device)
            self._closers.append(self.ctx.close)
            self.device_attr = self.ctx.query_device()
            self.pd = v.PD(self.ctx)
            self._closers.append(self.pd.close)
            # One pool for every channel's ring and staging area, registered once; in huge
            # pages when the host has some reserved (fewer TLB misses on the NIC's side too).
            self.pool, self.huge_pages = self._register_pool(channels * self.region_size)
            self._closers.append(self.pool.close)
            self.view = memoryview(
                (ctypes.c_char * self.pool.length).from_address(self.pool.buf)
            ).cast("B")
            self._free_regions = list(range(channels))
            # Receive WQEs of the SRQ: a WRITE WITH IMMEDIATE consumes one but writes no data
            # into it, so every WQE points at the same small scratch buffer.
            self.scratch = v.MR(self.pd, 64, e.ibv_access_flags.IBV_ACCESS_LOCAL_WRITE)
            self._closers.append(self.scratch.close)
            self.comp_channel, self.fd = open_comp_channel(v, self.ctx)
            self._closers.append(self.comp_channel.close)
            self.cq = v.CQ(self.ctx, CQ_DEPTH, None, self.comp_channel, 0)
            self._closers.append(self.cq.close)
            self.srq = v.SRQ(self.pd, v.SrqInitAttr(v.SrqAttr(max_wr=SRQ_DEPTH, max_sge=1)))
            self._closers.append(self.srq.close)
            sge = v.SGE(self.scratch.buf, 64, self.scratch.lkey)
            self._recv_wr = v.RecvWR(wr_id=RECV_WR_ID, num_sge=1, sg=[sge])
            for _ in range(SRQ_DEPTH):
                self.srq.post_recv(self._recv_wr)
            self.cq.req_notify()
        except v.Error as err:
            self._close_resources()
            raise RdmaFailure(f"cannot set up {info.device}: {err}") from err
        os.set_blocking(self.fd, False)
        self._handlers: dict[int, Callable[[Completion], None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumed = 0
        self.failed = ""
        self.completions = 0
        self.errors = 0

    def _register_pool(self, size: int) -> tuple[Any, bool]:
        """The pool's memory region, in huge pages when the host has some reserved. We map
        them ourselves: pyverbs' IBV_ACCESS_HUGETLB also hands that flag to the kernel, and
        rxe of newer kernels (Debian trixie's 6.12) refuses a region with it (EOPNOTSUPP)."""
        v = self.v
        if _huge_pages_reserved():
            try:
                mapping = mmap.mmap(
                    -1,
                    -(-size // HUGE_PAGE) * HUGE_PAGE,
                    flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_HUGETLB,
                )
            except OSError as err:
                log.info("rdma_huge_pages_unused", why=str(err))
            else:
                # A temporary export gives the address; nothing keeps it, so close() works.
                address = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
                try:
                    region = v.MR(self.pd, size, self.access, address=address)
                except v.Error as err:
                    mapping.close()
                    log.info("rdma_huge_pages_unused", why=str(err))
                else:
                    self._closers.append(mapping.close)  # runs after the region's close
                    return region, True
        return v.MR(self.pd, size, self.access), False

    # --- regions and queue pairs ------------------------------------------------------------

    def take_region(self) -> int:
        if not self._free_regions:
            raise RdmaFailure("no free RDMA buffer region (raise rdma-max-peers)")
        return self._free_regions.pop()

    def give_region(self, region: int) -> None:
        self._free_regions.append(region)

    def region_address(self, region: int) -> int:
        return int(self.pool.buf) + region * self.region_size

    def create_qp(self) -> tuple[Any, int]:
        """A new RC queue pair on the shared CQ and SRQ, and the inline size it was granted
        (small writes go inline where the device allows: rxe grants a few hundred bytes)."""
        v, e = self.v, self.v.E
        for inline in (INLINE_WANTED, 0):
            cap = v.QPCap(
                max_send_wr=2 * self.slots + 16,
                max_recv_wr=1,
                max_send_sge=1,
                max_recv_sge=1,
                max_inline_data=inline,
            )
            init = v.QPInitAttr(
                qp_type=e.ibv_qp_type.IBV_QPT_RC,
                scq=self.cq,
                rcq=self.cq,
                srq=self.srq,
                cap=cap,
                sq_sig_all=0,
            )
            try:
                qp = v.QP(self.pd, init)
            except v.Error:
                if inline == 0:
                    raise
                continue
            try:
                granted = int(qp.query(e.ibv_qp_attr_mask.IBV_QP_CAP)[1].max_inline_data)
            except (v.Error, AttributeError, IndexError, TypeError):
                granted = inline
            return qp, min(granted, inline)
        raise AssertionError("unreachable")

    def register(self, qp_num: int, handler: Callable[[Completion], None]) -> None:
        self._handlers[qp_num] = handler

    def unregister(self, qp_num: int) -> None:
        self._handlers.pop(qp_num, None)

    # --- the poller -------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._thread = threading.Thread(target=self._poll_forever, name="rdma-poller", daemon=True)
        self._thread.start()

    def _poll_forever(self) -> None:
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([self.fd], [], [], 0.2)  # releases the GIL
                if ready:
                    self._drain()
        except BaseException as err:  # the device is unusable: every channel on it breaks
            log.error("rdma_poller_failed", error=f"{type(err).__name__}: {err}")
            self.failed = f"poller failed: {err}"
            if self._loop is not None:
                with contextlib.suppress(RuntimeError):
                    self._loop.call_soon_threadsafe(self._fail_all)

    def _drain(self) -> None:
        v = self.v
        success = v.E.ibv_wc_status.IBV_WC_SUCCESS
        recv_imm = v.E.ibv_wc_opcode.IBV_WC_RECV_RDMA_WITH_IMM
        events = 0
        while True:
            try:
                self.comp_channel.get_cq_event(self.cq)
                events += 1
            except v.Error as err:
                if is_again(v, err):
                    break
                raise
        if events:
            self.cq.ack_events(events)
        self.cq.req_notify()  # re-arm before the last drain: nothing is missed
        while True:
            count, wcs = self.cq.poll(POLL_BATCH)
            batch = []
            for wc in wcs:
                ok = wc.status == success
                if wc.wr_id == RECV_WR_ID:
                    self._consumed += 1  # an SRQ WQE, used by a write with immediate
                is_recv = ok and wc.opcode == recv_imm
                batch.append(
                    Completion(
                        wc.qp_num,
                        wc.wr_id,
                        wc.status,
                        wc.opcode if ok else -1,
                        socket.ntohl(wc.imm_data) if is_recv else 0,
                        wc.byte_len if ok else 0,
                        wc.vendor_err,
                    )
                )
            if self._consumed >= REPOST_BATCH:
                for _ in range(self._consumed):
                    self.srq.post_recv(self._recv_wr)
                self._consumed = 0
            if batch and self._loop is not None:
                self.completions += len(batch)
                try:
                    self._loop.call_soon_threadsafe(self._dispatch, batch)
                except RuntimeError:  # the loop is closed: we are shutting down
                    self._stop.set()
                    return
            if count < POLL_BATCH:
                return

    def _fail_all(self) -> None:
        for handler in list(self._handlers.values()):
            handler(Completion(0, 0, -1, -1, 0, 0, 0))

    def _dispatch(self, batch: list[Completion]) -> None:
        for wc in batch:
            handler = self._handlers.get(wc.qp_num)
            if wc.status != 0:
                self.errors += 1
            if handler is not None:
                handler(wc)

    # --- shutdown ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the poller, then close every resource in reverse order of creation."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._close_resources()

    def _close_resources(self) -> None:
        if hasattr(self, "view"):
            with contextlib.suppress(BufferError):
                self.view.release()
        while self._closers:
            closer = self._closers.pop()
            try:
                closer()
            except Exception as err:  # closing must go on through the rest
                log.warning("rdma_close_failed", error=str(err))
