"""Every block the chain may accept fits in a peer frame, and a message that does not fit
is dropped by the session's writer instead of ending the node."""

from __future__ import annotations

import asyncio
import os

from chain.core.primitives.params import MAX_BLOCK_BYTES
from p2p.transport.peer import peer_id_of
from p2p.transport.switch import Switch
from p2p.wire.codec import HEADER_SIZE, MAX_FRAME_SIZE, encode_frame
from p2p.wire.messages import Notice, RawBlock, Time
from tests.p2p.configs import switch_config
from tests.p2p.transport.test_switch import connect


def test_the_largest_block_a_genesis_may_allow_fits_in_a_frame() -> None:
    """A block of MAX_BLOCK_BYTES (the most chain_params.max_block_bytes may be) is framed
    as a block message, within MAX_FRAME_SIZE; so no valid block is unsendable."""
    frame = encode_frame(RawBlock(bytes(MAX_BLOCK_BYTES)))
    assert len(frame) == HEADER_SIZE + MAX_BLOCK_BYTES <= HEADER_SIZE + MAX_FRAME_SIZE


def test_an_unframeable_outgoing_message_is_dropped_and_the_session_goes_on() -> None:
    """A message too large for a frame in a peer's outbox (the issue's 27 MB block) is
    dropped with an error logged; the session stays up and the next message is delivered."""

    async def main() -> None:
        switch = Switch(os.urandom(32), switch_config(), [])
        node = os.urandom(32)
        theirs, session = await connect(switch, node)
        peer = switch.get(peer_id_of(node))
        assert peer is not None
        assert peer.offer(RawBlock(bytes(MAX_FRAME_SIZE + 1)))
        assert peer.offer(Notice(0, 5))  # type: ignore[arg-type]
        reply = await asyncio.wait_for(theirs.recv(), 5)
        while isinstance(reply, Time):  # our pings
            reply = await asyncio.wait_for(theirs.recv(), 5)
        assert reply == Notice(0, 5)  # type: ignore[arg-type]
        assert not session.done() and switch.get(peer.id) is peer
        await theirs.close()
        await asyncio.wait_for(session, 5)

    asyncio.run(main())
