"""The BoR daemon: the wiring (``app``), the chain thread (``runner``), producer and voting,
admission, network and metrics; ``config`` (options declared once), ``snapshots``,
``commands`` (devnet, status, history), ``process`` (fds, allocator, logging); the public
RPC and event stream in ``api``.

This is the only package that reads configuration and wires the parts together; everything
below it receives what it needs as constructor arguments.
"""
