"""A proof reads its anchor's whole span, so the sidecar bounds them: one at a time per
session and a few at once per sidecar; a request finding no room is refused as busy, and
the room is given back whatever the proof's outcome."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from bps import sidecar as module
from bps.directory import Topic
from bps.errors import Refused
from bps.protocol import ProofRequest
from bps.sidecar import Session, Sidecar

FRAME = {"tenant": "acme", "topic": "orders", "partition": 0, "offset": 1}


class Stub:
    """What Session.proof uses of its sidecar."""

    def __init__(self, room: int) -> None:
        self.proofs = asyncio.Semaphore(room)


def session(room: int, release: asyncio.Event, fail: bool = False) -> Session:
    s = Session(cast(Sidecar, Stub(room)), "bob")

    async def topic(place: Any, right: int) -> Topic:
        return cast(Topic, None)

    async def proof(topic: Topic, request: ProofRequest) -> dict[str, Any]:
        await release.wait()
        if fail:
            raise Refused("missing", "gone")
        return {"path": []}

    s.topic = topic  # type: ignore[method-assign]
    s._proof = proof  # type: ignore[method-assign]
    return s


def test_one_proof_at_a_time_per_session() -> None:
    """A second proof while the first runs is refused; after it, the session may ask again."""

    async def go() -> None:
        release = asyncio.Event()
        s = session(4, release)
        first = asyncio.create_task(s.proof(FRAME))
        await asyncio.sleep(0)
        with pytest.raises(Refused, match="already getting a proof"):
            await s.proof(FRAME)
        release.set()
        assert await first == {"path": []}
        assert await s.proof(FRAME) == {"path": []}  # the session's turn came back

    asyncio.run(go())


def test_a_full_sidecar_refuses_after_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another session waits PROOF_QUEUE_S for room, is refused, and is served once free."""
    monkeypatch.setattr(module, "PROOF_QUEUE_S", 0.01)

    async def go() -> None:
        release = asyncio.Event()
        busy = session(1, release)
        other = Session(busy.sidecar, "carol")
        other.topic = busy.topic  # type: ignore[method-assign]
        other._proof = busy._proof  # type: ignore[method-assign]
        first = asyncio.create_task(busy.proof(FRAME))
        await asyncio.sleep(0)
        with pytest.raises(Refused, match="computing other proofs"):
            await other.proof(FRAME)
        assert not other.proving
        release.set()
        await first
        assert await other.proof(FRAME) == {"path": []}

    asyncio.run(go())


def test_a_failed_proof_gives_its_room_back() -> None:
    """Refused proofs release the session's turn and the sidecar's slot every time."""

    async def go() -> None:
        release = asyncio.Event()
        release.set()
        s = session(1, release, fail=True)
        for _ in range(3):
            with pytest.raises(Refused, match="gone"):
                await s.proof(FRAME)
        assert not s.proving and not cast(Stub, s.sidecar).proofs.locked()

    asyncio.run(go())
