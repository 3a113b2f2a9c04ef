"""BPS's one error hierarchy: what a command prints as one line, and a sidecar answers as a
refusal with a reason."""

from __future__ import annotations


class BpsError(Exception):
    """Anything BPS refuses or cannot do."""


class Refused(BpsError):
    """The sidecar refused a request (authentication, ACL, a bad argument): ``code`` names why."""

    def __init__(self, code: str, what: str) -> None:
        super().__init__(f"{code}: {what}")
        self.code = code
        self.what = what


class Unavailable(BpsError):
    """No broker answered, or the stream has no leader right now: retry elsewhere or later."""


class Tampered(BpsError):
    """A message or an anchor does not match what the chain holds."""


class NotYet(BpsError):
    """What was asked for is not settled yet (an offset not anchored, an anchor not in an
    irreversible block): ask again in a moment."""


class CannotOpen(BpsError):
    """An end-to-end sealed payload or wrapped key does not open with the key given: another
    key's, or a byte was changed."""
