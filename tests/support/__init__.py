"""The tests' own helpers: waiting with a deadline, the test slowdown factor, a peer that
gets through the handshake. Shared by the unit and integration tests; not part of BoR."""
