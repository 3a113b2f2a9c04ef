"""``bor-wallet``: keys encrypted at rest, transaction building and signing, RPC client."""
