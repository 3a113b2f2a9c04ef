"""What travels between nodes: every message, their one codec, and the handshake."""
