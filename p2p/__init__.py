"""Peer-to-peer networking: wire messages and their codec, the Channel interface with its TCP
implementation, the handshake, the peer manager (connections, permissioning, broadcast) and
the sync manager (which ranges to ask whom). RDMA channels slot in beside TCP later; only the
channels know which transport they use.
"""
