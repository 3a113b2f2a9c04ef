"""The chain of BoR, in floors: the rules, what keeps them, and the manager on top.

- ``chain.core``: the rules, pure: types, encoding, signatures, the transaction and block
  transitions, DPoS, finality by votes, the state commitment. No clock, disk or processes.
- ``chain.storage``: the LevelDB block store with its commit mark and state cache, the block
  log and snapshot files. ``chain.signatures``: signer keys recovered in worker processes.
- The chain manager: ``controller`` (``Chain``) sequences the floors on the chain thread and
  owns the fork database (``fork_db``), the ``mempool`` and the vote pool; after each change
  it publishes a ``view`` and ``events``.

Imports go down only (import-linter contracts in ``pyproject.toml``). Nothing here imports
another BoR package or touches the network.
"""
