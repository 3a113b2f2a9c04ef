"""The process the node runs in: file descriptors, the allocator, and logging."""
