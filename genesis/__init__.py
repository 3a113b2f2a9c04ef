"""Genesis files: load and validate them, derive the chain id, make dev genesis files; and
``genesis.testing``, a dev network with every key at hand for tests."""
