"""Peer-to-peer networking of BoR (messages, channels over TCP and RDMA, sync).

Not built yet: this issue's node runs alone. The network comes with the peer-to-peer issue;
``chain`` already validates blocks without assuming who made them, so peers can feed it.
"""
