"""The BoR daemon: configuration, wiring, the producer loop, the HTTP RPC, metrics, logging.

This is the only package that reads configuration and wires the parts together; everything
below it receives what it needs as constructor arguments.
"""
