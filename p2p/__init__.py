"""Peer-to-peer networking, by concern (CometBFT's shape).

- Wire: ``messages`` (one closed union of frozen dataclasses) and ``codec`` (the only place
  bytes become messages).
- Channels: ``channel`` (the interface and its typed stats), ``tcp`` (with ``tls``), ``rdma``
  (pyverbs, imported lazily), ``testing`` (an in-memory pair and lying peers).
- ``transport``: listen, dial with back-off, TLS, the handshake (``handshake``), the RDMA
  upgrade; the only code that knows transports exist.
- ``switch``: the peer set (``peer``), sessions, limits and bans; routes each message by type
  to the reactor (``reactor``) that owns it.
- Reactors: ``blocksync`` (catch-up, following the chain and serving ranges, over the pure
  scheduler ``sync`` with ``sync_actions`` and ``sync_peers``, and the ``applier``),
  ``header_sync``, ``statesync`` (with ``snapshot_fetch``; ``snapshot_serving`` answers
  peers), ``block_relay``, ``tx_relay``, ``vote_relay``.
- ``service``: what the network needs from the chain, as a protocol the node implements.

The node (``node.network``) wires these; nothing here reads config or builds its own parts.
"""
