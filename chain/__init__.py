"""The chain of BoR: a pure core, and the store and workers around it.

The pure core: types, canonical encoding, signatures, the state transition (native actions,
the block transition, DPoS, finality by votes, the state commitment), the fork database and
the mempool; functions of state and input, with no clock, disk or network. Around it: the
block store (LevelDB, with its commit mark), the block log and snapshots (files), signature
recovery in worker processes, and the chain manager (``controller``) that sequences them on
the chain thread and publishes a view and events after each change. Nothing here imports
another BoR package or touches the network.
"""
