"""The pure chain core of BoR.

Types, canonical encoding, signatures, the state transition (native actions, the block
transition, DPoS header state, LIB), the fork database, the LevelDB block store, the mempool
and the chain manager that sequences them. Nothing here imports another BoR package or
touches the network; the only I/O is the block store's LevelDB.
"""
