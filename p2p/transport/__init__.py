"""Connections to peers: channels over TCP and TLS, the switch that holds peers, reactors,
and the transport that dials and listens."""
