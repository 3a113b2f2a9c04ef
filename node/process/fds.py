"""The process's file descriptors: the soft limit raised at start, and how many of them the
HTTP listeners may hold, so that connections never take the fds the node's own files need
(running out fails a write of the finalizer's safety file, and the node stops)."""

from __future__ import annotations

import resource

# Kept for the node's own files: LevelDB holds up to 1,000 table files open (its
# max_open_files default) besides its log, manifest and lock; the rest covers the
# finalizer's safety file, snapshots written or served, the signature workers' pipes, the
# event loop and stdio.
OWN_FDS = 1100
# Peer sockets when a p2p cap is off (0), and peers dialled at run time (/v1/net/connect).
UNCAPPED_PEERS = 256
DIALLED_AT_RUN_TIME = 64
# The admin listener serves one operator: its share is small and fixed.
ADMIN_CONNECTIONS = 32
# The public listener's cap when the fd limit allows more: an idle connection costs a few
# KiB besides its fd, and 4,096 outlast any honest client population of one node.
DEFAULT_CONNECTIONS = 4096
# Under a limit too small for the reserve (a 1,024 soft limit that cannot be raised), the
# listeners still get this share of it rather than nothing.
FLOOR_SHARE = 8


def raise_fd_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (a systemd unit's default soft limit is
    1,024 of a hard 524,288); the soft limit in force after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # An unlimited hard limit cannot be the soft one (Linux caps it at fs.nr_open).
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft
        return target
    return soft


def fd_limit() -> int:
    """The soft RLIMIT_NOFILE now."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


def http_connection_caps(limit: int, peer_fds: int) -> tuple[int, int]:
    """(public, admin) connection caps under an fd ``limit`` with ``peer_fds`` kept for
    peers: what is left after the node's own files and its peers, at most
    ``DEFAULT_CONNECTIONS`` for the public listener."""
    left = max(limit // FLOOR_SHARE, limit - OWN_FDS - peer_fds)
    admin = min(ADMIN_CONNECTIONS, max(1, left // 4))
    return max(1, min(DEFAULT_CONNECTIONS, left - admin)), admin


def peer_fds(max_clients: int, max_unauthenticated: int, dialled: int, waiting: int) -> int:
    """The fds the peer layer may hold under its caps (0: off), its preamble waiting room
    (``waiting`` places) included."""
    inbound = (max_clients or UNCAPPED_PEERS) + (max_unauthenticated or UNCAPPED_PEERS)
    inbound += waiting
    return inbound + dialled + DIALLED_AT_RUN_TIME
