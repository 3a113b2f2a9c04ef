"""Genesis files: load and validate them, derive the chain id, make dev genesis files."""
