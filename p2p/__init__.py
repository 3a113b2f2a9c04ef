"""Peer-to-peer networking, by concern (CometBFT's shape).

- Wire: ``messages`` (one closed union of frozen dataclasses) and ``codec`` (the only place
  bytes become messages).
- Channels: ``channel`` (the interface and its typed stats), ``tcp``, ``rdma`` (pyverbs,
  imported lazily), ``testing`` (an in-memory pair).
- ``transport``: listen, dial with back-off, the handshake (``handshake``), the RDMA upgrade;
  the only code that knows transports exist.
- ``switch``: the peer set, sessions, limits and bans; routes each message by type to the
  reactor (``reactor``) that owns it.
- Reactors: ``blocksync`` (catch-up, following the chain and serving ranges, over the pure
  scheduler ``sync`` and the ``applier``), ``block_relay``, ``tx_relay``.
- ``service``: what the network needs from the chain, as a protocol the node implements.

The node (``node.network``) wires these; nothing here reads config or builds its own parts.
"""
