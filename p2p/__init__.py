"""Peer-to-peer networking, by concern (CometBFT's shape), one room each, each importing only
the rooms below it (an import-linter contract):

- ``wire``: ``messages`` (one closed union of frozen dataclasses), ``codec`` (the only place
  bytes become messages) and ``handshake``.
- ``service``: what the network needs from the chain, as a protocol the node implements.
- ``transport``: ``channel`` (the interface and its typed stats), ``tcp`` (with ``tls``),
  ``connections`` (listen, dial with back-off, the handshake, the RDMA upgrade: the only code
  that knows transports exist), ``switch`` (the peer set of ``peer``s, sessions, limits and
  bans, routing each message by type to the ``reactor`` that owns it). ``rdma`` (pyverbs,
  imported lazily) sits beside it.
- ``relay``: new ``blocks``, ``transactions`` and ``votes`` to every peer lacking them.
- ``blocksync``: the ``reactor`` (catch-up, following the chain and serving ranges) over the
  pure scheduler ``manager`` with its ``actions``, ``peers`` and ``progress``, the
  ``applier``, and header sync (``headers``).
- ``statesync``: the ``reactor`` fetching a snapshot (``fetch``) and answering peers
  (``serving``).

The node (``node.network``) wires these; nothing here reads config or builds its own parts.
"""
