"""``bor-node`` commands beside ``run``: devnet, status, export and import of history."""
