"""Verbs recipes for the RDMA channel's RC queue pairs: connecting one to a peer, and the
work requests it posts (RDMA WRITE WITH IMMEDIATE, signalled)."""

from __future__ import annotations

import socket
from typing import Any

from p2p.rdma.device import PORT, RdmaDevice
from p2p.rdma.verbs import RdmaFailure
from p2p.rdma.wire import Endpoint


def connect_qp(device: RdmaDevice, qp: Any, psn: int, peer: Endpoint, remote: str) -> None:
    """Bring ``qp`` to RTS towards ``peer`` (raises RdmaFailure)."""
    v = device.v
    attr = v.QPAttr(port_num=PORT)
    attr.pkey_index = 0
    attr.qp_access_flags = device.access
    attr.path_mtu = min(device.info.mtu, peer.mtu)
    attr.dest_qp_num = peer.qp_num
    attr.rq_psn = peer.psn
    attr.sq_psn = psn
    attr.max_dest_rd_atomic = 1
    attr.max_rd_atomic = 1
    attr.min_rnr_timer = 12
    attr.timeout = 14  # 4.096 us * 2^14 = 67 ms per try
    attr.retry_cnt = 7
    attr.rnr_retry = 7
    route = v.GlobalRoute(
        dgid=v.GID(peer.gid), sgid_index=device.info.gid_index, hop_limit=64, traffic_class=0
    )
    attr.ah_attr = v.AHAttr(port_num=PORT, is_global=1, gr=route, sl=0)
    try:
        qp.to_rts(attr)
    except v.Error as err:
        raise RdmaFailure(f"cannot connect the queue pair to {remote}: {err}") from err


def control_wr(device: RdmaDevice, wr_id: int) -> Any:
    """A zero-length write with immediate, re-used for every credit and close. Control writes
    are signalled too: unsignalled ones hold send-queue entries until a later signalled one
    completes, and a side that only returns credits has none."""
    v = device.v
    sge = v.SGE(device.scratch.buf, 1, device.scratch.lkey)
    wr = v.SendWR(
        wr_id=wr_id,
        opcode=v.E.ibv_wr_opcode.IBV_WR_RDMA_WRITE_WITH_IMM,
        num_sge=1,
        sg=[sge],
        send_flags=v.E.ibv_send_flags.IBV_SEND_SIGNALED,
    )
    wr.num_sge = 0
    return wr


def write_wr(
    device: RdmaDevice,
    wr_id: int,
    offset: int,
    length: int,
    imm: int,
    rkey: int,
    remote_addr: int,
    inline: bool = False,
) -> Any:
    """A signalled write with immediate of ``length`` bytes at ``offset`` of the pool. A work
    request copies its SGE when built, so each write gets its own (~3 us)."""
    v, pool = device.v, device.pool
    flags = v.E.ibv_send_flags.IBV_SEND_SIGNALED
    if inline:
        flags |= v.E.ibv_send_flags.IBV_SEND_INLINE
    wr = v.SendWR(
        wr_id=wr_id,
        opcode=v.E.ibv_wr_opcode.IBV_WR_RDMA_WRITE_WITH_IMM,
        num_sge=1,
        sg=[v.SGE(pool.buf + offset, length, pool.lkey)],
        send_flags=flags,
    )
    wr.imm_data = socket.htonl(imm)
    wr.set_wr_rdma(rkey, remote_addr)
    return wr
