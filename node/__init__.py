"""The BoR daemon: configuration, the wiring, the chain thread, producer and finalizer,
admission, metrics, logging; the public RPC and event stream in ``node.api``.

This is the only package that reads configuration and wires the parts together; everything
below it receives what it needs as constructor arguments.
"""
