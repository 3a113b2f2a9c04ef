"""The pure chain core of BoR.

Types, canonical encoding, signatures, the state transition (native actions, DPoS header
state, LIB), the fork database, the LevelDB block store, the mempool and the chain manager
that ties them together. Nothing here imports another BoR package or touches the network;
the only I/O is the block store's LevelDB.
"""
