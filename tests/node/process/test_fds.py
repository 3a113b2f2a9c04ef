"""The fd limit raised at start, and the HTTP connection caps made from it."""

from __future__ import annotations

import resource

from node.process.fds import DEFAULT_CONNECTIONS, OWN_FDS, http_connection_caps, raise_fd_limit


def test_caps_leave_the_reserve_and_the_peers_their_fds() -> None:
    """Under a 1,400 limit with 121 fds for peers, the public and admin caps together take
    only what is left after OWN_FDS and the peers."""
    public, admin = http_connection_caps(1400, 121)
    assert public + admin + OWN_FDS + 121 <= 1400
    assert (public, admin) == (147, 32)


def test_caps_are_bounded_and_never_zero() -> None:
    """A huge limit still caps the public listener at DEFAULT_CONNECTIONS; a limit below the
    reserve still leaves the listeners an eighth of it."""
    assert http_connection_caps(1 << 20, 121)[0] == DEFAULT_CONNECTIONS
    public, admin = http_connection_caps(1024, 121)
    assert public + admin <= 1024 // 8 and public >= 1 and admin >= 1


def test_the_soft_limit_is_raised_to_the_hard_one() -> None:
    """raise_fd_limit lifts a lowered soft limit back to the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        assert raise_fd_limit() == hard
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
