"""How block sync is getting on: blocks and transactions per second, time left, and when the
next progress line is due. Pure arithmetic over the times it is given (the sync manager's
clock), so that tests drive it with a fake clock."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

# Seconds of history behind a rate: two progress lines' worth, so that one slow batch (a
# fork switch, a large block) does not swing the figure, while a stall shows within it.
RATE_WINDOW = 10.0
# Samples kept at most (one per chain update): the memory bound. Past it the rate is taken
# over a shorter span, still the true rate.
MAX_SAMPLES = 4096


@dataclass(frozen=True, slots=True)
class Progress:
    """One progress reading: where we are, where we go, how fast, how long still."""

    head: int
    target: int
    blocks_per_s: float
    txs_per_s: float
    eta_s: float | None  # None: nothing left, or no progress to judge by


@dataclass(slots=True)
class SyncProgress:
    """Fed every head our chain reaches (``advanced``); asked for a reading (``reading``) and
    whether a progress line is due while catching up (``due``)."""

    interval: float = 5.0  # seconds between progress lines; 0: none
    window: float = RATE_WINDOW
    # (time, head, transactions applied so far): the figures a rate is the slope of.
    _samples: deque[tuple[float, int, int]] = field(
        default_factory=lambda: deque(maxlen=MAX_SAMPLES)
    )
    _txs: int = 0
    _last_line: float | None = None  # None: in sync, no catch-up under way

    def advanced(self, now: float, head: int, txs: int) -> None:
        """Our head is ``head`` at ``now``, after applying ``txs`` transactions more."""
        self._txs += txs
        self._samples.append((now, head, self._txs))
        while len(self._samples) > 1 and self._samples[0][0] < now - self.window:
            self._samples.popleft()

    def restart(self, now: float, head: int) -> None:
        """A catch-up begins at ``head``: its rate counts from here, not from the idle time
        before it (a node waiting for its first peer would read as slow for a window)."""
        self._samples.clear()
        self._samples.append((now, head, self._txs))

    def rates(self, now: float) -> tuple[float, float]:
        """Blocks and transactions per second over the last ``window`` seconds up to ``now``:
        the figures fall while nothing comes, down to 0 once a window passes with none."""
        base = next((s for s in self._samples if s[0] >= now - self.window), None)
        if base is None or now <= base[0]:
            return 0.0, 0.0
        _, head, txs = self._samples[-1]
        span = now - base[0]
        # A fork switch may lower our head: that is no negative progress to report.
        return max(0, head - base[1]) / span, (txs - base[2]) / span

    def reading(self, now: float, head: int, target: int) -> Progress:
        blocks, txs = self.rates(now)
        behind = max(0, target - head)
        eta = round(behind / blocks, 1) if blocks > 0 and behind else None
        return Progress(head, target, round(blocks, 1), round(txs, 1), eta)

    def due(self, now: float, catching_up: bool) -> bool:
        """Whether a progress line is due at ``now``: every ``interval`` seconds of a catch-up,
        the first one ``interval`` seconds into it (a producer a block or two behind for a
        moment logs nothing), and none in sync."""
        if not catching_up or self.interval <= 0:
            self._last_line = None
            return False
        if self._last_line is None:
            self._last_line = now
            return False
        if now - self._last_line < self.interval:
            return False
        self._last_line = now
        return True
