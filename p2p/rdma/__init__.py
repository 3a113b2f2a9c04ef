"""The RDMA transport (pyverbs, imported lazily): detection, node-wide resources, channel."""
