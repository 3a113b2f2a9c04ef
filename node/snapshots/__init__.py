"""Snapshot files: writing, verifying and serving them, the periodic schedule, and the
header chain a state sync follows."""
