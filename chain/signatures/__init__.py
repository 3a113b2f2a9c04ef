"""Who signed a transaction: signer keys recovered once and cached by transaction, in bulk
by worker processes. Built on ``chain.core`` alone.

This ``__init__`` imports nothing: a worker (``python -m chain.signatures.sigworker``) then
loads only what recovery needs.
"""
