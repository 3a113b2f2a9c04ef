"""The one place that imports pyverbs, lazily, for rdma-core 44 (Debian bookworm) and newer.

``load()`` returns a namespace of the pyverbs classes, functions and enums we use, or raises
``RdmaUnavailable`` with the reason (pyverbs missing, or an rdma-core it cannot load), so that
``import p2p`` works on a machine without pyverbs. The enum module was renamed
(``pyverbs.enums`` → ``pyverbs.libibverbs_enums``, the old name gone from rdma-core 59);
enum members are reached through their enum class, which works with both.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

from p2p.errors import P2PError


class RdmaUnavailable(P2PError):
    """No usable RDMA here: the reason says why (the node then runs TCP only)."""


class RdmaFailure(P2PError):
    """A verbs call failed on a device that was usable."""


@dataclass(frozen=True)
class Verbs:
    get_device_list: Any
    Context: Any
    PD: Any
    MR: Any
    CQ: Any
    CompChannel: Any
    SRQ: Any
    SrqInitAttr: Any
    SrqAttr: Any
    QP: Any
    QPCap: Any
    QPInitAttr: Any
    QPAttr: Any
    GID: Any
    GlobalRoute: Any
    AHAttr: Any
    SGE: Any
    SendWR: Any
    RecvWR: Any
    Error: Any  # PyverbsError, base of the others
    RDMAError: Any
    E: Any  # the enum module
    version: str


_loaded: Verbs | None = None
_lock = threading.Lock()


def load() -> Verbs:
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = _import()
        return _loaded


def _import() -> Verbs:
    # Importing pyverbs calls logging.basicConfig(level=INFO); ours is configured already
    # (structlog), so give the root logger a handler first and basicConfig does nothing.
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.NullHandler())
    try:
        try:
            import pyverbs.libibverbs_enums as E  # rdma-core >= 57 (only choice from 59)
        except ImportError:
            import pyverbs.enums as E  # rdma-core 44 (Debian bookworm)
        from pyverbs.addr import GID, AHAttr, GlobalRoute
        from pyverbs.cq import CQ, CompChannel
        from pyverbs.device import Context, get_device_list
        from pyverbs.mr import MR
        from pyverbs.pd import PD
        from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
        from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
        from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
        from pyverbs.wr import SGE, RecvWR, SendWR
    except ImportError as err:
        raise RdmaUnavailable(f"pyverbs cannot be imported ({err})") from err
    import pyverbs

    return Verbs(
        get_device_list=get_device_list,
        Context=Context,
        PD=PD,
        MR=MR,
        CQ=CQ,
        CompChannel=CompChannel,
        SRQ=SRQ,
        SrqInitAttr=SrqInitAttr,
        SrqAttr=SrqAttr,
        QP=QP,
        QPCap=QPCap,
        QPInitAttr=QPInitAttr,
        QPAttr=QPAttr,
        GID=GID,
        GlobalRoute=GlobalRoute,
        AHAttr=AHAttr,
        SGE=SGE,
        SendWR=SendWR,
        RecvWR=RecvWR,
        Error=PyverbsError,
        RDMAError=PyverbsRDMAError,
        E=E,
        version=str(getattr(pyverbs, "__version__", "?")),
    )


def _event_fds() -> set[int]:
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == "anon_inode:[infinibandevent]":
                found.add(int(name))
        except OSError:
            continue
    return found


_fd_lock = threading.Lock()


def open_comp_channel(v: Verbs, ctx: Any) -> tuple[Any, int]:
    """A completion channel and its file descriptor. rdma-core >= 57 has ``.fd``; on 44 it
    is the one new ``anon_inode:[infinibandevent]`` fd (the Context owns another)."""
    with _fd_lock:
        before = _event_fds()
        channel = v.CompChannel(ctx)
        fd = getattr(channel, "fd", None)
        if fd is None:
            new = _event_fds() - before
            if len(new) != 1:
                channel.close()
                raise RdmaFailure(f"cannot identify the completion channel's fd ({new})")
            fd = new.pop()
    return channel, int(fd)


def is_again(v: Verbs, err: BaseException) -> bool:
    return isinstance(err, v.RDMAError) and getattr(err, "error_code", None) in (
        errno.EAGAIN,
        errno.EWOULDBLOCK,
    )
